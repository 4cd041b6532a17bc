// Command auto-ready is a test composition function that does the job of
// upstream's function-auto-ready
// (github.com/crossplane-contrib/function-auto-ready), which Crossplane's
// end-to-end suite uses and the module proxy does not serve: it marks each
// desired composed resource whose readiness no earlier step decided ready
// when the composed resource exists and its Ready condition is True. It
// takes no input.
package main

import (
	"context"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/loomxr/loom/e2e/testfn/internal/testfn"
)

type fn struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
}

func main() { testfn.Serve(&fn{}) }

// RunFunction marks ready the desired composed resources whose observed
// counterpart has the condition Ready True.
func (f *fn) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, response.DefaultTTL)
	observed := req.GetObserved().GetResources()
	for name, d := range rsp.GetDesired().GetResources() {
		if d.GetReady() != fnv1.Ready_READY_UNSPECIFIED {
			continue
		}
		o, ok := observed[name]
		if !ok || !readyTrue(o.GetResource().AsMap()) {
			continue
		}
		d.Ready = fnv1.Ready_READY_TRUE
	}
	return rsp, nil
}

// readyTrue reports whether the object u has the condition Ready with
// status True.
func readyTrue(u map[string]any) bool {
	status, _ := u["status"].(map[string]any)
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}
