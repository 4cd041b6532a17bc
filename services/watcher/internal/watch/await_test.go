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
// that a deleted XR stops waiting.
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

	w.awaitClaim(xr, ref, eventsv1.EventType_EVENT_TYPE_ADDED)
	w.awaitClaim(gone, ref, eventsv1.EventType_EVENT_TYPE_ADDED)
	w.awaitClaim(gone, ref, eventsv1.EventType_EVENT_TYPE_DELETED)
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
	var gots []got
	for _, p := range rec.since(0) {
		gots = append(gots, got{p.service, p.ev.GetType().String(), p.ev.GetObject().GetUid(), p.ev.GetTarget().GetUid(), p.ev.GetResourceVersion()})
	}
	want := []got{{route.Binder, "EVENT_TYPE_ADDED", "xr-uid", "claim-uid", "5"}}
	if diff := cmp.Diff(want, gots); diff != "" {
		t.Errorf("published: -want, +got:\n%s", diff)
	}

	// Once cached, the claim resolves directly; nothing waits.
	w.awaitClaim(xr, ref, eventsv1.EventType_EVENT_TYPE_MODIFIED)
	if len(w.awaiting) != 0 || len(w.awaitingOf) != 0 {
		t.Errorf("XRs still waiting: %v", w.awaitingOf)
	}
}
