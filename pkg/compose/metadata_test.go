package compose

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

func TestSetComposedMetadata(t *testing.T) {
	const owner = `{"apiVersion":"example.org/v1","kind":"XApp","name":"app","uid":"uid-1","controller":true,"blockOwnerDeletion":true}`
	cases := map[string]struct {
		reason   string
		xr       string
		obj      string
		observed string
		want     string
		wantErr  string
	}{
		"Derived": {
			reason: "A new composed resource without a name gets the deterministic name, the composite label, the annotation and the controller reference.",
			xr:     `{"apiVersion":"example.org/v1","kind":"XApp","metadata":{"name":"app","uid":"uid-1"}}`,
			obj:    `{"apiVersion":"v1","kind":"ConfigMap"}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + ComposedName("app-", "uid-1", "cm") + `",
				"labels":{"crossplane.io/composite":"app"},"annotations":{"crossplane.io/composition-resource-name":"cm"},"ownerReferences":[` + owner + `]}}`,
		},
		"GenerateName": {
			reason: "generateName is the prefix of the deterministic name, and is cleared.",
			xr:     `{"apiVersion":"example.org/v1","kind":"XApp","metadata":{"name":"app","uid":"uid-1"}}`,
			obj:    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"cfg-"}}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + ComposedName("cfg-", "uid-1", "cm") + `",
				"labels":{"crossplane.io/composite":"app"},"annotations":{"crossplane.io/composition-resource-name":"cm"},"ownerReferences":[` + owner + `]}}`,
		},
		"ObservedAndClaim": {
			reason:   "An observed resource keeps its name and namespace; the claim labels come from spec.claimRef, the root from the XR's label.",
			xr:       `{"apiVersion":"example.org/v1","kind":"XApp","metadata":{"name":"app","uid":"uid-1","labels":{"crossplane.io/composite":"root"}},"spec":{"claimRef":{"name":"c","namespace":"team"}}}`,
			obj:      `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"wanted"}}`,
			observed: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing","namespace":"there"}}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing","namespace":"there",
				"labels":{"crossplane.io/composite":"root","crossplane.io/claim-name":"c","crossplane.io/claim-namespace":"team"},
				"annotations":{"crossplane.io/composition-resource-name":"cm"},"ownerReferences":[` + owner + `]}}`,
		},
		"NamespacedXR": {
			reason: "A namespaced XR imposes its namespace.",
			xr:     `{"apiVersion":"example.org/v1","kind":"XApp","metadata":{"name":"app","namespace":"team-a","uid":"uid-1"}}`,
			obj:    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"elsewhere"}}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"team-a",
				"labels":{"crossplane.io/composite":"app"},"annotations":{"crossplane.io/composition-resource-name":"cm"},"ownerReferences":[` + owner + `]}}`,
		},
		"OtherController": {
			reason:  "A resource controlled by someone else is refused.",
			xr:      `{"apiVersion":"example.org/v1","kind":"XApp","metadata":{"name":"app","uid":"uid-1"}}`,
			obj:     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"other","controller":true}]}}`,
			wantErr: `ownerReferences: already controlled by Pod "p"`,
		},
		"InvalidName": {
			reason:  "A name the API server would refuse is refused.",
			xr:      `{"apiVersion":"example.org/v1","kind":"XApp","metadata":{"name":"app","uid":"uid-1"}}`,
			obj:     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Not_Valid"}}`,
			wantErr: `name "Not_Valid": a lowercase RFC 1123 subdomain`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := u(t, tc.obj)
			var observed *unstructured.Unstructured
			if tc.observed != "" {
				observed = u(t, tc.observed)
			}
			err := SetComposedMetadata(u(t, tc.xr), obj, "cm", observed)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nSetComposedMetadata(...): error %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nSetComposedMetadata(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(jsonObj(t, tc.want), runtime.DeepCopyJSON(obj.Object)); diff != "" {
				t.Errorf("%s\nSetComposedMetadata(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

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
				Patches: []v1.Patch{{Type: v1.PatchTypeFromCompositeFieldPath, FromFieldPath: ptr("spec.ns"), ToFieldPath: ptr("metadata.namespace")}},
			}}},
			want: PatchedNamespace,
		},
		"PatchSet": {
			reason: "A PatchSet's patches count as the template's.",
			spec: v1.CompositionSpec{
				PatchSets: []v1.PatchSet{{Name: "ns", Patches: []v1.Patch{{Type: v1.PatchTypeCombineFromComposite, ToFieldPath: ptr("metadata.namespace")}}}},
				Resources: []v1.ComposedTemplate{{
					Base:    base(`{"apiVersion":"v1","kind":"ConfigMap"}`),
					Patches: []v1.Patch{{Type: v1.PatchTypePatchSet, PatchSetName: ptr("ns")}},
				}},
			},
			want: PatchedNamespace,
		},
		"ToComposite": {
			reason: "A patch that writes the XR's metadata.namespace does not move the composed resource.",
			spec: v1.CompositionSpec{Resources: []v1.ComposedTemplate{{
				Base:    base(`{"apiVersion":"v1","kind":"ConfigMap"}`),
				Patches: []v1.Patch{{Type: v1.PatchTypeToCompositeFieldPath, FromFieldPath: ptr("metadata.namespace"), ToFieldPath: ptr("metadata.namespace")}},
			}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, TemplateNamespace(&tc.spec, 0)); diff != "" {
				t.Errorf("%s\nTemplateNamespace(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCheckNamespace(t *testing.T) {
	namespaced := `{"apiVersion":"example.org/v1","kind":"XApp","metadata":{"name":"app","namespace":"team-a"}}`
	cases := map[string]struct {
		reason    string
		xr        string
		requested string
		want      string
	}{
		"ClusterScoped": {
			reason:    "A cluster-scoped XR may compose into any namespace.",
			xr:        `{"apiVersion":"example.org/v1","kind":"XApp","metadata":{"name":"app"}}`,
			requested: "elsewhere",
		},
		"None": {
			reason: "A namespaced XR's resource that asks for no namespace goes into the XR's.",
			xr:     namespaced,
		},
		"Own": {
			reason:    "A namespaced XR's resource may name the XR's namespace.",
			xr:        namespaced,
			requested: "team-a",
		},
		"Other": {
			reason:    "A namespaced XR's resource that names another namespace is refused.",
			xr:        namespaced,
			requested: "elsewhere",
			want:      `composed resource "cm": namespace "elsewhere" is not the composite resource's namespace "team-a", and a Namespaced composite resource may compose only into its own`,
		},
		"Patched": {
			reason:    "A namespaced XR's template that patches metadata.namespace is refused.",
			xr:        namespaced,
			requested: PatchedNamespace,
			want:      `composed resource "cm": a patch writes metadata.namespace, and a Namespaced composite resource may compose only into its own namespace`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if err := CheckNamespace(u(t, tc.xr), "cm", tc.requested); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nCheckNamespace(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
