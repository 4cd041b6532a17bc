package reference

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestResourceRefs(t *testing.T) {
	ref := map[string]any{"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "name": "a"}
	cases := map[string]struct {
		reason string
		xr     map[string]any
		want   []ComposedRef
	}{
		"Legacy": {
			reason: "A LegacyCluster XR lists its composed resources at spec.resourceRefs.",
			xr:     map[string]any{"spec": map[string]any{"resourceRefs": []any{ref}}},
			want:   []ComposedRef{{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource", Name: "a"}},
		},
		"Modern": {
			reason: "A Namespaced XR lists them at spec.crossplane.resourceRefs, in its own namespace.",
			xr: map[string]any{
				"metadata": map[string]any{"namespace": "team-a"},
				"spec":     map[string]any{"crossplane": map[string]any{"resourceRefs": []any{ref}}},
			},
			want: []ComposedRef{{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource", Namespace: "team-a", Name: "a"}},
		},
		"Malformed": {
			reason: "Entries without a kind or a name are skipped.",
			xr:     map[string]any{"spec": map[string]any{"resourceRefs": []any{map[string]any{"kind": "NopResource"}, "x"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ResourceRefs(&unstructured.Unstructured{Object: tc.xr})
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nResourceRefs(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
