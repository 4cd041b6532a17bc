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
// target changes), with what each wants: while an XR has none, its targets'
// progress is no news to the binder (see route.Lookup.ReferencesPending),
// nor is that of a target none of them wants (see Watcher.references). It is
// built from every change of a composed resource the watcher handles, those
// of the initial lists included, so it is whole before the watcher
// publishes.
type pendingReferences struct {
	mu sync.Mutex
	// byXR holds the pending resources' wants by their UIDs, by their XR's
	// UID; nil wants means any target.
	byXR map[types.UID]map[types.UID][]object.Want
}

// set records whether the composed resource uid of the XR xr is pending,
// and if so what it wants (nil: any target).
func (p *pendingReferences) set(xr, uid types.UID, pending bool, wants []object.Want) {
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
		p.byXR = map[types.UID]map[types.UID][]object.Want{}
	}
	s := p.byXR[xr]
	if s == nil {
		s = map[types.UID][]object.Want{}
		p.byXR[xr] = s
	}
	s[uid] = wants
}

// pending reports whether a composed resource of the XR xr is pending.
func (p *pendingReferences) pending(xr types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byXR[xr]) > 0
}

// wanted reports whether a pending resource of the XR xr other than the
// target itself (a resource never selects itself) wants the target m, with
// its labels now or, when old is not nil, before the change.
func (p *pendingReferences) wanted(xr types.UID, m object.Meta, old *object.Meta) bool {
	gk := m.GVK.GroupKind()
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid, wants := range p.byXR[xr] {
		if uid == m.UID {
			continue
		}
		if wants == nil {
			return true
		}
		for _, w := range wants {
			if w.Takes(gk, m.Name, m.Labels) || (old != nil && w.Takes(gk, old.Name, old.Labels)) {
				return true
			}
		}
	}
	return false
}

// references returns what a changed composed resource is to the cached
// ReferenceRules, and records whether it holds a pending reference; nil
// when that is not known (a deletion, no full object, the rules not
// listed), in which case a resource still there counts as pending.
func (w *Watcher) references(roles route.Role, typ eventsv1.EventType, m object.Meta, old *object.Meta, full *unstructured.Unstructured) *object.References {
	if roles&route.RoleComposed == 0 || roles&route.RoleXR != 0 || m.Controller == nil {
		return nil
	}
	xr := m.Controller.UID
	if typ == eventsv1.EventType_EVENT_TYPE_DELETED {
		w.pendingRefs.set(xr, m.UID, false, nil)
		return nil
	}
	rules, ok := lookup{w}.rules()
	if full == nil || !ok {
		w.pendingRefs.set(xr, m.UID, true, nil)
		return nil
	}
	r := object.ReferencesOf(rules, full)
	w.pendingRefs.set(xr, m.UID, r.Pending, r.Wants)
	if r.Target && !w.pendingRefs.wanted(xr, m, old) {
		// A target of the rules' kind that no pending reference or
		// selector of its XR would pick: a cache beside the network a
		// database selects by label cannot resolve its reference.
		r.Target = false
	}
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
