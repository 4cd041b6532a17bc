package reference

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestWaitGrace checks that, with WithWaitGrace, a reference that waits for
// its target writes nothing (and reads nothing again from the API server)
// within the grace and asks to be looked at when it ends; that a target
// Ready within the grace costs one write, the resolved reference; that a
// wait that outlasts the grace is confirmed and written as without it; and
// that an XR already showing the condition gets no grace.
func TestWaitGrace(t *testing.T) {
	raw := networkRule(t)
	xrWith := dbAndNetXR
	db := nop("db", field(map[string]any{"name": "net"}, "spec", "forProvider", "networkRef"))
	netReady := nop("net", ready("True"), field("net-1", "status", "atProvider", "id"))
	netWaiting := nop("net", ready("False"))

	type step struct {
		after   time.Duration // since the test's start
		net     *unstructured.Unstructured
		applied int
		status  int
		latest  int // reads from the API server under kube.Latest
		requeue time.Duration
	}
	cases := map[string]struct {
		reason string
		xr     *unstructured.Unstructured
		steps  []step
	}{
		"ReadyWithinGrace": {
			reason: "A target Ready within the grace costs one write: the resolved reference.",
			xr:     xrWith(),
			steps: []step{
				{after: 0, net: netWaiting, requeue: 5 * time.Second},
				{after: 2 * time.Second, net: netWaiting, requeue: 3 * time.Second},
				{after: 3 * time.Second, net: netReady, applied: 1},
			},
		},
		"WaitOutlastsGrace": {
			reason: "A wait that outlasts the grace is confirmed and written (the reference is in place already: the condition).",
			xr:     xrWith(),
			steps: []step{
				{after: 0, net: netWaiting, requeue: 5 * time.Second},
				{after: 5 * time.Second, net: netWaiting, status: 1, latest: 1},
			},
		},
		"ConditionShown": {
			reason: "An XR that shows the condition already gets no grace.",
			xr: xrWith(map[string]any{"type": string(TypeReferencesResolved), "status": "True", "reason": string(ReasonResolved),
				"lastTransitionTime": "2026-11-27T00:00:00Z"}),
			steps: []step{
				{after: 0, net: netWaiting, status: 1, latest: 1},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			start := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
			now := start
			c := &laggingClient{
				api:    map[string]*unstructured.Unstructured{"xr": tc.xr, "db": db},
				lagged: map[string]*unstructured.Unstructured{},
				rules:  []unstructured.Unstructured{{Object: raw}},
			}
			r := NewReconciler(c, NewRules(c, 0), WithConfirmedWaits(), WithWaitGrace(5*time.Second),
				WithClock(func() time.Time { return now }))
			for i, s := range tc.steps {
				now = start.Add(s.after)
				c.api["net"], c.lagged["net"] = s.net, s.net
				c.applied, c.statuses, c.gets = nil, nil, nil
				res, err := r.Reconcile(t.Context(), tc.xr.GroupVersionKind(), "", "xr", false)
				if err != nil {
					t.Fatalf("step %d: Reconcile(...): %v", i, err)
				}
				latest := 0
				for _, g := range c.gets {
					if g == "api net" {
						latest++
					}
				}
				got := step{after: s.after, net: s.net, applied: len(c.applied), status: len(c.statuses), latest: latest, requeue: res.RequeueAfter}
				if diff := cmp.Diff(s, got, cmp.AllowUnexported(step{})); diff != "" {
					t.Errorf("%s\nstep %d: -want, +got:\n%s", tc.reason, i, diff)
				}
			}
		})
	}
}
