package bus

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Defaults of the per-target protections (see WithTargetBudget).
const (
	// DefaultTargetBudget is how many handler runs one target may have in
	// any minute on one replica.
	DefaultTargetBudget = 30
	// budgetWindow is the window the budget counts runs in.
	budgetWindow = time.Minute
	// suspectFor is how long a target stays suspect (runs in the
	// quarantine pool) after its last failure or throttling.
	suspectFor = time.Minute
	// guardSweepEvery is how many guard operations pass between sweeps of
	// idle records.
	guardSweepEvery = 4096
)

// Reasons a target's handling is deferred, as recorded in metrics.
const (
	ThrottleBackoff = "backoff" // it failed lately: wait for its backoff
	ThrottleBudget  = "budget"  // it ran its budget of runs this minute
)

// guard keeps, per target, what isolates a poisoned target from healthy
// ones on this replica: a backoff that grows with its consecutive failures
// (whatever event brings it back: a new event does not reset it), a budget
// of handler runs per minute, and whether it is suspect (failed or throttled
// within the last minute), which sends it to the quarantine pool.
type guard struct {
	newBackOff func() backoff.BackOff
	budget     int // runs per target per budgetWindow; 0: unlimited

	mu    sync.Mutex
	m     map[string]*record
	ops   int
	peak  atomic.Int64 // the most runs one target had in one window
	clock func() time.Time
}

// record is one target's history.
type record struct {
	failures  int         // consecutive failed runs
	retryAt   time.Time   // no run before, after a failure
	runs      []time.Time // starts of its runs within the last window, oldest first
	suspectTo time.Time   // suspect until
	seen      time.Time   // last activity
}

func newGuard(newBackOff func() backoff.BackOff, budget int) *guard {
	return &guard{newBackOff: newBackOff, budget: budget, m: map[string]*record{}, clock: time.Now}
}

// delay returns how long uid must wait before its next run, and why; zero
// if it may run now.
func (g *guard) delay(uid string) (time.Duration, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock()
	r := g.m[uid]
	if r == nil {
		return 0, ""
	}
	if d := r.retryAt.Sub(now); d > 0 {
		return d, ThrottleBackoff
	}
	if g.budget > 0 {
		r.trim(now)
		if len(r.runs) >= g.budget {
			r.suspectTo = now.Add(suspectFor)
			return r.runs[0].Add(budgetWindow).Sub(now), ThrottleBudget
		}
	}
	return 0, ""
}

// suspect reports whether uid failed or was throttled within the last
// minute.
func (g *guard) suspect(uid string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.m[uid]
	return r != nil && (r.failures > 0 || g.clock().Before(r.suspectTo))
}

// begin records the start of a run of uid.
func (g *guard) begin(uid string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock()
	r := g.get(uid, now)
	r.trim(now)
	r.runs = append(r.runs, now)
	if n := int64(len(r.runs)); n > g.peak.Load() {
		g.peak.Store(n)
	}
}

// end records the outcome of a run of uid: a failure extends its backoff
// and makes it suspect; a success resets its backoff.
func (g *guard) end(uid string, failed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock()
	r := g.get(uid, now)
	if !failed {
		r.failures = 0
		r.retryAt = time.Time{}
		return
	}
	r.failures++
	b := g.newBackOff()
	var d time.Duration
	for range r.failures {
		next := b.NextBackOff()
		if next == backoff.Stop {
			break
		}
		d = next
	}
	r.retryAt = now.Add(d)
	// Suspect until a minute after it may run again, so that a backoff
	// longer than a minute does not let it back into the main pool.
	r.suspectTo = r.retryAt.Add(suspectFor)
}

// peakRuns returns the most runs one target had within one budget window
// since the guard started.
func (g *guard) peakRuns() int64 { return g.peak.Load() }

// get returns uid's record, creating it. The caller holds g.mu.
func (g *guard) get(uid string, now time.Time) *record {
	g.ops++
	if g.ops%guardSweepEvery == 0 {
		g.sweep(now)
	}
	r := g.m[uid]
	if r == nil {
		r = &record{}
		g.m[uid] = r
	}
	r.seen = now
	return r
}

// sweep forgets targets with nothing left to remember: no failure, not
// suspect, no run within the window. The caller holds g.mu.
func (g *guard) sweep(now time.Time) {
	for uid, r := range g.m {
		if r.failures == 0 && now.After(r.suspectTo) && now.Sub(r.seen) > budgetWindow {
			delete(g.m, uid)
		}
	}
}

// trim drops runs older than the window.
func (r *record) trim(now time.Time) {
	i := 0
	for i < len(r.runs) && now.Sub(r.runs[i]) >= budgetWindow {
		i++
	}
	if i > 0 {
		r.runs = append(r.runs[:0], r.runs[i:]...)
	}
}
