package composition

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// crdMap is a CRDGetter over fixed CRDs.
type crdMap map[schema.GroupKind]*extv1.CustomResourceDefinition

func (m crdMap) CRD(gk schema.GroupKind) (*extv1.CustomResourceDefinition, error) {
	if c, ok := m[gk]; ok {
		return c, nil
	}
	return nil, kerrors.NewNotFound(schema.GroupResource{Resource: "customresourcedefinitions"}, gk.String())
}

func crd(t *testing.T, group, kind, version, schemaYAML string) *extv1.CustomResourceDefinition {
	t.Helper()
	s := &extv1.JSONSchemaProps{}
	if err := yaml.Unmarshal([]byte(schemaYAML), s); err != nil {
		t.Fatal(err)
	}
	c := &extv1.CustomResourceDefinition{}
	c.Spec.Group = group
	c.Spec.Names.Kind = kind
	c.Spec.Versions = []extv1.CustomResourceDefinitionVersion{{Name: version, Schema: &extv1.CustomResourceValidation{OpenAPIV3Schema: s}}}
	return c
}

// The schemas of upstream's test/e2e/manifests/apiextensions/composition/validation.
const (
	xrSchema = `
type: object
properties:
  spec: {type: object, properties: {coolField: {type: string}, tags: {type: array, maxItems: 2, items: {type: string}}}}
  status: {type: object, properties: {coolerField: {type: string}, evenCoolerField: {type: integer}, ratio: {type: number}}}`
	nopSchema = `
type: object
properties:
  spec:
    type: object
    properties:
      forProvider:
        type: object
        properties:
          conditionAfter: {type: array, items: {type: object, properties: {time: {type: string}}}}
          fields: {type: object, x-kubernetes-preserve-unknown-fields: true}
  status: {type: object, properties: {atProvider: {type: object, properties: {count: {type: integer}}}}}`
)

const compositionHead = `
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: c
  annotations: {crossplane.io/composition-schema-aware-validation-mode: %s}
spec:
  compositeTypeRef: {apiVersion: nop.example.org/v1alpha1, kind: XNopResource}
  resources:
  - name: nop
    base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    patches:
`

func composition(mode, patches string) string {
	return fmt.Sprintf(compositionHead, mode) + patches
}

func TestValidate(t *testing.T) {
	all := crdMap{
		{Group: "nop.example.org", Kind: "XNopResource"}:  crd(t, "nop.example.org", "XNopResource", "v1alpha1", xrSchema),
		{Group: "nop.crossplane.io", Kind: "NopResource"}: crd(t, "nop.crossplane.io", "NopResource", "v1alpha1", nopSchema),
	}
	noNop := crdMap{{Group: "nop.example.org", Kind: "XNopResource"}: all[schema.GroupKind{Group: "nop.example.org", Kind: "XNopResource"}]}

	const valid = `
    - {fromFieldPath: spec.coolField, toFieldPath: "metadata.annotations[cool-field]", transforms: [{type: string, string: {type: Convert, convert: ToUpper}}]}
    - {type: ToCompositeFieldPath, fromFieldPath: "metadata.annotations[cool-field]", toFieldPath: status.coolerField}
    - {fromFieldPath: spec, toFieldPath: "metadata.annotations[spec]", transforms: [{type: string, string: {type: Convert, convert: ToJson}}]}
    - {type: ToCompositeFieldPath, fromFieldPath: status.atProvider.count, toFieldPath: status.ratio}
    - {fromFieldPath: spec.coolField, toFieldPath: spec.forProvider.fields.anything}`
	const stringToInteger = `
    - {type: ToCompositeFieldPath, fromFieldPath: "metadata.annotations[cool-field]", toFieldPath: status.evenCoolerField}`

	type want struct {
		denied   bool
		warnings int
	}
	cases := map[string]struct {
		reason string
		crds   crdMap
		comp   string
		want   want
	}{
		"ValidStrict": {
			reason: "Upstream's valid Compositions, and an integer into a number, pass in strict mode.",
			crds:   all, comp: composition("strict", valid),
		},
		"InvalidStrict": {
			reason: "A string patched into an integer without transforms is denied in strict mode.",
			crds:   all, comp: composition("strict", stringToInteger),
			want: want{denied: true},
		},
		"InvalidLoose": {
			reason: "Loose mode denies what the schemas refute.",
			crds:   all, comp: composition("loose", stringToInteger),
			want: want{denied: true},
		},
		"InvalidWarn": {
			reason: "Warn mode admits it with a warning.",
			crds:   all, comp: composition("warn", stringToInteger),
			want: want{warnings: 1},
		},
		"InvalidDefault": {
			reason: "Without the annotation the mode is warn, Crossplane v1.20's default.",
			crds:   all, comp: composition("", stringToInteger),
			want: want{warnings: 1},
		},
		"UnknownField": {
			reason: "A field the schema does not define is refuted.",
			crds:   all, comp: composition("strict", `
    - {fromFieldPath: spec.nope, toFieldPath: spec.forProvider.fields.a}`),
			want: want{denied: true},
		},
		"IndexBeyondMaxItems": {
			reason: "An index beyond maxItems is refuted.",
			crds:   all, comp: composition("strict", `
    - {fromFieldPath: "spec.tags[2]", toFieldPath: spec.forProvider.fields.a}`),
			want: want{denied: true},
		},
		"MathOnString": {
			reason: "A math transform of a string is refuted.",
			crds:   all, comp: composition("strict", `
    - {fromFieldPath: spec.coolField, toFieldPath: spec.forProvider.fields.a, transforms: [{type: math, math: {multiply: 2}}]}`),
			want: want{denied: true},
		},
		"ConvertFixesType": {
			reason: "A convert transform makes a string fit an integer.",
			crds:   all, comp: composition("strict", `
    - {type: ToCompositeFieldPath, fromFieldPath: "metadata.annotations[n]", toFieldPath: status.evenCoolerField, transforms: [{type: convert, convert: {toType: int64}}]}`),
		},
		"MissingStrict": {
			reason: "Strict mode denies a Composition whose composed kind has no CRD.",
			crds:   noNop, comp: composition("strict", valid),
			want: want{denied: true},
		},
		"MissingLoose": {
			reason: "Loose mode admits it with a warning naming the missing CRD.",
			crds:   noNop, comp: composition("loose", stringToInteger),
			want: want{warnings: 1},
		},
		"BadMode": {
			reason: "An unknown mode is refused.",
			crds:   all, comp: composition("lenient", valid),
			want: want{denied: true},
		},
		"LogicallyInvalid": {
			reason: "A Composition invalid on its own is denied in every mode.",
			crds:   all, comp: composition("warn", `
    - {type: ToCompositeFieldPath, toFieldPath: status.coolerField}`),
			want: want{denied: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw, err := yaml.YAMLToJSON([]byte(tc.comp))
			if err != nil {
				t.Fatal(err)
			}
			req := &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Name: "c", Object: runtime.RawExtension{Raw: raw}}
			warnings, err := NewValidator(tc.crds).Validate(t.Context(), req)
			got := want{denied: err != nil, warnings: len(warnings)}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s\nerr: %v\nwarnings: %v", tc.reason, diff, err, warnings)
			}
		})
	}
}

func TestValidateImmutable(t *testing.T) {
	old, _ := yaml.YAMLToJSON([]byte(composition("strict", "    - {fromFieldPath: spec.coolField, toFieldPath: spec.forProvider.fields.a}")))
	m := map[string]any{}
	_ = json.Unmarshal(old, &m)
	m["spec"].(map[string]any)["compositeTypeRef"] = map[string]any{"apiVersion": "nop.example.org/v1alpha1", "kind": "NopResource"}
	updated, _ := json.Marshal(m)
	req := &admissionv1.AdmissionRequest{Operation: admissionv1.Update, Name: "c", Object: runtime.RawExtension{Raw: updated}, OldObject: runtime.RawExtension{Raw: old}}
	_, err := NewValidator(crdMap{}).Validate(t.Context(), req)
	if !kerrors.IsInvalid(err) {
		t.Errorf("changing spec.compositeTypeRef: want an Invalid error, got %v", err)
	}
}
