package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/object"
	"github.com/loomxr/loom/services/watcher/internal/route"
)

// selfTargeted are the roles whose objects are targets themselves. Their
// sources resync first, so that each service and target gets one RESYNC
// event naming the target itself rather than one of the objects that route
// to it.
const selfTargeted = route.RoleXRD | route.RoleComposition | route.RoleEnvironmentConfig |
	route.RoleFunction | route.RoleReferenceRule | route.RoleClaim

// rank orders sources for a resync: self-targeted kinds, then XRs (which also
// target their claims, already covered), then everything else.
func rank(r route.Role) int {
	switch {
	case r&selfTargeted != 0:
		return 0
	case r&route.RoleXR != 0:
		return 1
	default:
		return 2
	}
}

// resync publishes one RESYNC event per service and target for everything
// cached, then waits until the bus stored them. It also recomputes the
// composed kinds from the cache, dropping any a missed deletion left behind,
// and, first, reconciles the mirror with the cache (see resyncMirror); an
// object the mirror still cannot hold is not published.
func (w *Watcher) resync(ctx context.Context) error {
	w.rebuildComposed()
	mirrorErr := w.resyncMirror(ctx)
	if mirrorErr != nil {
		mirrorErr = fmt.Errorf("cannot reconcile the mirror: %w", mirrorErr)
	}

	type entry struct {
		s     *source
		roles route.Role
	}
	w.mu.RLock()
	entries := make([]entry, 0, len(w.sources))
	for _, s := range w.sources {
		entries = append(entries, entry{s: s, roles: s.roles})
	}
	w.mu.RUnlock()
	slices.SortFunc(entries, func(a, b entry) int {
		if c := rank(a.roles) - rank(b.roles); c != 0 {
			return c
		}
		return object.CompareGVK(a.s.gvk, b.s.gvk)
	})

	type key struct {
		service string
		target  types.UID
	}
	seen := map[key]bool{}
	published := 0
	for _, e := range entries {
		for _, obj := range e.s.informer.GetStore().List() {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			m, err := object.MetaOf(e.s.gvk, obj)
			if err != nil || e.s.failing(m.UID) {
				continue
			}
			o := routeObject(m, e.roles, obj)
			for _, d := range route.Route(o, e.roles, lookup{w}) {
				k := key{service: d.Service, target: d.Target.UID}
				if seen[k] {
					continue
				}
				seen[k] = true
				w.publish(ctx, d.Service, newEvent(m, eventsv1.EventType_EVENT_TYPE_RESYNC, d))
				published++
			}
		}
	}
	if err := w.pub.Flush(ctx); err != nil {
		return errors.Join(mirrorErr, fmt.Errorf("cannot flush resync events: %w", err))
	}
	w.log.Info("resync published", "events", published)
	return mirrorErr
}

// rebuildComposed recomputes the composed kinds from the cached XRs and
// Compositions.
func (w *Watcher) rebuildComposed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	fresh := map[string][]schema.GroupVersionKind{}
	for _, s := range w.sources {
		if s.roles&(route.RoleXR|route.RoleComposition) == 0 {
			continue
		}
		for _, obj := range s.informer.GetStore().List() {
			u := object.Unstructured(obj)
			if u == nil {
				continue
			}
			if s.roles&route.RoleXR != 0 {
				fresh[xrSource(u.GetUID())] = object.ResourceKinds(u)
			}
			if s.roles&route.RoleComposition != 0 {
				fresh[compositionSource(u.GetUID())] = object.TemplateKinds(u)
			}
		}
	}
	changed := false
	for _, src := range w.composed.Sources() {
		if _, ok := fresh[src]; !ok {
			changed = len(w.composed.Remove(src)) > 0 || changed
		}
	}
	for src, kinds := range fresh {
		added, removed := w.composed.Put(src, kinds)
		changed = changed || len(added)+len(removed) > 0
	}
	if changed {
		w.reconcile()
	}
}
