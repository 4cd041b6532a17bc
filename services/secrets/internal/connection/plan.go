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
//   - mode Pipeline: exactly the connection details that the function
//     pipeline returns for the XR (desired.composite.connection_details of
//     the last step), as in Crossplane v1; the Composition itself says
//     nothing about them. The renderer runs the pipeline and hands those
//     details to the secrets service over mutual TLS (never on the bus),
//     which keeps them in the XR's staging Secret (package staging); they
//     reach Compute as Input.Returned.
//   - a Composition in mode Resources that lists no connection details at
//     all aggregates (the seed's rule): the XR's Secret is the union of every composed
//     resource's connection Secret, in template order, a later template
//     winning a key both hold (each such key is a Conflict). A template
//     whose base carries the annotation loom.dev/connection-secret-prefix
//     prefixes the keys of its resource's Secret with the annotation's
//     value. Resources not named by any template (created by functions)
//     come after the templates, by name.
//
// The XRD's connectionSecretKeys, when set, filter the keys. When the XRD
// declares keys that the Composition cannot provide (no connection detail of
// that name, in mode Resources outside aggregation), Result.Missing names
// them: the contract check of the seed. What functions return cannot be
// known before they run, so a Pipeline's keys are absent, never missing.
package connection

import (
	"encoding/json"
	"fmt"
	"slices"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/compose"
)

// AnnotationPrefix on a template's base (or on a composed resource) prefixes
// the keys its connection Secret contributes when the Composition
// aggregates (lists no connection details).
const AnnotationPrefix = "loom.dev/connection-secret-prefix"

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
	// Templates in Composition order (mode Resources).
	Templates []Template
	// Aggregate is true when no template lists connection details: the
	// XR's Secret is then the union of the composed resources' Secrets.
	Aggregate bool
	// Pipeline is true for a Composition in mode Pipeline: the XR's
	// connection details are those its functions return (Input.Returned).
	Pipeline bool
}

// PlanFor returns the Plan of a Composition's (or revision's) spec. A
// template base whose annotations cannot be decoded is an error.
func PlanFor(spec *v1.CompositionSpec) (Plan, error) {
	if spec.GetMode() == v1.CompositionModePipeline {
		return Plan{Pipeline: true}, nil
	}
	var p Plan
	for i := range spec.Resources {
		t := &spec.Resources[i]
		prefix, err := basePrefix(t.Base.Raw)
		if err != nil {
			return Plan{}, fmt.Errorf("spec.resources[%d].base: %w", i, err)
		}
		p.Templates = append(p.Templates, Template{Name: compose.TemplateName(t, i), Prefix: prefix, Details: t.ConnectionDetails})
	}
	p.Aggregate = !slices.ContainsFunc(p.Templates, func(t Template) bool { return len(t.Details) > 0 })
	return p, nil
}

// Provides returns the names of the keys the plan's connection details can
// provide, sorted, and whether the plan says: an aggregating plan cannot
// know its keys before the composed resources' Secrets exist, nor a
// pipeline before its functions run.
func (p Plan) Provides() ([]string, bool) {
	if p.Aggregate || p.Pipeline {
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
