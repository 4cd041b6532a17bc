// Command read-context is a test composition function for the second step of
// a pipeline. It reads a key of the context an earlier step left (by default
// the summary compose-from-env writes) and composes one more NopResource
// whose spec.forProvider.fields hold that value. A missing key is a Fatal
// result.
//
//	apiVersion: testfn.loom.dev/v1alpha1
//	kind: Input
//	spec:
//	  contextKey: testfn.loom.dev/compose-from-env   # the default
//	  resourceName: from-context                     # the default
//	  behaviour: {...}                               # see package testfn
package main

import (
	"context"
	"fmt"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/loomxr/loom/e2e/testfn/internal/testfn"
)

type fn struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
}

func main() { testfn.Serve(&fn{}) }

// RunFunction composes one NopResource from a context key.
func (f *fn) RunFunction(ctx context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	in, err := testfn.GetInput(req)
	if err != nil {
		rsp := response.To(req, response.DefaultTTL)
		response.Fatal(rsp, err)
		return rsp, nil
	}
	rsp, done, err := testfn.Begin(ctx, req, in.Spec.Behaviour)
	if done {
		return rsp, err
	}
	key := in.Spec.ContextKey
	if key == "" {
		key = "testfn.loom.dev/compose-from-env"
	}
	name := in.Spec.ResourceName
	if name == "" {
		name = "from-context"
	}

	v, ok := request.GetContextKey(req, key)
	if !ok {
		response.Fatal(rsp, fmt.Errorf("context key %q not found", key))
		return rsp, nil
	}
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read desired composed resources: %w", err))
		return rsp, nil
	}
	u := composed.New()
	u.SetUnstructuredContent(map[string]any{
		"apiVersion": "nop.crossplane.io/v1alpha1",
		"kind":       "NopResource",
		"spec": map[string]any{
			"forProvider": map[string]any{
				"fields": map[string]any{"context": v.AsInterface()},
				"conditionAfter": []any{
					map[string]any{"time": "0s", "conditionType": "Ready", "conditionStatus": "True"},
				},
			},
		},
	})
	desired[resource.Name(name)] = &resource.DesiredComposed{Resource: u}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot set desired composed resources: %w", err))
		return rsp, nil
	}
	response.Normalf(rsp, "composed %q from context key %q", name, key)
	return rsp, nil
}
