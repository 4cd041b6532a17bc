package composite

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// forget drops what is recorded for a gone XR.
func (r *Reconciler) forget(uid types.UID) {
	if uid == "" {
		return
	}
	r.tracker.Forget(uid)
	r.templates.forget(uid)
	r.mu.Lock()
	delete(r.conflicts, uid)
	r.mu.Unlock()
}

// templateMemo is a bounded map from XR UID and composed resource reference
// to the resource's template name. A composed resource keeps its template
// for life (its name is derived from it), so entries never go stale.
type templateMemo struct {
	mu  sync.Mutex
	max int
	m   map[types.UID]map[string]string
}

func newTemplateMemo(max int) *templateMemo {
	return &templateMemo{max: max, m: map[types.UID]map[string]string{}}
}

func (t *templateMemo) get(xr types.UID, ref string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tmpl, ok := t.m[xr][ref]
	return tmpl, ok
}

func (t *templateMemo) put(xr types.UID, ref, tmpl string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	refs := t.m[xr]
	if refs == nil {
		if len(t.m) >= t.max {
			t.m = map[types.UID]map[string]string{}
		}
		refs = map[string]string{}
		t.m[xr] = refs
	}
	refs[ref] = tmpl
}

func (t *templateMemo) forget(xr types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, xr)
}
