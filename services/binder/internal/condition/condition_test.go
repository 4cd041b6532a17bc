package condition

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/pkg/apis/common"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
)

func withConditions(managed string, conds ...any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": conds}}}
	if managed != "" {
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{
			Manager: "loom-binder", Operation: metav1.ManagedFieldsOperationApply, Subresource: "status",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(managed)},
		}})
	}
	return u
}

func TestIntent(t *testing.T) {
	cases := map[string]struct {
		reason  string
		current *unstructured.Unstructured
		set     []common.Condition
		want    []any
	}{
		"New": {
			reason:  "A new condition transitions now.",
			current: withConditions(""),
			set:     []common.Condition{{Type: "Mine", Status: "True", Reason: "Ok"}},
			want:    []any{map[string]any{"type": "Mine", "status": "True", "reason": "Ok", "lastTransitionTime": "2026-01-02T00:00:00Z"}},
		},
		"Unchanged": {
			reason: "A condition that says the same keeps its transition time, so re-applying it is a no-op.",
			current: withConditions("",
				map[string]any{"type": "Mine", "status": "True", "reason": "Ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
			set:  []common.Condition{{Type: "Mine", Status: "True", Reason: "Ok"}},
			want: []any{map[string]any{"type": "Mine", "status": "True", "reason": "Ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}},
		},
		"CarriesOwned": {
			reason: "Another condition the manager owns is carried unchanged; others' conditions are not.",
			current: withConditions(`{"f:status":{"f:conditions":{"k:{\"type\":\"Bound\"}":{}}}}`,
				map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-01-01T00:00:00Z"},
				map[string]any{"type": "Bound", "status": "False", "reason": "Released", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
			set: []common.Condition{{Type: "Mine", Status: "False", Reason: "Waiting", Message: "x", ObservedGeneration: 3}},
			want: []any{
				map[string]any{"type": "Bound", "status": "False", "reason": "Released", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"},
				map[string]any{"type": "Mine", "status": "False", "reason": "Waiting", "message": "x", "observedGeneration": int64(3), "lastTransitionTime": "2026-01-02T00:00:00Z"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Intent(tc.current, "loom-binder", t1, tc.set...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nIntent(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestGet(t *testing.T) {
	u := withConditions("",
		map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		"not a condition",
		map[string]any{"status": "True"},
	)
	want := []common.Condition{{Type: "Ready", Status: "True", Reason: "Available", LastTransitionTime: t0}}
	if diff := cmp.Diff(want, Get(u)); diff != "" {
		t.Errorf("Get skips malformed entries: -want, +got:\n%s", diff)
	}
	if !IsTrue(u, common.TypeReady) || IsTrue(u, common.TypeSynced) {
		t.Errorf("IsTrue: want Ready true and Synced false")
	}
}
