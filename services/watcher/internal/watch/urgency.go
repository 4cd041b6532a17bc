package watch

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultUrgentPerTarget is how many urgent deliveries one target of one
// service may get from a watcher in a minute; more go to the normal lane.
// A healthy XR needs one per composed resource turning Ready and one per
// change of its own readiness: far fewer.
const DefaultUrgentPerTarget = 10

// urgencyWindow is the window urgent deliveries are counted in.
const urgencyWindow = time.Minute

// urgency bounds the urgent deliveries each target gets in a window, so that
// a target whose progress never ends (resources whose readiness flaps) cannot
// take the urgent lane from healthy ones. Counts reset at the end of each
// window, so its memory is the targets that had urgent deliveries in one
// window.
type urgency struct {
	limit int // per target and window; 0: unlimited
	now   func() time.Time

	mu     sync.Mutex
	start  time.Time
	counts map[urgencyKey]int
}

type urgencyKey struct {
	service string
	uid     types.UID
}

func newUrgency(limit int, now func() time.Time) *urgency {
	return &urgency{limit: limit, now: now, counts: map[urgencyKey]int{}}
}

// allow counts an urgent delivery to a service's target and reports whether
// it may stay urgent.
func (u *urgency) allow(service string, uid types.UID) bool {
	if u.limit <= 0 {
		return true
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if now := u.now(); now.Sub(u.start) >= urgencyWindow {
		u.start = now
		clear(u.counts)
	}
	k := urgencyKey{service: service, uid: uid}
	if u.counts[k] >= u.limit {
		return false
	}
	u.counts[k]++
	return true
}
