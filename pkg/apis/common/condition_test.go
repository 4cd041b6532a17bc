package common

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSetConditions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	ready := func(s corev1.ConditionStatus, r ConditionReason, at metav1.Time) Condition {
		return Condition{Type: TypeReady, Status: s, Reason: r, LastTransitionTime: at}
	}
	synced := Condition{Type: TypeSynced, Status: corev1.ConditionTrue, Reason: ReasonReconcileSuccess, LastTransitionTime: t0}

	cases := map[string]struct {
		reason string
		start  []Condition
		set    []Condition
		want   []Condition
	}{
		"Add": {
			reason: "A condition of a new type is appended.",
			start:  []Condition{synced},
			set:    []Condition{ready(corev1.ConditionFalse, ReasonCreating, t1)},
			want:   []Condition{synced, ready(corev1.ConditionFalse, ReasonCreating, t1)},
		},
		"SameConditionKeepsTransitionTime": {
			reason: "Setting an equal condition is not a transition: the old time stays.",
			start:  []Condition{ready(corev1.ConditionFalse, ReasonCreating, t0)},
			set:    []Condition{ready(corev1.ConditionFalse, ReasonCreating, t1)},
			want:   []Condition{ready(corev1.ConditionFalse, ReasonCreating, t0)},
		},
		"Replace": {
			reason: "A different condition of the same type replaces the old one in place.",
			start:  []Condition{ready(corev1.ConditionFalse, ReasonCreating, t0), synced},
			set:    []Condition{ready(corev1.ConditionTrue, ReasonAvailable, t1)},
			want:   []Condition{ready(corev1.ConditionTrue, ReasonAvailable, t1), synced},
		},
		"MessageIsPartOfTheCondition": {
			reason: "A new message is a new condition.",
			start:  []Condition{ready(corev1.ConditionFalse, ReasonCreating, t0)},
			set:    []Condition{ready(corev1.ConditionFalse, ReasonCreating, t1).WithMessage("waiting for db")},
			want:   []Condition{ready(corev1.ConditionFalse, ReasonCreating, t1).WithMessage("waiting for db")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &ConditionedStatus{Conditions: tc.start}
			s.SetConditions(tc.set...)
			if diff := cmp.Diff(tc.want, s.Conditions); diff != "" {
				t.Errorf("%s\nSetConditions(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestGetCondition(t *testing.T) {
	s := &ConditionedStatus{}
	s.SetConditions(ReconcileError(errors.New("cannot compose resources: boom")).WithObservedGeneration(3))

	got := s.GetCondition(TypeSynced)
	got.LastTransitionTime = metav1.Time{}
	want := Condition{Type: TypeSynced, Status: corev1.ConditionFalse, Reason: ReasonReconcileError, Message: "cannot compose resources: boom", ObservedGeneration: 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetCondition(Synced): -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(Condition{Type: TypeReady, Status: corev1.ConditionUnknown}, s.GetCondition(TypeReady)); diff != "" {
		t.Errorf("GetCondition of a missing type is Unknown: -want, +got:\n%s", diff)
	}
}
