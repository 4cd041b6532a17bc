package composite

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
)

// DefaultMemoSize is how many XRs a replica's memos remember by default.
const DefaultMemoSize = 16384

// memo is a bounded per-XR memory of a replica: least-recently-used caches,
// so that above its size only the XRs used longest ago are forgotten (a
// forgotten XR is read or reported again on its next reconcile) instead of
// all of them at once.
type memo struct {
	// conflicts holds, per XR, the key conflicts last reported, so that
	// each new set is reported once.
	conflicts *lru.Cache // types.UID to the encoding of its conflicts
	// templates holds, per XR, the template of each composed resource it
	// references, so that resources whose template contributes nothing are
	// not read again. A composed resource keeps its template for life (its
	// name is derived from it), so entries never go stale.
	templates *lru.Cache // types.UID to map[string]string, ref to template
	// mu guards the maps templates holds.
	mu sync.Mutex
}

func newMemo(size int) *memo {
	return &memo{conflicts: lru.New(size), templates: lru.New(size)}
}

// conflictsChanged reports whether the encoding of xr's conflicts differs
// from the one last recorded (unknown counts as changed unless there are
// none), and records it.
func (m *memo) conflictsChanged(xr types.UID, conflicts string) bool {
	prev, known := m.conflicts.Get(xr)
	m.conflicts.Add(xr, conflicts)
	if !known {
		return conflicts != ""
	}
	return prev.(string) != conflicts //nolint:forcetypeassert // Only strings are stored.
}

// template returns the template recorded for the composed resource ref of
// xr.
func (m *memo) template(xr types.UID, ref string) (string, bool) {
	v, ok := m.templates.Get(xr)
	if !ok {
		return "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	tmpl, ok := v.(map[string]string)[ref] //nolint:forcetypeassert // Only such maps are stored.
	return tmpl, ok
}

// putTemplate records the template of the composed resource ref of xr.
func (m *memo) putTemplate(xr types.UID, ref, tmpl string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.templates.Get(xr); ok {
		v.(map[string]string)[ref] = tmpl //nolint:forcetypeassert // Only such maps are stored.
		return
	}
	m.templates.Add(xr, map[string]string{ref: tmpl})
}

// forget drops what is recorded for a gone XR.
func (m *memo) forget(xr types.UID) {
	m.conflicts.Remove(xr)
	m.templates.Remove(xr)
}

// forget drops what is recorded for a gone XR.
func (r *Reconciler) forget(uid types.UID) {
	if uid == "" {
		return
	}
	r.tracker.Forget(uid)
	r.memo.forget(uid)
}
