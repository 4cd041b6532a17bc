// Command connection-details is a test composition function that returns
// connection details for the XR, as Crossplane v1's Pipeline Compositions
// do. It composes one NopResource, db, whose connection Secret (in
// spec.secretNamespace, named <XR UID>-db) holds spec.secretData; it
// returns as the XR's connection details the keys of spec.copy, copied
// from the connection details Loom observed for db (so a rotation of db's
// Secret flows through it), and the fixed values of spec.fixed. It never
// logs or reports a value.
//
//	apiVersion: testfn.loom.dev/v1alpha1
//	kind: Input
//	spec:
//	  secretNamespace: team-system         # where db's Secret goes
//	  secretData: {password: initial}       # what db's Secret holds
//	  copy: {db-password: password}         # XR key: db's key
//	  fixed: {endpoint: "db.example:5432"}  # XR key: value
//	  behaviour: {...}                      # see package testfn
package main

import (
	"context"
	"fmt"
	"maps"
	"slices"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/loomxr/loom/e2e/testfn/internal/testfn"
)

// db is the composition resource name of the NopResource it composes.
const db = resource.Name("db")

type fn struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
}

func main() { testfn.Serve(&fn{}) }

// RunFunction composes db and returns the XR's connection details.
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
	oxr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read the observed XR: %w", err))
		return rsp, nil
	}
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read the observed composed resources: %w", err))
		return rsp, nil
	}
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read the desired composed resources: %w", err))
		return rsp, nil
	}
	dxr, err := request.GetDesiredCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read the desired XR: %w", err))
		return rsp, nil
	}

	var secretData []any
	for _, k := range slices.Sorted(maps.Keys(in.Spec.SecretData)) {
		secretData = append(secretData, map[string]any{"name": k, "value": in.Spec.SecretData[k]})
	}
	u := composed.New()
	u.SetUnstructuredContent(map[string]any{
		"apiVersion": "nop.crossplane.io/v1alpha1",
		"kind":       "NopResource",
		"spec": map[string]any{
			"forProvider": map[string]any{
				"connectionDetails": secretData,
				"conditionAfter": []any{
					map[string]any{"time": "0s", "conditionType": "Ready", "conditionStatus": "True"},
				},
			},
			"writeConnectionSecretToRef": map[string]any{
				"namespace": in.Spec.SecretNamespace,
				"name":      string(oxr.Resource.GetUID()) + "-db",
			},
		},
	})
	desired[db] = &resource.DesiredComposed{Resource: u}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot set desired composed resources: %w", err))
		return rsp, nil
	}

	details := resource.ConnectionDetails{}
	for k, v := range in.Spec.Fixed {
		details[k] = []byte(v)
	}
	copied := 0
	for to, from := range in.Spec.Copy {
		if v, ok := observed[db].ConnectionDetails[from]; ok {
			details[to] = v
			copied++
		}
	}
	dxr.ConnectionDetails = details
	if err := response.SetDesiredCompositeResource(rsp, dxr); err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot set the desired XR: %w", err))
		return rsp, nil
	}
	// Counts only: never a value.
	response.Normalf(rsp, "returned %d connection details, %d of them observed", len(details), copied)
	return rsp, nil
}
