// Package connection computes what a composite resource's (XR's)
// connection Secret holds, from what its Composition says and what its
// composed resources and their connection Secrets hold. It is pure: no I/O,
// the same Input always gives the same Result, and it never logs, so secret
// values stay in the returned Data only.
//
// # Where the keys come from
//
// A Plan is what a Composition (revision) says about connection details:
//
//   - mode Resources: each template's connectionDetails (Crossplane v1
//     semantics, through compose.ExtractConnectionDetails: FromConnectionSecretKey
//     with optional renaming by name, FromFieldPath, FromValue; a later
//     detail of the same name wins).
//   - mode Pipeline: the connectionDetails of the templates of every step
//     whose input is function-patch-and-transform's (pt.fn.crossplane.io
//     Resources), with the same semantics. Connection details that other
//     functions return for the XR are computed by the renderer, which must
//     not put secret values on the bus: Loom cannot see them (Plan.Unseen
//     names those steps) and they are not published.
//   - a Composition that lists no connection details at all aggregates (the
//     seed's rule): the XR's Secret is the union of every composed
//     resource's connection Secret, in template order, a later template
//     winning a key both hold (each such key is a Conflict). A template
//     whose base carries the annotation loom.dev/connection-secret-prefix
//     prefixes the keys of its resource's Secret with the annotation's
//     value. Resources not named by any template (created by functions)
//     come after the templates, by name.
//
// The XRD's connectionSecretKeys, when set, filter the keys. When the XRD
// declares keys that the Composition cannot provide (no connection detail of
// that name, outside aggregation), Result.Missing names them: the contract
// check of the seed.
package connection

import (
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/compose"
)

// AnnotationPrefix on a template's base (or on a composed resource) prefixes
// the keys its connection Secret contributes when the Composition
// aggregates (lists no connection details).
const AnnotationPrefix = "loom.dev/connection-secret-prefix"

// patchAndTransform is the group and kind of function-patch-and-transform's
// input.
var patchAndTransform = schema.GroupKind{Group: "pt.fn.crossplane.io", Kind: "Resources"}

// A Template is one composed resource of a Composition, as far as connection
// details are concerned.
type Template struct {
	// Name is the composition resource name (the composed resource's
	// crossplane.io/composition-resource-name annotation).
	Name string
	// Prefix is the value of the base's AnnotationPrefix, if any.
	Prefix string
	// Details are the template's connectionDetails.
	Details []v1.ConnectionDetail
}

// A Plan is what a Composition says about the XR's connection details.
type Plan struct {
	// Templates in Composition order (for a pipeline: step order, then
	// each step's resource order; a later step's template of the same name
	// replaces the earlier one in place).
	Templates []Template
	// Aggregate is true when no template lists connection details: the
	// XR's Secret is then the union of the composed resources' Secrets.
	Aggregate bool
	// Unseen are the pipeline steps whose functions may return connection
	// details that Loom cannot see (every step whose input is not
	// function-patch-and-transform's).
	Unseen []string
}

// PlanFor returns the Plan of a Composition's (or revision's) spec. An input
// of function-patch-and-transform that cannot be decoded is an error.
func PlanFor(spec *v1.CompositionSpec) (Plan, error) {
	var p Plan
	switch spec.GetMode() {
	case v1.CompositionModePipeline:
		for _, s := range spec.Pipeline {
			ts, ok, err := patchAndTransformTemplates(s)
			if err != nil {
				return Plan{}, err
			}
			if !ok {
				p.Unseen = append(p.Unseen, s.Step)
				continue
			}
			for _, t := range ts {
				if i := slices.IndexFunc(p.Templates, func(o Template) bool { return o.Name == t.Name }); i >= 0 {
					p.Templates[i] = t
					continue
				}
				p.Templates = append(p.Templates, t)
			}
		}
	default:
		for i := range spec.Resources {
			t := &spec.Resources[i]
			prefix, err := basePrefix(t.Base.Raw)
			if err != nil {
				return Plan{}, fmt.Errorf("spec.resources[%d].base: %w", i, err)
			}
			p.Templates = append(p.Templates, Template{Name: compose.TemplateName(t, i), Prefix: prefix, Details: t.ConnectionDetails})
		}
	}
	p.Aggregate = !slices.ContainsFunc(p.Templates, func(t Template) bool { return len(t.Details) > 0 })
	return p, nil
}

// Provides returns the names of the keys the plan's connection details can
// provide, sorted, and whether the plan says: an aggregating plan cannot
// know its keys before the composed resources' Secrets exist.
func (p Plan) Provides() ([]string, bool) {
	if p.Aggregate {
		return nil, false
	}
	var keys []string
	for _, t := range p.Templates {
		for _, d := range t.Details {
			if n := detailName(d); n != "" && !slices.Contains(keys, n) {
				keys = append(keys, n)
			}
		}
	}
	slices.Sort(keys)
	return keys, true
}

// detailName is the key a connection detail writes.
func detailName(d v1.ConnectionDetail) string {
	if d.Name != nil && *d.Name != "" {
		return *d.Name
	}
	if d.GetType() == v1.ConnectionDetailTypeFromConnectionSecretKey && d.FromConnectionSecretKey != nil {
		return *d.FromConnectionSecretKey
	}
	return ""
}

// ptInput is the part of function-patch-and-transform's input that
// connection details need.
type ptInput struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Resources  []struct {
		Name              string                `json:"name"`
		Base              json.RawMessage       `json:"base,omitempty"`
		ConnectionDetails []v1.ConnectionDetail `json:"connectionDetails,omitempty"`
	} `json:"resources"`
}

// patchAndTransformTemplates returns the templates of a step whose input is
// function-patch-and-transform's, and false for any other step.
func patchAndTransformTemplates(s v1.PipelineStep) ([]Template, bool, error) {
	if s.Input == nil || len(s.Input.Raw) == 0 {
		return nil, false, nil
	}
	var in ptInput
	if err := json.Unmarshal(s.Input.Raw, &in); err != nil {
		// Not an object of the shape we know; some other function's input.
		return nil, false, nil //nolint:nilerr // Other functions' inputs are opaque.
	}
	gv, err := schema.ParseGroupVersion(in.APIVersion)
	if err != nil || gv.WithKind(in.Kind).GroupKind() != patchAndTransform {
		return nil, false, nil //nolint:nilerr // Other functions' inputs are opaque.
	}
	ts := make([]Template, 0, len(in.Resources))
	for i, r := range in.Resources {
		prefix, err := basePrefix(r.Base)
		if err != nil {
			return nil, false, fmt.Errorf("spec.pipeline step %q: input.resources[%d].base: %w", s.Step, i, err)
		}
		ts = append(ts, Template{Name: r.Name, Prefix: prefix, Details: r.ConnectionDetails})
	}
	return ts, true, nil
}

// basePrefix reads AnnotationPrefix from a template's base.
func basePrefix(raw []byte) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var base struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &base); err != nil {
		return "", fmt.Errorf("cannot decode: %w", err)
	}
	return base.Metadata.Annotations[AnnotationPrefix], nil
}
