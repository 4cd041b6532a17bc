package watch

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// firstStatuses keeps, for each XR known to have no Ready condition yet
// (its first status is not written: the renderer waits for its resources,
// see the renderer's first-status wait), which of its composed resources
// have no status yet, so that routing can withhold from the renderer a
// sibling's change of readiness that cannot change what a render of the XR
// does (route.Withheld). It is built from every change of an XR or composed
// resource the watcher handles, in the order it finishes them, and forgets
// an XR once it has a Ready condition, so it holds only XRs being created.
//
// What it answers is safe to act on whatever order the watcher's sources
// finish changes in, because each change records itself before it asks
// (under one lock): of two resources that get their status at once, the
// second to ask finds the first's status recorded, and its change, which
// reaches the renderer, comes after the first one's mirror write. An XR's
// first Ready condition and a withheld change are ordered the same way
// (xr and awaits).
type firstStatuses struct {
	mu   sync.Mutex
	byXR map[types.UID]*firstStatus
}

// firstStatus is what firstStatuses keeps of one XR.
type firstStatus struct {
	// unobserved are the XR's composed resources with no status yet, by
	// UID, with the names of their templates.
	unobserved map[types.UID]string
	// withheld is whether a change of a composed resource's readiness
	// may have been withheld from the renderer (awaits said so).
	withheld bool
}

// xr records a change of an XR: ready is the status of its Ready condition,
// empty when it has none; known is whether the watcher knows that (a cached
// status summary). It reports whether the renderer must hear of the change:
// it gives the XR its first Ready condition, not True, after awaits said a
// sibling's change may be withheld.
func (f *firstStatuses) xr(uid types.UID, deleted, known bool, ready string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.byXR[uid]
	if !deleted && known && ready == "" {
		if s == nil {
			if f.byXR == nil {
				f.byXR = map[types.UID]*firstStatus{}
			}
			f.byXR[uid] = &firstStatus{unobserved: map[types.UID]string{}}
		}
		return false
	}
	delete(f.byXR, uid)
	return s != nil && s.withheld && !deleted && known && ready != "True"
}

// composed records a change of the composed resource uid of the XR xr, of
// the named template: whether it is gone, and whether it has a status. A
// resource whose template is not known is not recorded.
func (f *firstStatuses) composed(xr, uid types.UID, deleted bool, template string, observed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.byXR[xr]
	if s == nil {
		return
	}
	if deleted || observed || template == "" {
		delete(s.unobserved, uid)
		return
	}
	s.unobserved[uid] = template
}

// awaits reports whether the XR xr is known to have no Ready condition while
// a composed resource of it other than uid, of a template required returns
// true for, has no status yet; if so it records that a change may be
// withheld. The caller records the change of uid (composed) first.
func (f *firstStatuses) awaits(xr, uid types.UID, required func(template string) bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.byXR[xr]
	if s == nil {
		return false
	}
	for u, template := range s.unobserved {
		if u != uid && required(template) {
			s.withheld = true
			return true
		}
	}
	return false
}

// len returns how many XRs it holds, for tests.
func (f *firstStatuses) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byXR)
}
