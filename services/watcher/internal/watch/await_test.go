package watch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/object"
	"github.com/loomxr/loom/services/watcher/internal/route"
)

// TestAwaitClaim checks that an XR change whose claim is not cached yet
// reaches the binder, targeting the claim, once the claim is cached; and
// that a deleted XR stops waiting; and that a change whose routing missed a
// claim cached just after reaches it at once.
func TestAwaitClaim(t *testing.T) {
	claimGVK := schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Database"}
	rec := &recorder{}
	w := New(nil, nil, nil, rec)
	w.ctx = t.Context()
	w.live.Store(true)
	// A claim source that is not running: the test fills its cache.
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	w.sources[claimGVK] = &source{gvk: claimGVK, roles: route.RoleClaim, informer: inf}

	ref := &object.Reference{APIVersion: "example.org/v1", Kind: "Database", Namespace: "ns", Name: "db"}
	xr := object.Meta{GVK: schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "XDatabase"}, Name: "db-x", UID: "xr-uid", ResourceVersion: "5"}
	gone := object.Meta{GVK: xr.GVK, Name: "db-y", UID: "xr2-uid", ResourceVersion: "6"}

	w.awaitClaim(xr, ref, eventsv1.EventType_EVENT_TYPE_ADDED, true)
	w.awaitClaim(gone, ref, eventsv1.EventType_EVENT_TYPE_ADDED, true)
	w.awaitClaim(gone, ref, eventsv1.EventType_EVENT_TYPE_DELETED, true)
	if n := rec.len(); n != 0 {
		t.Fatalf("published %d events before the claim is cached; want none", n)
	}

	claim := &unstructured.Unstructured{}
	claim.SetAPIVersion("example.org/v1")
	claim.SetKind("Database")
	claim.SetNamespace("ns")
	claim.SetName("db")
	claim.SetUID("claim-uid")
	if err := inf.GetStore().Add(claim); err != nil {
		t.Fatal(err)
	}
	w.claimArrived(object.Meta{GVK: claimGVK, Namespace: "ns", Name: "db", UID: "claim-uid"})

	type got struct {
		Service, Type, Object, Target, RV string
	}
	published := func(from int) []got {
		var gots []got
		for _, p := range rec.since(from) {
			gots = append(gots, got{p.service, p.ev.GetType().String(), p.ev.GetObject().GetUid(), p.ev.GetTarget().GetUid(), p.ev.GetResourceVersion()})
		}
		return gots
	}
	want := []got{{route.Binder, "EVENT_TYPE_ADDED", "xr-uid", "claim-uid", "5"}}
	if diff := cmp.Diff(want, published(0)); diff != "" {
		t.Errorf("published: -want, +got:\n%s", diff)
	}

	// Once cached, the claim resolves directly (routing found it and
	// published to it); nothing waits, nothing more is published.
	w.awaitClaim(xr, ref, eventsv1.EventType_EVENT_TYPE_MODIFIED, false)
	if len(w.awaiting) != 0 || len(w.awaitingOf) != 0 {
		t.Errorf("XRs still waiting: %v", w.awaitingOf)
	}
	if n := rec.len(); n != 1 {
		t.Errorf("published %d events; want the one the claim's arrival published", n)
	}

	// The claim cached after routing missed it but before the XR was set
	// waiting: its arrival found nothing waiting, so the change is
	// published to it at once.
	w.awaitClaim(xr, ref, eventsv1.EventType_EVENT_TYPE_MODIFIED, true)
	want = []got{{route.Binder, "EVENT_TYPE_MODIFIED", "xr-uid", "claim-uid", "5"}}
	if diff := cmp.Diff(want, published(1)); diff != "" {
		t.Errorf("published after a missed route: -want, +got:\n%s", diff)
	}
}
