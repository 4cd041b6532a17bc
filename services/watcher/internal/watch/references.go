package watch

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/object"
	"github.com/loomxr/loom/services/watcher/internal/route"
)

// pendingReferences keeps, per XR, the composed resources that hold a
// reference or selector that has not resolved yet (or resolves whenever a
// target changes): while an XR has none, its targets' progress is no news to
// the binder (see route.Lookup.ReferencesPending). It is built from every
// change of a composed resource the watcher handles, those of the initial
// lists included, so it is whole before the watcher publishes.
type pendingReferences struct {
	mu sync.Mutex
	// byXR holds the pending resources' UIDs by their XR's UID.
	byXR map[types.UID]map[types.UID]struct{}
}

// set records whether the composed resource uid of the XR xr is pending.
func (p *pendingReferences) set(xr, uid types.UID, pending bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !pending {
		if s := p.byXR[xr]; s != nil {
			delete(s, uid)
			if len(s) == 0 {
				delete(p.byXR, xr)
			}
		}
		return
	}
	if p.byXR == nil {
		p.byXR = map[types.UID]map[types.UID]struct{}{}
	}
	s := p.byXR[xr]
	if s == nil {
		s = map[types.UID]struct{}{}
		p.byXR[xr] = s
	}
	s[uid] = struct{}{}
}

// pending reports whether a composed resource of the XR xr is pending.
func (p *pendingReferences) pending(xr types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byXR[xr]) > 0
}

// references returns what a changed composed resource is to the cached
// ReferenceRules, and records whether it holds a pending reference; nil
// when that is not known (a deletion, no full object, the rules not
// listed), in which case a resource still there counts as pending.
func (w *Watcher) references(roles route.Role, typ eventsv1.EventType, m object.Meta, full *unstructured.Unstructured) *object.References {
	if roles&route.RoleComposed == 0 || roles&route.RoleXR != 0 || m.Controller == nil {
		return nil
	}
	xr := m.Controller.UID
	if typ == eventsv1.EventType_EVENT_TYPE_DELETED {
		w.pendingRefs.set(xr, m.UID, false)
		return nil
	}
	rules, ok := lookup{w}.rules()
	if full == nil || !ok {
		w.pendingRefs.set(xr, m.UID, true)
		return nil
	}
	r := object.ReferencesOf(rules, full)
	w.pendingRefs.set(xr, m.UID, r.Pending)
	return &r
}

// rules returns the cached ReferenceRules, and false while they are not
// known (no source of them yet, or one that has not listed them).
func (l lookup) rules() ([]any, bool) {
	sources := l.sourcesWith(route.RoleReferenceRule)
	if len(sources) == 0 {
		return nil, false
	}
	var rules []any
	for _, s := range sources {
		if !s.informer.HasSynced() {
			return nil, false
		}
		rules = append(rules, s.informer.GetStore().List()...)
	}
	return rules, true
}

// ReferencesPending answers from the pending references the watcher keeps;
// true without a mirror, whose full objects they are read from.
func (l lookup) ReferencesPending(uid types.UID) bool {
	return l.w.mirror == nil || l.w.pendingRefs.pending(uid)
}
