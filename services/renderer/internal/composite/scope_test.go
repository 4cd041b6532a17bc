package composite

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

func TestTemplateNamespace(t *testing.T) {
	base := func(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }
	cases := map[string]struct {
		reason string
		spec   v1.CompositionSpec
		want   string
	}{
		"None": {
			reason: "A template that names no namespace asks for none.",
			spec:   v1.CompositionSpec{Resources: []v1.ComposedTemplate{{Base: base(`{"apiVersion":"v1","kind":"ConfigMap"}`)}}},
		},
		"Base": {
			reason: "A template asks for the namespace its base names.",
			spec:   v1.CompositionSpec{Resources: []v1.ComposedTemplate{{Base: base(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"other"}}`)}}},
			want:   "other",
		},
		"Patch": {
			reason: "A patch that writes metadata.namespace asks for a namespace known only when rendering.",
			spec: v1.CompositionSpec{Resources: []v1.ComposedTemplate{{
				Base:    base(`{"apiVersion":"v1","kind":"ConfigMap"}`),
				Patches: []v1.Patch{{Type: v1.PatchTypeFromCompositeFieldPath, FromFieldPath: ptr.To("spec.ns"), ToFieldPath: ptr.To("metadata.namespace")}},
			}}},
			want: patchedNamespace,
		},
		"PatchSet": {
			reason: "A PatchSet's patches count as the template's.",
			spec: v1.CompositionSpec{
				PatchSets: []v1.PatchSet{{Name: "ns", Patches: []v1.Patch{{Type: v1.PatchTypeCombineFromComposite, ToFieldPath: ptr.To("metadata.namespace")}}}},
				Resources: []v1.ComposedTemplate{{
					Base:    base(`{"apiVersion":"v1","kind":"ConfigMap"}`),
					Patches: []v1.Patch{{Type: v1.PatchTypePatchSet, PatchSetName: ptr.To("ns")}},
				}},
			},
			want: patchedNamespace,
		},
		"ToComposite": {
			reason: "A patch that writes the XR's metadata.namespace does not move the composed resource.",
			spec: v1.CompositionSpec{Resources: []v1.ComposedTemplate{{
				Base:    base(`{"apiVersion":"v1","kind":"ConfigMap"}`),
				Patches: []v1.Patch{{Type: v1.PatchTypeToCompositeFieldPath, FromFieldPath: ptr.To("metadata.namespace"), ToFieldPath: ptr.To("metadata.namespace")}},
			}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, templateNamespace(&tc.spec, 0)); diff != "" {
				t.Errorf("%s\ntemplateNamespace(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
