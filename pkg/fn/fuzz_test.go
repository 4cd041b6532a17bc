package fn

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

// FuzzResponse feeds arbitrary responses to the Executor: whatever a function
// returns, Run must not panic, and a successful Run must decode.
func FuzzResponse(f *testing.F) {
	seed := func(r *fnv1.RunFunctionResponse) {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true)
	}
	nop, _ := structpb.NewStruct(map[string]any{"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "spec": map[string]any{"n": 1.5}})
	seed(&fnv1.RunFunctionResponse{Desired: &fnv1.State{Resources: map[string]*fnv1.Resource{"a": {Resource: nop, Ready: fnv1.Ready_READY_TRUE}}}, Meta: &fnv1.ResponseMeta{Ttl: durationpb.New(60e9)}})
	seed(&fnv1.RunFunctionResponse{Results: []*fnv1.Result{{Severity: fnv1.Severity_SEVERITY_FATAL, Message: "x"}}})
	seed(&fnv1.RunFunctionResponse{Desired: &fnv1.State{}, Requirements: &fnv1.Requirements{
		Resources:      map[string]*fnv1.ResourceSelector{"loom.dev/watch/e": {ApiVersion: "v1", Kind: "ConfigMap", Match: &fnv1.ResourceSelector_MatchName{MatchName: "a"}}},
		ExtraResources: map[string]*fnv1.ResourceSelector{"x": {ApiVersion: "v1", Kind: "ConfigMap", Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{}}}},
		Schemas:        map[string]*fnv1.SchemaSelector{"s": {ApiVersion: "v1", Kind: "ConfigMap"}},
	}})
	seed(&fnv1.RunFunctionResponse{Desired: &fnv1.State{}, Conditions: []*fnv1.Condition{{Type: "Ready"}, {Type: "Custom", Status: fnv1.Status_STATUS_CONDITION_TRUE}}})
	f.Add([]byte{0xff, 0x01}, false)

	fetch := ResourceFetcherFn(func(_ context.Context, s Selector) ([]map[string]any, error) {
		return []map[string]any{{"apiVersion": s.APIVersion, "kind": s.Kind, "metadata": map[string]any{"name": "a"}}}, nil
	})
	f.Fuzz(func(t *testing.T, b []byte, echoTag bool) {
		runner := RunnerFn(func(_ context.Context, _ string, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
			rsp := &fnv1.RunFunctionResponse{}
			if err := proto.Unmarshal(b, rsp); err != nil {
				return nil, err
			}
			if echoTag {
				if rsp.Meta == nil {
					rsp.Meta = &fnv1.ResponseMeta{}
				}
				rsp.Meta.Tag = req.GetMeta().GetTag()
			}
			return rsp, nil
		})
		e := NewExecutor(runner, WithResourceFetcher(fetch))
		steps := []Step{{Name: "a", Function: "f"}, {Name: "b", Function: "f", AllowedExtraResources: []AllowedResource{{APIVersion: "v1", Kind: "ConfigMap"}}}}
		out, err := e.Run(context.Background(), steps, observedXR())
		if err == nil && len(out.Steps) != 2 {
			t.Errorf("successful Run did not run both steps: %+v", out.Steps)
		}
		if err != nil && !IsPermanent(err) && !IsTransient(err) {
			t.Errorf("error %v is neither permanent nor transient", err)
		}
	})
}
