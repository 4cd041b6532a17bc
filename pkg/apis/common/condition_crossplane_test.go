package common

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	xpv1 "github.com/crossplane/crossplane-runtime/apis/common/v1"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The tests of this file compare Loom's conditions with Crossplane's, byte for
// byte in JSON: xpv1 is crossplane-runtime v1.20's apis/common/v1, the
// condition helpers Crossplane v1.20 writes claims and XRs with, and xpv2 is
// the same helpers in Crossplane v2's API module (crossplane-runtime v2
// moved them there).

// at is the transition time every compared condition gets, since the helpers
// stamp the current time.
var at = metav1.NewTime(time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC))

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("cannot marshal %#v: %v", v, err)
	}
	return string(b)
}

func TestConditionHelpersAsCrossplane(t *testing.T) {
	boom := errors.New("cannot compose resources: boom")
	type trio struct {
		loom Condition
		v1   xpv1.Condition
		v2   xpv2.Condition
	}
	cases := map[string]struct {
		reason string
		c      trio
	}{
		"Available":        {reason: "Ready True, Available.", c: trio{Available(), xpv1.Available(), xpv2.Available()}},
		"Unavailable":      {reason: "Ready False, Unavailable.", c: trio{Unavailable(), xpv1.Unavailable(), xpv2.Unavailable()}},
		"Creating":         {reason: "Ready False, Creating.", c: trio{Creating(), xpv1.Creating(), xpv2.Creating()}},
		"Deleting":         {reason: "Ready False, Deleting.", c: trio{Deleting(), xpv1.Deleting(), xpv2.Deleting()}},
		"ReconcileSuccess": {reason: "Synced True.", c: trio{ReconcileSuccess(), xpv1.ReconcileSuccess(), xpv2.ReconcileSuccess()}},
		"ReconcileError":   {reason: "Synced False with the error as message.", c: trio{ReconcileError(boom), xpv1.ReconcileError(boom), xpv2.ReconcileError(boom)}},
		"ReconcilePaused":  {reason: "Synced False, paused.", c: trio{ReconcilePaused(), xpv1.ReconcilePaused(), xpv2.ReconcilePaused()}},
		"WithMessage": {reason: "A message is written after the reason.",
			c: trio{Creating().WithMessage("Unready resources: a, b"), xpv1.Creating().WithMessage("Unready resources: a, b"), xpv2.Creating().WithMessage("Unready resources: a, b")}},
		"WithObservedGeneration": {reason: "An observed generation, where one is set, is the last field.",
			c: trio{Available().WithObservedGeneration(4), xpv1.Available().WithObservedGeneration(4), xpv2.Available().WithObservedGeneration(4)}},
		"Custom": {reason: "A condition of another type, with quotes and HTML in its message.",
			c: trio{
				Condition{Type: "Bound", Status: "True", Reason: "Bound", Message: `Bound to claim "ns/a<b>&c"`},
				xpv1.Condition{Type: "Bound", Status: "True", Reason: "Bound", Message: `Bound to claim "ns/a<b>&c"`},
				xpv2.Condition{Type: "Bound", Status: "True", Reason: "Bound", Message: `Bound to claim "ns/a<b>&c"`},
			}},
		"Zero": {reason: "The zero condition: empty type, status and reason are written, the time as null.",
			c: trio{Condition{}, xpv1.Condition{}, xpv2.Condition{}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if !tc.c.loom.LastTransitionTime.IsZero() {
				tc.c.loom.LastTransitionTime, tc.c.v1.LastTransitionTime, tc.c.v2.LastTransitionTime = at, at, at
			}
			got := marshal(t, tc.c.loom)
			if diff := cmp.Diff(marshal(t, tc.c.v1), got); diff != "" {
				t.Errorf("%s\nJSON: -crossplane-runtime v1.20 (xpv1), +loom:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(marshal(t, tc.c.v2), got); diff != "" {
				t.Errorf("%s\nJSON: -crossplane v2 (core/v2), +loom:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSetConditionsAsCrossplane applies the same sequence of SetConditions
// calls to Loom's and crossplane-runtime v1.20's ConditionedStatus and
// compares the JSON of the statuses.
func TestSetConditionsAsCrossplane(t *testing.T) {
	later := metav1.NewTime(at.Add(time.Minute))
	// c builds the same condition in both packages.
	type c struct {
		typ, status, reason, message string
		gen                          int64
		at                           metav1.Time
	}
	toLoom := func(cs []c) []Condition {
		out := make([]Condition, 0, len(cs))
		for _, x := range cs {
			out = append(out, Condition{Type: ConditionType(x.typ), Status: statusOr(x.status), Reason: ConditionReason(x.reason), Message: x.message, ObservedGeneration: x.gen, LastTransitionTime: x.at})
		}
		return out
	}
	toXP := func(cs []c) []xpv1.Condition {
		out := make([]xpv1.Condition, 0, len(cs))
		for _, x := range cs {
			out = append(out, xpv1.Condition{Type: xpv1.ConditionType(x.typ), Status: statusOr(x.status), Reason: xpv1.ConditionReason(x.reason), Message: x.message, ObservedGeneration: x.gen, LastTransitionTime: x.at})
		}
		return out
	}
	cases := map[string]struct {
		reason string
		start  []c
		sets   [][]c
	}{
		"Empty": {reason: "Setting nothing on nothing leaves no conditions (the field is omitted).",
			sets: [][]c{{}}},
		"FirstConditions": {reason: "Conditions of new types are appended in the order given.",
			sets: [][]c{{{typ: "Synced", reason: "ReconcileSuccess", at: at}, {typ: "Ready", status: "False", reason: "Creating", at: at}}}},
		"Transition": {reason: "A changed condition replaces the old one in place, with its new time.",
			start: []c{{typ: "Synced", reason: "ReconcileSuccess", at: at}, {typ: "Ready", status: "False", reason: "Creating", at: at}},
			sets:  [][]c{{{typ: "Ready", reason: "Available", at: later}}}},
		"NoTransition": {reason: "An equal condition keeps the old time.",
			start: []c{{typ: "Ready", reason: "Available", at: at}},
			sets:  [][]c{{{typ: "Ready", reason: "Available", at: later}}}},
		"MessageChange": {reason: "A new message is a transition.",
			start: []c{{typ: "Ready", status: "False", reason: "Creating", message: "Unready resources: a", at: at}},
			sets:  [][]c{{{typ: "Ready", status: "False", reason: "Creating", message: "Unready resources: b", at: later}}}},
		"GenerationChange": {reason: "In v1.20 a new observed generation is a transition.",
			start: []c{{typ: "Ready", reason: "Available", gen: 1, at: at}},
			sets:  [][]c{{{typ: "Ready", reason: "Available", gen: 2, at: later}}}},
		"Duplicates": {reason: "Every existing condition of the type is replaced.",
			start: []c{{typ: "Ready", status: "False", reason: "Creating", at: at}, {typ: "Synced", reason: "ReconcileSuccess", at: at}, {typ: "Ready", status: "False", reason: "Unavailable", at: at}},
			sets:  [][]c{{{typ: "Ready", reason: "Available", at: later}}}},
		"SameTypeTwice": {reason: "The later of two conditions of one type in one call wins.",
			sets: [][]c{{{typ: "Ready", status: "False", reason: "Creating", at: at}, {typ: "Ready", reason: "Available", at: later}}}},
		"Sequence": {reason: "A claim's life: creating, ready, an error, recovered.",
			sets: [][]c{
				{{typ: "Synced", reason: "ReconcileSuccess", at: at}, {typ: "Ready", status: "False", reason: "Creating", at: at}},
				{{typ: "Synced", reason: "ReconcileSuccess", at: later}, {typ: "Ready", reason: "Available", at: later}},
				{{typ: "Synced", status: "False", reason: "ReconcileError", message: "boom", at: later}},
				{{typ: "Synced", reason: "ReconcileSuccess", at: later}},
			}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			loom := &ConditionedStatus{Conditions: toLoom(tc.start)}
			xp := &xpv1.ConditionedStatus{Conditions: toXP(tc.start)}
			if len(tc.start) == 0 {
				loom.Conditions, xp.Conditions = nil, nil
			}
			for _, set := range tc.sets {
				loom.SetConditions(toLoom(set)...)
				xp.SetConditions(toXP(set)...)
			}
			if diff := cmp.Diff(marshal(t, xp), marshal(t, loom)); diff != "" {
				t.Errorf("%s\nJSON of the status: -crossplane-runtime v1.20, +loom:\n%s", tc.reason, diff)
			}
		})
	}
}

func statusOr(s string) corev1.ConditionStatus {
	if s == "" {
		return "True"
	}
	return corev1.ConditionStatus(s)
}
