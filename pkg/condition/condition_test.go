package condition

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/pkg/apis/common"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
)

const manager = "loom-binder"

// withConditions returns an object whose status.conditions are conds and,
// when managed is not empty, whose status Apply entry of manager is managed.
func withConditions(managed string, conds ...any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": conds}}}
	if managed != "" {
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{
			Manager: manager, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(managed)},
		}})
	}
	return u
}

func TestObserved(t *testing.T) {
	cases := map[string]struct {
		reason string
		obj    *unstructured.Unstructured
		want   []common.Condition
	}{
		"Nil": {
			reason: "A nil object has no conditions.",
		},
		"NoStatus": {
			reason: "An object without a status has no conditions.",
			obj:    &unstructured.Unstructured{Object: map[string]any{}},
			want:   []common.Condition{},
		},
		"Full": {
			reason: "Every field of a condition is read, an observed generation whatever number type holds it.",
			obj: withConditions("",
				map[string]any{"type": "Ready", "status": "True", "reason": "Available", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": int64(3)},
				map[string]any{"type": "Synced", "status": "False", "reason": "ReconcileError", "observedGeneration": float64(4)}),
			want: []common.Condition{
				{Type: "Ready", Status: "True", Reason: "Available", Message: "m", LastTransitionTime: t0, ObservedGeneration: 3},
				{Type: "Synced", Status: "False", Reason: "ReconcileError", ObservedGeneration: 4},
			},
		},
		"Malformed": {
			reason: "An entry that is not an object or has no type is skipped; a field of the wrong kind reads as its zero value.",
			obj: withConditions("",
				"not a condition",
				map[string]any{"status": "True"},
				map[string]any{"type": "Ready", "status": true, "lastTransitionTime": "yesterday"}),
			want: []common.Condition{{Type: "Ready"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Observed(tc.obj)); diff != "" {
				t.Errorf("\n%s\nObserved(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestFind(t *testing.T) {
	ready := common.Condition{Type: common.TypeReady, Status: corev1.ConditionTrue}
	cases := map[string]struct {
		reason string
		cs     []common.Condition
		t      common.ConditionType
		want   common.Condition
		wantOK bool
	}{
		"Found":   {reason: "The condition of the type is returned.", cs: []common.Condition{{Type: common.TypeSynced}, ready}, t: common.TypeReady, want: ready, wantOK: true},
		"Missing": {reason: "No condition of the type is the zero condition and false.", cs: []common.Condition{ready}, t: common.TypeSynced},
		"Empty":   {reason: "An empty list has no condition.", t: common.TypeReady},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := Find(tc.cs, tc.t)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nFind(...): -want, +got:\n%s", tc.reason, diff)
			}
			if ok != tc.wantOK {
				t.Errorf("\n%s\nFind(...): got ok %t, want %t", tc.reason, ok, tc.wantOK)
			}
		})
	}
}

func TestIsTrue(t *testing.T) {
	u := withConditions("",
		map[string]any{"type": "Ready", "status": "True"},
		map[string]any{"type": "Synced", "status": "False"})
	cases := map[string]struct {
		reason string
		obj    *unstructured.Unstructured
		t      common.ConditionType
		want   bool
	}{
		"True":    {reason: "A True condition is true.", obj: u, t: common.TypeReady, want: true},
		"False":   {reason: "A False condition is not.", obj: u, t: common.TypeSynced},
		"Missing": {reason: "A missing condition is not.", obj: u, t: "Bound"},
		"Nil":     {reason: "A nil object has no true condition.", t: common.TypeReady},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IsTrue(tc.obj, tc.t); got != tc.want {
				t.Errorf("\n%s\nIsTrue(...): got %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

func TestSettle(t *testing.T) {
	ready := common.Condition{Type: common.TypeReady, Status: corev1.ConditionTrue, Reason: common.ReasonAvailable, LastTransitionTime: t0}
	cases := map[string]struct {
		reason   string
		observed []common.Condition
		want     common.Condition
		wantTime metav1.Time
	}{
		"Unchanged": {
			reason:   "A condition that says the same keeps its time, so re-applying it is no change.",
			observed: []common.Condition{ready},
			want:     common.Condition{Type: common.TypeReady, Status: corev1.ConditionTrue, Reason: common.ReasonAvailable},
			wantTime: t0,
		},
		"Transition": {
			reason:   "A condition that changes gets now.",
			observed: []common.Condition{ready},
			want:     common.Condition{Type: common.TypeReady, Status: corev1.ConditionFalse, Reason: common.ReasonCreating, LastTransitionTime: t0},
			wantTime: t1,
		},
		"NewMessage": {
			reason:   "A new message is a transition.",
			observed: []common.Condition{ready},
			want:     common.Condition{Type: common.TypeReady, Status: corev1.ConditionTrue, Reason: common.ReasonAvailable, Message: "m"},
			wantTime: t1,
		},
		"New": {
			reason:   "A condition the object lacks gets now.",
			observed: []common.Condition{ready},
			want:     common.Condition{Type: common.TypeSynced, Status: corev1.ConditionTrue},
			wantTime: t1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := []common.Condition{tc.want}
			got := Settle(tc.observed, t1, in...)
			if diff := cmp.Diff(tc.wantTime, got[0].LastTransitionTime); diff != "" {
				t.Errorf("\n%s\nSettle(...) time: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, in[0]); diff != "" {
				t.Errorf("\n%s\nSettle(...) modified its argument: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestList(t *testing.T) {
	cases := map[string]struct {
		reason string
		cs     []common.Condition
		want   []any
	}{
		"Empty": {
			reason: "No conditions are an empty list, not null.",
			want:   []any{},
		},
		"SortedAndOmitted": {
			reason: "Conditions are sorted by type; an empty message or generation is left out, a set one kept as int64.",
			cs: []common.Condition{
				{Type: "Synced", Status: "True", Reason: "ReconcileSuccess", LastTransitionTime: t0},
				{Type: "Ready", Status: "False", Reason: "Creating", Message: "m", ObservedGeneration: 2, LastTransitionTime: t1},
			},
			want: []any{
				map[string]any{"type": "Ready", "status": "False", "reason": "Creating", "message": "m", "observedGeneration": int64(2), "lastTransitionTime": "2026-01-02T00:00:00Z"},
				map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, List(tc.cs...)); diff != "" {
				t.Errorf("\n%s\nList(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestListRoundTrip(t *testing.T) {
	in := []common.Condition{{Type: common.TypeReady, Status: corev1.ConditionTrue, Reason: common.ReasonAvailable, Message: "m", LastTransitionTime: t0, ObservedGeneration: 3}}
	u := withConditions("", List(in...)...)
	if diff := cmp.Diff(in, Observed(u)); diff != "" {
		t.Errorf("Observed(List(...)) is not what List was given: -want, +got:\n%s", diff)
	}
}

func TestOwned(t *testing.T) {
	cases := map[string]struct {
		reason  string
		obj     *unstructured.Unstructured
		manager string
		want    []common.ConditionType
	}{
		"NeverApplied": {
			reason:  "A manager without an Apply entry owns no condition.",
			obj:     withConditions(""),
			manager: manager,
		},
		"OtherManager": {
			reason:  "Another manager's entry is not this manager's.",
			obj:     withConditions(`{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{}}}}`),
			manager: "loom-renderer",
		},
		"Sorted": {
			reason:  "Condition types are read from the entry's keys and sorted; other status fields are not conditions.",
			obj:     withConditions(`{"f:status":{"f:phase":{},"f:conditions":{"k:{\"type\":\"Synced\"}":{},"k:{\"type\":\"Bound\"}":{},".":{}}}}`),
			manager: manager,
			want:    []common.ConditionType{"Bound", "Synced"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Owned(tc.obj, tc.manager)); diff != "" {
				t.Errorf("\n%s\nOwned(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
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
		"SetWinsOverOwned": {
			reason: "A condition the manager owns and sets again is the one set, not the one carried.",
			current: withConditions(`{"f:status":{"f:conditions":{"k:{\"type\":\"Mine\"}":{}}}}`,
				map[string]any{"type": "Mine", "status": "True", "reason": "Ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
			set:  []common.Condition{{Type: "Mine", Status: "False", Reason: "Broken"}},
			want: []any{map[string]any{"type": "Mine", "status": "False", "reason": "Broken", "lastTransitionTime": "2026-01-02T00:00:00Z"}},
		},
		"OwnedButGone": {
			reason:  "A type the manager owns that the object no longer holds is not carried.",
			current: withConditions(`{"f:status":{"f:conditions":{"k:{\"type\":\"Bound\"}":{}}}}`),
			set:     []common.Condition{{Type: "Mine", Status: "True", Reason: "Ok"}},
			want:    []any{map[string]any{"type": "Mine", "status": "True", "reason": "Ok", "lastTransitionTime": "2026-01-02T00:00:00Z"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Intent(tc.current, manager, t1, tc.set...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nIntent(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestFirstNAndSomeMore(t *testing.T) {
	cases := map[string]struct {
		reason string
		n      int
		names  []string
		want   string
	}{
		"None":  {reason: "No names, nothing listed.", n: 3, want: ""},
		"One":   {reason: "One name is itself.", n: 3, names: []string{"a"}, want: "a"},
		"Two":   {reason: "Fewer names than n are joined by commas alone.", n: 3, names: []string{"a", "b"}, want: "a, b"},
		"Three": {reason: "Exactly n names end with \", and\".", n: 3, names: []string{"a", "b", "c"}, want: "a, b, and c"},
		"Four":  {reason: "One past n is counted, not named.", n: 3, names: []string{"a", "b", "c", "d"}, want: "a, b, c, and 1 more"},
		"Five":  {reason: "Names past n are counted.", n: 3, names: []string{"a", "b", "c", "d", "e"}, want: "a, b, c, and 2 more"},
		"NOne":  {reason: "With n 1 a single name is itself.", n: 1, names: []string{"a"}, want: "a"},
		"Zero":  {reason: "With n 0 only the count is given.", n: 0, names: []string{"a", "b"}, want: "2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FirstNAndSomeMore(tc.n, tc.names)); diff != "" {
				t.Errorf("%s\nFirstNAndSomeMore(%d, %v): -want, +got:\n%s", tc.reason, tc.n, tc.names, diff)
			}
		})
	}
}
