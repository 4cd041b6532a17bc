// Command patch-and-transform is a test composition function that does the
// job of upstream's function-patch-and-transform
// (github.com/crossplane-contrib/function-patch-and-transform), which
// Crossplane's end-to-end suite uses and the module proxy does not serve. It
// renders its input's resource templates with Loom's own patch-and-transform
// engine (pkg/compose, the engine of Compositions in mode Resources):
//
//	apiVersion: pt.fn.crossplane.io/v1beta1
//	kind: Resources
//	patchSets: [...]      # as a Composition's spec.patchSets
//	resources: [...]      # as a Composition's spec.resources
//
// Like function-patch-and-transform, it adds each rendered composed resource
// to the desired state (replacing one of the same name an earlier step
// returned), marks it ready when it exists and passes its readiness checks,
// writes what ToCompositeFieldPath and CombineToComposite patches produce
// into the desired composite resource, and returns the connection details
// of the composed resources. A patch or template that fails is a Fatal
// result. Input environment (function-patch-and-transform's
// spec.environment) is refused: Crossplane's suite does not use it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/e2e/testfn/internal/testfn"
	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/compose"
	"github.com/loomxr/loom/pkg/fieldpath"
)

// APIVersion and Kind of the input, function-patch-and-transform's.
const (
	APIVersion = "pt.fn.crossplane.io/v1beta1"
	Kind       = "Resources"
)

// Input is function-patch-and-transform's input.
type Input struct {
	APIVersion  string                `json:"apiVersion"`
	Kind        string                `json:"kind"`
	Environment json.RawMessage       `json:"environment,omitempty"`
	PatchSets   []v1.PatchSet         `json:"patchSets,omitempty"`
	Resources   []v1.ComposedTemplate `json:"resources"`
}

type fn struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
}

func main() { testfn.Serve(&fn{}) }

// RunFunction renders the input's templates.
func (f *fn) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, response.DefaultTTL)
	if err := run(req, rsp); err != nil {
		response.Fatal(rsp, err)
	}
	return rsp, nil
}

func run(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse) error {
	in, err := decode(req)
	if err != nil {
		return err
	}
	xr := &unstructured.Unstructured{Object: req.GetObserved().GetComposite().GetResource().AsMap()}
	observed := map[string]*unstructured.Unstructured{}
	for name, r := range req.GetObserved().GetResources() {
		observed[name] = &unstructured.Unstructured{Object: r.GetResource().AsMap()}
	}
	res, err := compose.Render(compose.Request{
		Composite: xr,
		Composition: &v1.CompositionSpec{
			CompositeTypeRef: v1.TypeReference{APIVersion: xr.GetAPIVersion(), Kind: xr.GetKind()},
			Mode:             v1.CompositionModeResources,
			PatchSets:        in.PatchSets,
			Resources:        in.Resources,
		},
		Observed: observed,
	})
	if err != nil {
		return fmt.Errorf("cannot render the resources: %w", err)
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("cannot render the resources: %w", err)
	}

	if rsp.Desired == nil {
		rsp.Desired = &fnv1.State{}
	}
	if rsp.Desired.Resources == nil {
		rsp.Desired.Resources = map[string]*fnv1.Resource{}
	}
	for _, r := range res.Resources {
		if r.Desired == nil {
			// Held back: a Required patch's source does not exist yet.
			continue
		}
		// What only the composition machinery knows; Loom sets it.
		r.Desired.SetName("")
		r.Desired.SetOwnerReferences(nil)
		s, err := structpb.NewStruct(r.Desired.Object)
		if err != nil {
			return fmt.Errorf("cannot encode composed resource %q: %w", r.Name, err)
		}
		d := &fnv1.Resource{Resource: s}
		if r.Ready {
			d.Ready = fnv1.Ready_READY_TRUE
		}
		rsp.Desired.Resources[r.Name] = d
	}
	return desiredComposite(req, rsp, in, res)
}

// desiredComposite adds to the desired composite resource of rsp the
// values the patches into the composite resource wrote, and the connection
// details.
func desiredComposite(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, in Input, res *compose.Result) error {
	dxr := map[string]any{}
	if c := rsp.GetDesired().GetComposite(); c != nil && c.GetResource() != nil {
		dxr = c.GetResource().AsMap()
	}
	desired := fieldpath.Pave(dxr)
	rendered := fieldpath.Pave(res.Composite.Object)
	for _, path := range toCompositePaths(in) {
		paths, err := rendered.ExpandWildcards(path)
		if err != nil {
			return fmt.Errorf("cannot expand %q: %w", path, err)
		}
		for _, p := range paths {
			v, err := rendered.GetValue(p)
			if fieldpath.IsNotFound(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("cannot read %q of the composite resource: %w", p, err)
			}
			if err := desired.SetValue(p, v); err != nil {
				return fmt.Errorf("cannot write %q of the composite resource: %w", p, err)
			}
		}
	}
	details := map[string][]byte{}
	if c := rsp.GetDesired().GetComposite(); c != nil {
		for k, v := range c.GetConnectionDetails() {
			details[k] = v
		}
	}
	observed := req.GetObserved().GetResources()
	for _, cd := range res.ConnectionDetails {
		if cd.Type == v1.ConnectionDetailTypeFromConnectionSecretKey {
			v, ok := observed[cd.Template].GetConnectionDetails()[cd.FromConnectionSecretKey]
			if ok {
				details[cd.Name] = v
			}
			continue
		}
		details[cd.Name] = []byte(cd.Value)
	}
	if len(dxr) == 0 && len(details) == 0 {
		return nil
	}
	s, err := structpb.NewStruct(dxr)
	if err != nil {
		return fmt.Errorf("cannot encode the desired composite resource: %w", err)
	}
	rsp.Desired.Composite = &fnv1.Resource{Resource: s, ConnectionDetails: details}
	return nil
}

// toCompositePaths returns the destination of every patch of in, PatchSets
// included, that writes to the composite resource.
func toCompositePaths(in Input) []string {
	sets := map[string][]v1.Patch{}
	for _, s := range in.PatchSets {
		sets[s.Name] = s.Patches
	}
	var paths []string
	var visit func(ps []v1.Patch)
	visit = func(ps []v1.Patch) {
		for i := range ps {
			p := &ps[i]
			switch p.GetType() {
			case v1.PatchTypeToCompositeFieldPath, v1.PatchTypeCombineToComposite:
				paths = append(paths, p.GetToFieldPath())
			case v1.PatchTypePatchSet:
				if p.PatchSetName != nil {
					visit(sets[*p.PatchSetName])
				}
			default:
			}
		}
	}
	for i := range in.Resources {
		visit(in.Resources[i].Patches)
	}
	return paths
}

// decode returns the input of req.
func decode(req *fnv1.RunFunctionRequest) (Input, error) {
	in := Input{}
	if req.GetInput() == nil {
		return in, errors.New("input is required")
	}
	b, err := protojson.Marshal(req.GetInput())
	if err != nil {
		return in, fmt.Errorf("cannot encode input: %w", err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, fmt.Errorf("cannot decode input: %w", err)
	}
	if in.APIVersion != APIVersion || in.Kind != Kind {
		return in, fmt.Errorf("input must be %s %s, not %s %s", APIVersion, Kind, in.APIVersion, in.Kind)
	}
	if len(in.Environment) > 0 && string(in.Environment) != "null" {
		return in, errors.New("input environment is not supported by this test function")
	}
	return in, nil
}
