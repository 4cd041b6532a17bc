package watch

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/object"
	"github.com/loomxr/loom/services/watcher/internal/route"
)

// DefaultComposedWait is how long, at most, a change of an XR's spec waits
// before it reaches the services that read the XR's composed resources
// (see awaitComposed) when some resource its resourceRefs name is not
// mirrored yet.
const DefaultComposedWait = 5 * time.Second

// heldXR is a change of an XR's spec whose deliveries to the readers of
// its composed resources wait for the watcher to mirror every resource its
// resourceRefs name.
type heldXR struct {
	xr         object.Meta
	typ        eventsv1.EventType
	tenant     string
	deliveries []route.Delivery
	refs       []object.Reference
	timer      *time.Timer
}

// composedWaits holds the XR changes that wait for composed resources, by
// XR UID.
type composedWaits struct {
	mu   sync.Mutex
	held map[types.UID]*heldXR
}

// readsComposed reports whether a delivery of a change of the XR itself
// goes to a service that reads the XR's composed resources through the
// read path on hearing it (the secrets service, for connection details,
// and the binder, for references), rather than to the renderer, which
// creates them.
func readsComposed(d route.Delivery, xr types.UID) bool {
	return d.Target.UID == xr && (d.Service == route.Secrets || d.Service == route.Binder)
}

// awaitComposed publishes deliveries, those of a change of the spec of XR
// m (u in full) that go to the readers of its composed resources, once the
// watcher has mirrored every composed resource the XR's resourceRefs name,
// or after the composed wait at most.
//
// The renderer writes an XR's resourceRefs before it creates the resources
// they name (so that none is ever created that the XR does not name), and
// the watcher hears of the XR's write on one watch and of the creations on
// others. A reader that heard of the XR first would find no mirror entry
// for the resources: a GET each, for resources that are not there yet or
// were created a moment ago, and, for a resource not there yet, a
// connection Secret whose creation it does not track. Held here, the
// change reaches it once their entries are in the mirror (composedArrived).
// A resource that never comes (its creation failed) delays the change by
// the wait, after which the reader reads the API server as before.
//
// A later change of the XR replaces a held one; a held change whose XR is
// deleted is dropped.
func (w *Watcher) awaitComposed(m object.Meta, typ eventsv1.EventType, u *unstructured.Unstructured, tenant string, deliveries []route.Delivery) {
	w.composedWaits.mu.Lock()
	if h := w.composedWaits.held[m.UID]; h != nil {
		// Superseded: the deliveries of this change (if any) carry the
		// XR's newer version, and a deletion ends every wait.
		if len(deliveries) == 0 && typ != eventsv1.EventType_EVENT_TYPE_DELETED {
			w.composedWaits.mu.Unlock()
			return
		}
		h.timer.Stop()
		delete(w.composedWaits.held, m.UID)
	}
	if len(deliveries) == 0 {
		w.composedWaits.mu.Unlock()
		return
	}
	var refs []object.Reference
	if u != nil {
		refs = w.uncached(object.ResourceRefs(u))
	}
	if len(refs) == 0 || w.composedWait <= 0 {
		w.composedWaits.mu.Unlock()
		w.publishHeld(&heldXR{xr: m, typ: typ, tenant: tenant, deliveries: deliveries})
		return
	}
	h := &heldXR{xr: m, typ: typ, tenant: tenant, deliveries: deliveries, refs: refs}
	uid := m.UID
	h.timer = time.AfterFunc(w.composedWait, func() {
		w.composedWaits.mu.Lock()
		if w.composedWaits.held[uid] != h {
			w.composedWaits.mu.Unlock()
			return
		}
		delete(w.composedWaits.held, uid)
		w.composedWaits.mu.Unlock()
		if !ctxDone(w.ctx) {
			w.composedHeld.Add(w.ctx, 1, w.composedHeldAttrs.Option("timeout"))
			w.publishHeld(h)
		}
	})
	w.composedWaits.held[uid] = h
	w.composedWaits.mu.Unlock()
}

// composedArrived publishes the held change of XR xr, if any, once the
// watcher has mirrored every composed resource it waits for. It runs after
// the arriving resource's mirror write is answered (until then the resource
// counts as unmirrored), under the lock awaitComposed checks
// under, so that no arrival is missed: a resource awaitComposed found
// mirrored was taken to the mirror before the check, and one it did not
// brings its own composedArrived after the check.
func (w *Watcher) composedArrived(xr types.UID) {
	w.composedWaits.mu.Lock()
	h := w.composedWaits.held[xr]
	if h == nil {
		w.composedWaits.mu.Unlock()
		return
	}
	if h.refs = w.uncached(h.refs); len(h.refs) > 0 {
		w.composedWaits.mu.Unlock()
		return
	}
	h.timer.Stop()
	delete(w.composedWaits.held, xr)
	w.composedWaits.mu.Unlock()
	w.composedHeld.Add(context.Background(), 1, w.composedHeldAttrs.Option("mirrored"))
	w.publishHeld(h)
}

// stopComposedWaits drops every held change; Run's end.
func (w *Watcher) stopComposedWaits() {
	w.composedWaits.mu.Lock()
	defer w.composedWaits.mu.Unlock()
	for uid, h := range w.composedWaits.held {
		h.timer.Stop()
		delete(w.composedWaits.held, uid)
	}
}

// publishHeld publishes a held change's deliveries.
func (w *Watcher) publishHeld(h *heldXR) {
	ctx, span := w.startSpan(h.xr, h.typ, w.owners(h.xr, nil)...)
	defer span.End()
	for _, d := range h.deliveries {
		ev := newEvent(h.xr, h.typ, d)
		ev.Tenant = h.tenant
		w.publish(ctx, d.Service, ev)
	}
}

// uncached returns the references whose objects are not cached by a
// listed source of their kind, or are cached and not yet mirrored;
// references of kinds the watcher does not watch (yet), whose source has
// not listed, or may not list, are taken as cached: the watcher cannot tell
// when they come.
func (w *Watcher) uncached(refs []object.Reference) []object.Reference {
	var out []object.Reference
	for _, r := range refs {
		gk := r.GroupKind()
		s := lookup{w}.sourceOf(gk)
		if s == nil || s.refused.Load() || s.handler == nil || !s.handler.HasSynced() {
			continue
		}
		obj, ok, err := s.informer.GetStore().GetByKey(keyOf(r.Namespace, r.Name))
		if err != nil {
			continue
		}
		if !ok {
			out = append(out, r)
			continue
		}
		// Cached, but the informer's handler, which mirrors it, may be
		// behind its cache: its full object still waits for it.
		if m, err := metaAccessor(obj); err == nil && s.unmirrored(m.GetUID()) {
			out = append(out, r)
		}
	}
	return out
}

// ctxDone reports whether ctx has ended; for timers outliving Run.
func ctxDone(ctx context.Context) bool { return ctx == nil || ctx.Err() != nil }
