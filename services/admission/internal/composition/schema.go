package composition

import (
	"fmt"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/compose"
	"github.com/loomxr/loom/pkg/fieldpath"
)

// schemaOf returns the OpenAPI schema of version of a CRD, or nil.
func schemaOf(crd *extv1.CustomResourceDefinition, version string) *extv1.JSONSchemaProps {
	if crd == nil {
		return nil
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Schema != nil {
			return v.Schema.OpenAPIV3Schema
		}
	}
	return nil
}

// withMetadata returns the metadata schema of s with the fields patches
// commonly read and write added where the CRD leaves them out (CRDs
// usually say nothing of metadata): name, namespace, uid, generateName, and
// labels and annotations as maps of strings. Other metadata fields are
// accepted untyped.
func withMetadata(s *extv1.JSONSchemaProps) *extv1.JSONSchemaProps {
	m := extv1.JSONSchemaProps{}
	if p, ok := s.Properties["metadata"]; ok {
		m = *p.DeepCopy()
	}
	if m.Type == "" {
		m.Type = "object"
	}
	m.XPreserveUnknownFields = ptrTrue()
	if m.Properties == nil {
		m.Properties = map[string]extv1.JSONSchemaProps{}
	}
	str := extv1.JSONSchemaProps{Type: "string"}
	strMap := extv1.JSONSchemaProps{Type: "object", AdditionalProperties: &extv1.JSONSchemaPropsOrBool{Allows: true, Schema: &str}}
	for name, def := range map[string]extv1.JSONSchemaProps{"name": str, "namespace": str, "uid": str, "generateName": str, "labels": strMap, "annotations": strMap} {
		if _, ok := m.Properties[name]; !ok {
			m.Properties[name] = def
		}
	}
	return &m
}

func ptrTrue() *bool { b := true; return &b }

// fieldType returns the JSON type the schema gives the field at path: ""
// when the schema accepts the path without saying its type (unknown fields
// are preserved, or no schema), an error when the schema cannot hold it (a
// field the schema does not define, an index into an object, an index
// beyond maxItems). A nil schema accepts everything.
func fieldType(s *extv1.JSONSchemaProps, path string) (string, error) {
	if s == nil || path == "" {
		return "", nil
	}
	segs, err := fieldpath.Parse(path)
	if err != nil {
		return "", err
	}
	cur := s
	for i, seg := range segs {
		if i == 0 && seg.Type == fieldpath.SegmentField && seg.Field == "metadata" {
			cur = withMetadata(cur)
			continue
		}
		next, err := child(cur, seg)
		if err != nil {
			return "", fmt.Errorf("%s: %w", fieldpath.Segments(segs[:i+1]), err)
		}
		if next == nil {
			return "", nil
		}
		cur = next
	}
	return cur.Type, nil
}

// child returns the schema of a segment below parent, nil when the schema
// does not say (preserved unknown fields, no items schema), or an error when
// parent cannot have it.
func child(parent *extv1.JSONSchemaProps, seg fieldpath.Segment) (*extv1.JSONSchemaProps, error) {
	if seg.Type == fieldpath.SegmentIndex || (seg.Field == fieldpath.Wildcard && parent.Type == "array") {
		if parent.Type != "array" {
			return nil, fmt.Errorf("cannot index a field of type %q", parent.Type)
		}
		if seg.Type == fieldpath.SegmentIndex && parent.MaxItems != nil && int64(seg.Index) >= *parent.MaxItems { //nolint:gosec // An index of a parsed path fits.
			return nil, fmt.Errorf("index %d is beyond the schema's maxItems %d", seg.Index, *parent.MaxItems)
		}
		if parent.Items == nil || parent.Items.Schema == nil {
			return nil, nil
		}
		return parent.Items.Schema, nil
	}
	if parent.Type != "" && parent.Type != "object" {
		return nil, fmt.Errorf("field %q of a value the schema types %q", seg.Field, parent.Type)
	}
	if p, ok := parent.Properties[seg.Field]; ok && seg.Field != fieldpath.Wildcard {
		return &p, nil
	}
	if parent.XPreserveUnknownFields != nil && *parent.XPreserveUnknownFields {
		return nil, nil
	}
	if ap := parent.AdditionalProperties; ap != nil && (ap.Allows || ap.Schema != nil) {
		return ap.Schema, nil
	}
	if seg.Field == fieldpath.Wildcard && len(parent.Properties) > 0 {
		return nil, nil
	}
	if len(parent.Properties) == 0 && parent.Type == "" {
		return nil, nil
	}
	return nil, fmt.Errorf("field %q is not in the schema", seg.Field)
}

// schemas are the schemas a template's patches move values between; nil
// means unknown (the environment has none).
type schemas struct {
	composite, composed *extv1.JSONSchemaProps
}

// patchSchemas returns the source and destination schema of a template's
// patch type.
func (s schemas) patchSchemas(t v1.PatchType) (from, to *extv1.JSONSchemaProps) {
	switch t { //nolint:exhaustive // PatchSets are inlined.
	case v1.PatchTypeFromCompositeFieldPath, v1.PatchTypeCombineFromComposite:
		return s.composite, s.composed
	case v1.PatchTypeToCompositeFieldPath, v1.PatchTypeCombineToComposite:
		return s.composed, s.composite
	case v1.PatchTypeFromEnvironmentFieldPath, v1.PatchTypeCombineFromEnvironment:
		return nil, s.composed
	case v1.PatchTypeToEnvironmentFieldPath, v1.PatchTypeCombineToEnvironment:
		return s.composed, nil
	}
	return nil, nil
}

// validatePatch checks one patch (not a PatchSet) against the schemas: its
// field paths exist, and the type that arrives at toFieldPath, through the
// transforms, is the type the destination holds.
func validatePatch(p v1.Patch, s schemas, path *field.Path) *field.Error {
	from, to := s.patchSchemas(p.GetType())
	var fromType string
	switch p.GetType() { //nolint:exhaustive // Only combines differ.
	case v1.PatchTypeCombineFromComposite, v1.PatchTypeCombineToComposite, v1.PatchTypeCombineFromEnvironment, v1.PatchTypeCombineToEnvironment:
		if p.Combine != nil {
			for i, v := range p.Combine.Variables {
				if _, err := fieldType(from, v.FromFieldPath); err != nil {
					return field.Invalid(path.Child("combine", "variables").Index(i).Child("fromFieldPath"), v.FromFieldPath, err.Error())
				}
			}
		}
		fromType = "string"
	default:
		t, err := fieldType(from, p.GetFromFieldPath())
		if err != nil {
			return field.Invalid(path.Child("fromFieldPath"), p.GetFromFieldPath(), err.Error())
		}
		fromType = t
	}
	toType, err := fieldType(to, p.GetToFieldPath())
	if err != nil {
		return field.Invalid(path.Child("toFieldPath"), p.GetToFieldPath(), err.Error())
	}

	out := fromType
	for i, t := range p.Transforms {
		o, err := compose.TransformOutputType(t, out)
		if err != nil {
			return field.Invalid(path.Child("transforms").Index(i), compose.DescribeTransform(t), err.Error())
		}
		out = o
		if out == "" {
			// The rest of the chain cannot be typed without values.
			return nil
		}
	}
	if compatible(out, toType) {
		return nil
	}
	if len(p.Transforms) == 0 {
		return field.Required(path.Child("transforms"), fmt.Sprintf("the fromFieldPath is of type %s and the toFieldPath of type %s according to their schemas, and no transforms convert one to the other", fromType, toType))
	}
	return field.Invalid(path.Child("transforms"), len(p.Transforms), fmt.Sprintf("the transforms output %s, but the toFieldPath is of type %s according to its schema", out, toType))
}

// compatible reports whether a value of JSON type got may be written where
// the schema wants type want ("" is unknown, and fits); an integer is a
// number.
func compatible(got, want string) bool {
	return got == "" || want == "" || got == want || (got == "integer" && want == "number")
}
