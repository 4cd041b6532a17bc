// Command compose-from-env is a test composition function. It requires the
// EnvironmentConfigs its input's labels select, composes spec.count
// NopResources whose spec.forProvider.fields merge the data of what it found,
// sets the condition EnvironmentFound on the XR and its claim, reports a
// Normal result, and puts what it did into the context under
// testfn.loom.dev/compose-from-env for later steps.
//
//	apiVersion: testfn.loom.dev/v1alpha1
//	kind: Input
//	spec:
//	  labels: {env: prod}   # EnvironmentConfigs to require
//	  count: 2              # NopResources to compose (default 1)
//	  watch: true           # ask Loom to watch them (loom.dev/watch/ prefix)
//	  deprecated: false     # use the deprecated extra_resources fields
//	  require: {...}        # require something else instead (apiVersion, kind, name|labels, namespace)
//	  behaviour: {...}      # see package testfn
package main

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/loomxr/loom/e2e/testfn/internal/testfn"
)

// ContextKey is where the function leaves its summary in the context.
const ContextKey = "testfn.loom.dev/compose-from-env"

// callsKey counts calls in the context when behaviour.unstable is set.
const callsKey = "testfn.loom.dev/calls"

// watchPrefix is Loom's marker for requirements to watch.
const watchPrefix = "loom.dev/watch/"

type fn struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
}

func main() { testfn.Serve(&fn{}) }

// RunFunction composes NopResources from EnvironmentConfigs.
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

	name := "environment"
	if in.Spec.Watch {
		name = watchPrefix + name
	}
	if in.Spec.Behaviour.Unstable {
		// A new name on every call: the requirements never settle. The
		// call count travels in the context, which is passed from one
		// call of a step to the next.
		n := 0.0
		if v, ok := request.GetContextKey(req, callsKey); ok {
			n = v.GetNumberValue()
		}
		response.SetContextKey(rsp, callsKey, structpb.NewNumberValue(n+1))
		name += "-" + strconv.Itoa(int(n))
	}
	sel := selector(in.Spec)
	rsp.Requirements = &fnv1.Requirements{}
	if in.Spec.Deprecated {
		rsp.Requirements.ExtraResources = map[string]*fnv1.ResourceSelector{name: sel} //nolint:staticcheck // The deprecated field is what this case tests.
	} else {
		rsp.Requirements.Resources = map[string]*fnv1.ResourceSelector{name: sel}
	}

	var found []resource.Required
	var resolved bool
	if in.Spec.Deprecated {
		var all map[string][]resource.Required
		all, err = request.GetExtraResources(req) //nolint:staticcheck // As above.
		found, resolved = all[name]
	} else {
		found, resolved, err = request.GetRequiredResource(req, name)
	}
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read required resources: %w", err))
		return rsp, nil
	}
	if !resolved {
		// First call: ask for the resources and come back.
		return rsp, nil
	}

	fields := map[string]any{}
	names := make([]any, 0, len(found))
	for _, r := range found {
		names = append(names, r.Resource.GetName())
		if data, ok := r.Resource.Object["data"].(map[string]any); ok {
			maps.Copy(fields, data)
		}
	}
	count := max(in.Spec.Count, 1)
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read desired composed resources: %w", err))
		return rsp, nil
	}
	for i := range count {
		fl := maps.Clone(fields)
		fl["index"] = int64(i)
		nop := map[string]any{
			"apiVersion": "nop.crossplane.io/v1alpha1",
			"kind":       "NopResource",
			"spec": map[string]any{
				"forProvider": map[string]any{
					"fields": fl,
					"conditionAfter": []any{
						map[string]any{"time": "0s", "conditionType": "Ready", "conditionStatus": "True"},
					},
				},
			},
		}
		cd, err := composedFrom(nop)
		if err != nil {
			response.Fatal(rsp, err)
			return rsp, nil
		}
		desired[resource.Name("nop-"+strconv.Itoa(i))] = cd
	}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot set desired composed resources: %w", err))
		return rsp, nil
	}

	if len(found) > 0 {
		response.ConditionTrue(rsp, "EnvironmentFound", "Found").
			WithMessage(fmt.Sprintf("found %d EnvironmentConfigs", len(found))).TargetCompositeAndClaim()
	} else {
		response.ConditionFalse(rsp, "EnvironmentFound", "NotFound").
			WithMessage("no EnvironmentConfig matched").TargetCompositeAndClaim()
	}
	response.Normalf(rsp, "composed %d NopResources from %d EnvironmentConfigs", count, len(found)).
		TargetCompositeAndClaim()

	summary, err := structpb.NewValue(map[string]any{
		"requirement":  name,
		"found":        len(found),
		"environments": names,
		"fields":       fields,
		"composed":     count,
	})
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot build context: %w", err))
		return rsp, nil
	}
	response.SetContextKey(rsp, ContextKey, summary)
	return rsp, nil
}

// selector builds the requirement the input asks for.
func selector(s testfn.Spec) *fnv1.ResourceSelector {
	r := testfn.Requirement{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", Labels: s.Labels}
	if s.Require != nil {
		r = *s.Require
	}
	sel := &fnv1.ResourceSelector{ApiVersion: r.APIVersion, Kind: r.Kind}
	if r.Namespace != "" {
		sel.Namespace = &r.Namespace
	}
	if r.Name != "" {
		sel.Match = &fnv1.ResourceSelector_MatchName{MatchName: r.Name}
	} else {
		sel.Match = &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: maps.Clone(r.Labels)}}
	}
	return sel
}
