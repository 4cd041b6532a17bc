package crdvalidation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func crd() *extv1.CustomResourceDefinition {
	return &extv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.org"},
		Spec: extv1.CustomResourceDefinitionSpec{
			Group: "example.org",
			Names: extv1.CustomResourceDefinitionNames{Kind: "Widget", Plural: "widgets"},
			Scope: extv1.NamespaceScoped,
			Versions: []extv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &extv1.CustomResourceValidation{OpenAPIV3Schema: &extv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]extv1.JSONSchemaProps{
						"spec": {
							Type: "object",
							Properties: map[string]extv1.JSONSchemaProps{
								"size":  {Type: "integer", Default: &extv1.JSON{Raw: []byte(`3`)}},
								"owner": {Type: "string", XValidations: extv1.ValidationRules{{Rule: "self == oldSelf", Message: "owner is immutable"}}},
							},
						},
					},
				}},
			}},
		},
	}
}

func TestCRD(t *testing.T) {
	cases := map[string]struct {
		reason string
		crd    func() *extv1.CustomResourceDefinition
		want   []string
	}{
		"Valid": {
			reason: "A well-formed CRD passes.",
			crd:    crd,
		},
		"WrongName": {
			reason: "The API server requires <plural>.<group>.",
			crd: func() *extv1.CustomResourceDefinition {
				c := crd()
				c.Name = "gadgets.example.org"
				return c
			},
			want: []string{"metadata.name"},
		},
		"NotStructural": {
			reason: "A property without a type is not structural.",
			crd: func() *extv1.CustomResourceDefinition {
				c := crd()
				c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"] = extv1.JSONSchemaProps{}
				return c
			},
			want: []string{"spec.validation.openAPIV3Schema.properties[spec].properties[size].type"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs, err := CRD(t.Context(), tc.crd())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nCRD(...) error fields: -want, +got:\n%s\n%v", tc.reason, diff, errs)
			}
		})
	}
}

func TestValidator(t *testing.T) {
	if _, err := NewValidator(crd(), "v2"); err == nil {
		t.Errorf("NewValidator(..., %q): want an error for an unknown version", "v2")
	}
	v, err := NewValidator(crd(), "v1")
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]any{"apiVersion": "example.org/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}, "spec": map[string]any{"owner": "a"}}
	obj := map[string]any{"apiVersion": "example.org/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}, "spec": map[string]any{"owner": "b", "colour": "red"}}

	r := v.Validate(t.Context(), obj, old)
	if diff := cmp.Diff([]string{"spec.colour"}, r.Pruned); diff != "" {
		t.Errorf("unknown fields are reported: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(int64(3), r.Object["spec"].(map[string]any)["size"]); diff != "" {
		t.Errorf("defaults are applied: -want, +got:\n%s", diff)
	}
	if len(r.Errs) != 1 || r.Errs[0].Field != "spec.owner" {
		t.Errorf("transition rules are evaluated against the old object: want one error on spec.owner, got %v", r.Errs)
	}
	if _, ok := obj["spec"].(map[string]any)["colour"]; !ok {
		t.Errorf("Validate must not modify its input")
	}
	if r := v.Validate(t.Context(), obj, nil); len(r.Errs) != 0 {
		t.Errorf("without an old object transition rules do not apply: %v", r.Errs)
	}
}
