package conditions

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/pkg/apis/common"
)

func TestSettle(t *testing.T) {
	old := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	ready := common.Condition{Type: common.TypeReady, Status: corev1.ConditionTrue, Reason: common.ReasonAvailable, LastTransitionTime: old}
	cases := map[string]struct {
		reason   string
		observed []common.Condition
		want     common.Condition
		wantTime metav1.Time
	}{
		"Unchanged": {reason: "A condition that says the same keeps its time.",
			observed: []common.Condition{ready},
			want:     common.Condition{Type: common.TypeReady, Status: corev1.ConditionTrue, Reason: common.ReasonAvailable, LastTransitionTime: now},
			wantTime: old},
		"Transition": {reason: "A condition that changes gets the new time.",
			observed: []common.Condition{ready},
			want:     common.Condition{Type: common.TypeReady, Status: corev1.ConditionFalse, Reason: common.ReasonCreating, LastTransitionTime: now},
			wantTime: now},
		"NewMessage": {reason: "A new message is a transition.",
			observed: []common.Condition{ready},
			want:     common.Condition{Type: common.TypeReady, Status: corev1.ConditionTrue, Reason: common.ReasonAvailable, Message: "m", LastTransitionTime: now},
			wantTime: now},
		"New": {reason: "A condition the object lacks gets the new time.",
			want:     common.Condition{Type: common.TypeSynced, Status: corev1.ConditionTrue, LastTransitionTime: now},
			wantTime: now},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Settle(tc.observed, []common.Condition{tc.want})
			if diff := cmp.Diff(tc.wantTime, got[0].LastTransitionTime); diff != "" {
				t.Errorf("%s\nSettle(...) time: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	in := []common.Condition{{Type: common.TypeReady, Status: corev1.ConditionTrue, Reason: common.ReasonAvailable,
		LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), ObservedGeneration: 3}}
	raw, err := Unstructured(in)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": append(raw, "not a condition")}}}
	if diff := cmp.Diff(in, Observed(u)); diff != "" {
		t.Errorf("Observed(Unstructured(...)): -want, +got:\n%s", diff)
	}
	if _, ok := Get(in, common.TypeSynced); ok {
		t.Error("Get found a condition that is not there")
	}
}
