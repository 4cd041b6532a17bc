package route

import (
	"context"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/reconcile"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/secrets/internal/fake"
	"github.com/loomxr/loom/services/secrets/internal/tracker"
)

type reconciled []tracker.Target

func (r *reconciled) Reconcile(_ context.Context, t tracker.Target) (reconcile.Result, error) {
	*r = append(*r, t)
	return reconcile.Result{}, nil
}

type published []*eventsv1.Event

func (p *published) Publish(_ context.Context, service string, ev *eventsv1.Event) error {
	if service == "secrets" {
		*p = append(*p, ev)
	}
	return nil
}

var claimGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "DB"}

const objects = `
apiVersion: example.org/v1
kind: DB
metadata: {name: db, namespace: team, uid: claim-1, generation: 2}
spec:
  resourceRef: {apiVersion: example.org/v1, kind: XDB, name: db-x}
---
apiVersion: example.org/v1
kind: DB
metadata: {name: unbound, namespace: team, uid: claim-2, generation: 1}
spec: {}
---
apiVersion: example.org/v1
kind: DB
metadata: {name: impostor, namespace: team, uid: claim-3, generation: 1}
spec:
  resourceRef: {apiVersion: example.org/v1, kind: XDB, name: db-x}
---
apiVersion: example.org/v1
kind: XDB
metadata: {name: db-x, uid: xr-1}
spec:
  claimRef: {apiVersion: example.org/v1, kind: DB, namespace: team, name: db}
`

func claimEvent(name, uid string, gen int64, typ eventsv1.EventType) reconcile.Request {
	ref := &eventsv1.ObjectRef{Group: "example.org", Version: "v1", Kind: "DB", Namespace: "team", Name: name, Uid: uid}
	return reconcile.Request{Event: &eventsv1.Event{Object: ref, Generation: gen, Type: typ}, Target: ref}
}

func TestHandle(t *testing.T) {
	xrRequeue := &eventsv1.Event{
		Object:     &eventsv1.ObjectRef{Group: "example.org", Version: "v1", Kind: "DB", Namespace: "team", Name: "db", Uid: "claim-1"},
		Generation: 2,
		Type:       eventsv1.EventType_EVENT_TYPE_REQUEUE,
		Target:     &eventsv1.ObjectRef{Group: "example.org", Version: "v1", Kind: "XDB", Name: "db-x", Uid: "xr-1"},
		Reason:     "claim changed",
		Source:     "secrets/0",
	}
	xrTarget := &eventsv1.ObjectRef{Group: "example.org", Version: "v1", Kind: "XDB", Name: "db-x", Uid: "xr-1"}
	cases := map[string]struct {
		reason        string
		requests      []reconcile.Request
		wantReconcile reconciled
		wantPublished published
		wantCalls     map[string]int
	}{
		"XR": {
			reason:        "A cluster-scoped target is an XR, reconciled at once.",
			requests:      []reconcile.Request{{Event: &eventsv1.Event{Object: xrTarget}, Target: xrTarget}},
			wantReconcile: reconciled{{GVK: schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "XDB"}, Name: "db-x", UID: "xr-1"}},
		},
		"ClaimChanged": {
			reason: "A claim whose spec changed requeues its XR, once per generation.",
			requests: []reconcile.Request{
				claimEvent("db", "claim-1", 2, eventsv1.EventType_EVENT_TYPE_MODIFIED),
				claimEvent("db", "claim-1", 2, eventsv1.EventType_EVENT_TYPE_MODIFIED),
			},
			wantPublished: published{xrRequeue},
			wantCalls:     map[string]int{fake.Get: 2},
		},
		"ClaimDeleted": {
			reason:   "A deleted claim needs nothing: its Secret goes with it.",
			requests: []reconcile.Request{claimEvent("db", "claim-1", 2, eventsv1.EventType_EVENT_TYPE_DELETED)},
		},
		"Unbound": {
			reason:    "A claim without an XR requeues nothing.",
			requests:  []reconcile.Request{claimEvent("unbound", "claim-2", 1, eventsv1.EventType_EVENT_TYPE_ADDED)},
			wantCalls: map[string]int{fake.Get: 1},
		},
		"NotBoundBack": {
			reason:    "A claim naming an XR bound to another claim requeues nothing.",
			requests:  []reconcile.Request{claimEvent("impostor", "claim-3", 1, eventsv1.EventType_EVENT_TYPE_ADDED)},
			wantCalls: map[string]int{fake.Get: 2},
		},
		"ClaimGone": {
			reason:    "A claim that is gone requeues nothing.",
			requests:  []reconcile.Request{claimEvent("gone", "claim-9", 1, eventsv1.EventType_EVENT_TYPE_MODIFIED)},
			wantCalls: map[string]int{fake.Get: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.New(claimGVK.GroupKind())
			c.Add(objects)
			var rec reconciled
			var pub published
			h := NewHandler(&rec, c, &pub, "secrets", slog.Default(), "secrets/0")
			for _, r := range tc.requests {
				if _, err := h.Handle(t.Context(), r); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.wantReconcile, rec, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nreconciled: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantPublished, pub, protocmp.Transform(), cmpopts.EquateEmpty(),
				protocmp.IgnoreFields(&eventsv1.Event{}, "observed_time", "resource_version")); diff != "" {
				t.Errorf("\n%s\npublished: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantCalls, c.Calls(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nrequests: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
