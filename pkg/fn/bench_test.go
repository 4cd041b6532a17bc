package fn

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

// BenchmarkRun measures one pipeline step over real gRPC with mutual TLS
// against an in-process function that echoes its desired state (TTL 1m), for
// an XR with 10 observed composed resources: tagging, encoding, the call and
// decoding; and the same served from the Cache.
func BenchmarkRun(b *testing.B) {
	handle := func(ctx context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
		rsp, err := echo(ctx, req)
		rsp.Meta.Ttl = durationpb.New(time.Minute)
		return rsp, err
	}
	target := serve(b, func(s *grpc.Server) { fnv1.RegisterFunctionRunnerServiceServer(s, &v1Server{handle: handle}) })
	obs := observedXR()
	obs.Resources = map[string]Resource{}
	for i := range 10 {
		obs.Resources[fmt.Sprintf("r%d", i)] = Resource{Object: map[string]any{
			"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
			"metadata": map[string]any{"name": fmt.Sprintf("r%d", i)},
			"spec":     map[string]any{"forProvider": map[string]any{"fields": map[string]any{"a": "b", "n": int64(i)}}},
		}}
	}
	steps := []Step{{Name: "s", Function: "f"}}
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("cached=%t", cached), func(b *testing.B) {
			c := NewClient(StaticResolver{"f": target})
			defer func() { _ = c.Close() }()
			var r Runner = c
			if cached {
				r = NewCache(c)
			}
			e := NewExecutor(r)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Run(b.Context(), steps, obs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
