package definition

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

func TestRoles(t *testing.T) {
	xrd := &v1.CompositeResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "xdbs.example.org", UID: "uid"},
		Spec: v1.CompositeResourceDefinitionSpec{
			Group: "example.org",
			Names: extv1.CustomResourceDefinitionNames{Kind: "XDB", Plural: "xdbs"},
		},
	}
	rules := func(withClaim bool) map[string]any {
		x := xrd.DeepCopy()
		if withClaim {
			x.Spec.ClaimNames = &extv1.CustomResourceDefinitionNames{Kind: "DB", Plural: "dbs"}
		}
		out := map[string]any{}
		for _, r := range Roles(x) {
			if r.GetLabels()[AggregationLabel(r.GetName()[len("loom:xrd:xdbs.example.org:"):])] != "true" {
				t.Errorf("role %s lacks its aggregation label: %v", r.GetName(), r.GetLabels())
			}
			out[r.GetName()] = r.Object["rules"]
		}
		return out
	}
	g := []any{"example.org"}
	want := map[string]any{
		"loom:xrd:xdbs.example.org:watcher": []any{map[string]any{"apiGroups": g, "resources": []any{"xdbs", "dbs"}, "verbs": []any{"get", "list", "watch"}}},
		"loom:xrd:xdbs.example.org:binder": []any{
			map[string]any{"apiGroups": g, "resources": []any{"dbs"}, "verbs": []any{"get", "update", "patch"}},
			map[string]any{"apiGroups": g, "resources": []any{"dbs/status", "xdbs/status"}, "verbs": []any{"get", "patch"}},
			map[string]any{"apiGroups": g, "resources": []any{"xdbs"}, "verbs": []any{"get", "create", "patch", "delete"}},
		},
		"loom:xrd:xdbs.example.org:renderer": []any{
			map[string]any{"apiGroups": g, "resources": []any{"xdbs"}, "verbs": []any{"get", "list", "patch", "delete"}},
			map[string]any{"apiGroups": g, "resources": []any{"xdbs/status"}, "verbs": []any{"get", "patch"}},
			map[string]any{"apiGroups": g, "resources": []any{"dbs"}, "verbs": []any{"list", "delete"}},
		},
		"loom:xrd:xdbs.example.org:secrets": []any{
			map[string]any{"apiGroups": g, "resources": []any{"xdbs", "dbs"}, "verbs": []any{"get"}},
			map[string]any{"apiGroups": g, "resources": []any{"xdbs/status", "dbs/status"}, "verbs": []any{"get", "patch"}},
		},
	}
	if diff := cmp.Diff(want, rules(true)); diff != "" {
		t.Errorf("Roles(XRD with claims): -want, +got:\n%s", diff)
	}
	noClaim := rules(false)
	if diff := cmp.Diff([]any{map[string]any{"apiGroups": g, "resources": []any{"xdbs"}, "verbs": []any{"get", "list", "watch"}}}, noClaim["loom:xrd:xdbs.example.org:watcher"]); diff != "" {
		t.Errorf("Roles(XRD without claims) watcher: -want, +got:\n%s", diff)
	}
	if got := noClaim["loom:xrd:xdbs.example.org:binder"].([]any); len(got) != 2 {
		t.Errorf("Roles(XRD without claims) binder has %d rules, want 2 (no claim rules)", len(got))
	}
}
