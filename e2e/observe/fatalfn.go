//go:build e2e

package observe

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

// fatalFunction is a composition function that answers every call with a
// Fatal result, as a function does that rejects its input: a broken claim
// whose failing step the trace must show.
type fatalFunction struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
	srv  *grpc.Server
	addr string
}

// FatalMessage is the message of the fatal function's result.
const FatalMessage = "observe: this function fails on purpose"

func (f *fatalFunction) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	return &fnv1.RunFunctionResponse{
		Meta:    &fnv1.ResponseMeta{Tag: req.GetMeta().GetTag()},
		Desired: req.GetDesired(),
		Results: []*fnv1.Result{{Severity: fnv1.Severity_SEVERITY_FATAL, Message: FatalMessage}},
	}, nil
}

// startFatalFunction serves a fatalFunction over plaintext gRPC on a free
// loopback port (its Function object says insecure: true).
func startFatalFunction() (*fatalFunction, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot listen for the fatal function: %w", err)
	}
	f := &fatalFunction{srv: grpc.NewServer(), addr: l.Addr().String()}
	fnv1.RegisterFunctionRunnerServiceServer(f.srv, f)
	go func() { _ = f.srv.Serve(l) }()
	return f, nil
}

func (f *fatalFunction) stop() {
	if f != nil {
		f.srv.Stop()
	}
}
