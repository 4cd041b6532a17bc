package watch

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/loomxr/loom/pkg/testing/metrictest"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/object"
	"github.com/loomxr/loom/services/watcher/internal/route"
)

// listed is a handler registration whose informer has listed.
type listed struct{}

func (listed) HasSynced() bool { return true }

// TestAwaitComposed checks that a change of an XR's spec reaches the
// readers of its composed resources once the watcher caches every resource
// its resourceRefs name: at once when they are cached, on the last
// arrival otherwise, after the wait when one never comes; that a newer
// change replaces a held one, a status change does not, and a deletion
// drops it; that a resource cached but not yet mirrored holds it too; and
// that kinds the watcher cannot tell about hold nothing.
func TestAwaitComposed(t *testing.T) {
	nopGVK := schema.GroupVersionKind{Group: "nop.example.org", Version: "v1", Kind: "Nop"}
	xrGVK := schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "XDatabase"}
	rec := &recorder{}
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	w := New(nil, nil, nil, rec, WithComposedWait(time.Hour), WithMeterProvider(mp))
	w.ctx = t.Context()
	w.live.Store(true)
	// A composed source that is not running: the test fills its cache.
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	w.sources[nopGVK] = &source{gvk: nopGVK, roles: route.RoleComposed, informer: inf, handler: listed{}}

	xrObj := func(names ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		var refs []any
		for _, n := range names {
			refs = append(refs, map[string]any{"apiVersion": "nop.example.org/v1", "kind": "Nop", "name": n})
		}
		// Another kind, which no source watches: it holds nothing.
		refs = append(refs, map[string]any{"apiVersion": "other.example.org/v1", "kind": "Other", "name": "o"})
		_ = unstructured.SetNestedSlice(u.Object, refs, "spec", "resourceRefs")
		return u
	}
	cacheNop := func(name string) {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(nopGVK)
		u.SetName(name)
		u.SetUID(types.UID(name))
		if err := inf.GetStore().Add(u); err != nil {
			t.Fatal(err)
		}
	}
	xr := object.Meta{GVK: xrGVK, Name: "db", UID: "xr-uid", ResourceVersion: "5"}
	target := route.Target{GVK: xrGVK, Name: "db", UID: "xr-uid"}
	ds := []route.Delivery{{Service: route.Binder, Target: target, Reason: "composite resource changed"},
		{Service: route.Secrets, Target: target, Reason: "composite resource changed"}}

	type got struct{ Service, RV string }
	published := func(from int) []got {
		var gots []got
		for _, p := range rec.since(from) {
			gots = append(gots, got{p.service, p.ev.GetResourceVersion()})
		}
		return gots
	}
	both := func(rv string) []got { return []got{{route.Binder, rv}, {route.Secrets, rv}} }

	// Held while a and b are not cached; a status change (no deliveries)
	// keeps the held one; the first arrival does not end the wait.
	w.awaitComposed(xr, eventsv1.EventType_EVENT_TYPE_MODIFIED, xrObj("a", "b"), "team", ds)
	w.awaitComposed(object.Meta{GVK: xrGVK, Name: "db", UID: "xr-uid", ResourceVersion: "6"}, eventsv1.EventType_EVENT_TYPE_MODIFIED, xrObj("a", "b"), "team", nil)
	cacheNop("a")
	w.composedArrived("xr-uid")
	if n := rec.len(); n != 0 {
		t.Fatalf("published %d events before every composed resource is cached; want none", n)
	}
	cacheNop("b")
	w.composedArrived("xr-uid")
	if diff := cmp.Diff(both("5"), published(0)); diff != "" {
		t.Errorf("published on the last arrival: -want, +got:\n%s", diff)
	}
	if p := rec.since(0); len(p) > 0 && p[0].ev.GetTenant() != "team" {
		t.Errorf("tenant %q; want %q", p[0].ev.GetTenant(), "team")
	}

	// Every resource cached: published at once.
	w.awaitComposed(object.Meta{GVK: xrGVK, Name: "db", UID: "xr-uid", ResourceVersion: "7"}, eventsv1.EventType_EVENT_TYPE_MODIFIED, xrObj("a", "b"), "team", ds)
	if diff := cmp.Diff(both("7"), published(2)); diff != "" {
		t.Errorf("published with every resource cached: -want, +got:\n%s", diff)
	}

	// A newer change replaces a held one: only the newer is published.
	w.awaitComposed(object.Meta{GVK: xrGVK, Name: "db", UID: "xr-uid", ResourceVersion: "8"}, eventsv1.EventType_EVENT_TYPE_MODIFIED, xrObj("a", "c"), "team", ds)
	w.awaitComposed(object.Meta{GVK: xrGVK, Name: "db", UID: "xr-uid", ResourceVersion: "9"}, eventsv1.EventType_EVENT_TYPE_MODIFIED, xrObj("a", "c"), "team", ds)
	cacheNop("c")
	w.composedArrived("xr-uid")
	if diff := cmp.Diff(both("9"), published(4)); diff != "" {
		t.Errorf("published after a newer change: -want, +got:\n%s", diff)
	}

	// A deletion drops a held change.
	w.awaitComposed(object.Meta{GVK: xrGVK, Name: "db", UID: "xr-uid", ResourceVersion: "10"}, eventsv1.EventType_EVENT_TYPE_MODIFIED, xrObj("d"), "team", ds)
	w.awaitComposed(object.Meta{GVK: xrGVK, Name: "db", UID: "xr-uid", ResourceVersion: "11"}, eventsv1.EventType_EVENT_TYPE_DELETED, nil, "", nil)
	cacheNop("d")
	w.composedArrived("xr-uid")
	if n := rec.len(); n != 6 {
		t.Errorf("published %d events in all; want 6 (the deleted XR's held change dropped)", n)
	}
	if len(w.composedWaits.held) != 0 {
		t.Errorf("XR changes still held: %v", w.composedWaits.held)
	}

	// A resource that never comes: published after the wait.
	w.composedWait = 10 * time.Millisecond
	w.awaitComposed(object.Meta{GVK: xrGVK, Name: "db", UID: "xr-uid", ResourceVersion: "12"}, eventsv1.EventType_EVENT_TYPE_MODIFIED, xrObj("never"), "team", ds)
	deadline := time.Now().Add(time.Minute)
	for rec.len() < 8 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if diff := cmp.Diff(both("12"), published(6)); diff != "" {
		t.Errorf("published after the wait: -want, +got:\n%s", diff)
	}

	// Cached but not yet mirrored (the handler has yet to take its full
	// object): held until the handler has mirrored it.
	src := w.sources[nopGVK]
	src.spec.full = true
	src.mirror.full = map[types.UID]fullObject{"e": {obj: &unstructured.Unstructured{}}}
	cacheNop("e")
	w.awaitComposed(object.Meta{GVK: xrGVK, Name: "db", UID: "xr-uid", ResourceVersion: "13"}, eventsv1.EventType_EVENT_TYPE_MODIFIED, xrObj("e"), "team", ds)
	if n := rec.len(); n != 8 {
		t.Fatalf("published %d events in all; want 8 (the change waits for e's mirror write)", n)
	}
	src.takeFull("e", "")
	w.composedArrived("xr-uid")
	if diff := cmp.Diff(both("13"), published(8)); diff != "" {
		t.Errorf("published once mirrored: -want, +got:\n%s", diff)
	}

	// How the waits ended: three on the last mirror write, one on the wait.
	ended := metrictest.Counts(t, rd)
	if diff := cmp.Diff(map[string]int64{"loom.watcher.composed.held{outcome=mirrored}": 3, "loom.watcher.composed.held{outcome=timeout}": 1}, ended); diff != "" {
		t.Errorf("loom.watcher.composed.held: -want, +got:\n%s", diff)
	}

	// A kind whose source has not listed holds nothing.
	w.sources[nopGVK].handler = nil
	w.composedWait = time.Hour
	w.awaitComposed(object.Meta{GVK: xrGVK, Name: "db", UID: "xr-uid", ResourceVersion: "14"}, eventsv1.EventType_EVENT_TYPE_MODIFIED, xrObj("never"), "team", ds)
	if diff := cmp.Diff(both("14"), published(10)); diff != "" {
		t.Errorf("published for an unlisted kind: -want, +got:\n%s", diff)
	}
}
