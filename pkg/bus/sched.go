package bus

import (
	"sync"
	"time"
)

// pool names the handler slots a request runs in: the main pool, which
// every target that has not failed lately shares, or the quarantine pool of
// suspect targets (see guard), so that a target that keeps failing or timing
// out never holds a slot a healthy one waits for. poolResync is a main-pool
// slot lent to a resync run, counted apart so that resync runs never hold
// the whole main pool.
type pool int

const (
	poolMain pool = iota
	poolQuarantine
	poolResync
)

func (p pool) String() string {
	switch p {
	case poolQuarantine:
		return "quarantine"
	case poolResync:
		return "resync"
	default:
		return "main"
	}
}

// lane is where a waiting request queues for a slot: the urgent, normal and
// resync lanes share the main pool, served in that order; the quarantine
// lane has its own. Lanes are declared in the order they are served.
type lane int

const (
	laneUrgent lane = iota
	laneNormal
	laneResync
	laneQuarantine
)

func (l lane) String() string {
	switch l {
	case laneUrgent:
		return "urgent"
	case laneResync:
		return "resync"
	case laneQuarantine:
		return "quarantine"
	default:
		return "normal"
	}
}

func (l lane) pool() pool {
	switch l {
	case laneQuarantine:
		return poolQuarantine
	case laneResync:
		return poolResync
	default:
		return poolMain
	}
}

// resyncSlots is how many slots of a main pool of n resync runs may hold at
// once: all but a quarter (at least one), so that a real change finds a
// free slot at once even while a resync runs; all of a pool of one.
func resyncSlots(n int) int {
	return max(1, n-max(1, n/4))
}

// entry is one request waiting for a handler slot.
type entry struct {
	key   string // the tenant key the queue is fair across
	lane  lane
	start func(pool) // called, outside the scheduler's lock, with the slot granted
	since time.Time  // when it was queued

	queued bool // guarded by the scheduler's mutex
}

// scheduler bounds how many handlers of a Worker run at once and decides
// who runs next. The main pool's free slots go to urgent requests first,
// then to normal ones, and to resync requests only when neither waits (and
// then to at most resyncSlots at once); within a lane, requests are served
// round-robin across tenant keys (first come, first served within one key),
// so that a burst of one tenant does not make another's request wait behind
// all of it. Suspect targets run only in the quarantine pool.
type scheduler struct {
	mu      sync.Mutex
	free    int // free slots of the main pool
	rfree   int // main-pool slots resync runs may still take
	qfree   int // free slots of the quarantine pool
	lanes   [4]fairQueue
	observe func(l lane, waited time.Duration)
}

func newScheduler(main, quarantine int, observe func(lane, time.Duration)) *scheduler {
	s := &scheduler{free: main, rfree: resyncSlots(main), qfree: quarantine, observe: observe}
	for i := range s.lanes {
		s.lanes[i].byKey = map[string][]*entry{}
	}
	return s
}

// add queues e and starts whatever can start.
func (s *scheduler) add(e *entry) {
	s.mu.Lock()
	e.since = time.Now()
	e.queued = true
	s.lanes[e.lane].push(e)
	granted := s.dispatch()
	s.mu.Unlock()
	s.start(granted)
}

// release frees a slot of p, which goes to the next waiter at once.
func (s *scheduler) release(p pool) {
	s.mu.Lock()
	switch p {
	case poolQuarantine:
		s.qfree++
	case poolResync:
		s.rfree++
		s.free++
	default:
		s.free++
	}
	granted := s.dispatch()
	s.mu.Unlock()
	s.start(granted)
}

// remove takes e out of its queue; it reports false if e was not queued
// (already granted, or never queued).
func (s *scheduler) remove(e *entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !e.queued {
		return false
	}
	e.queued = false
	s.lanes[e.lane].remove(e)
	return true
}

// upgrade moves a waiting request of the main pool to lane to if to is
// served before its own: a normal one to the urgent lane, a resync one to
// the normal or urgent lane. It does nothing otherwise.
func (s *scheduler) upgrade(e *entry, to lane) {
	s.mu.Lock()
	if !e.queued || e.lane == laneQuarantine || to >= e.lane {
		s.mu.Unlock()
		return
	}
	s.lanes[e.lane].remove(e)
	e.lane = to
	s.lanes[to].push(e)
	granted := s.dispatch()
	s.mu.Unlock()
	s.start(granted)
}

// waiting returns how many requests wait in each lane, indexed by lane.
func (s *scheduler) waiting() [4]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n [4]int
	for i := range s.lanes {
		n[i] = s.lanes[i].n
	}
	return n
}

// dispatch takes slots for as many waiters as can start. The caller holds
// s.mu and starts the returned entries after unlocking.
func (s *scheduler) dispatch() []*entry {
	var granted []*entry
	for s.free > 0 {
		e := s.lanes[laneUrgent].pop()
		if e == nil {
			e = s.lanes[laneNormal].pop()
		}
		if e == nil && s.rfree > 0 {
			if e = s.lanes[laneResync].pop(); e != nil {
				s.rfree--
			}
		}
		if e == nil {
			break
		}
		s.free--
		e.queued = false
		granted = append(granted, e)
	}
	for s.qfree > 0 {
		e := s.lanes[laneQuarantine].pop()
		if e == nil {
			break
		}
		s.qfree--
		e.queued = false
		granted = append(granted, e)
	}
	return granted
}

func (s *scheduler) start(granted []*entry) {
	now := time.Now()
	for _, e := range granted {
		if s.observe != nil {
			s.observe(e.lane, now.Sub(e.since))
		}
		e.start(e.lane.pool())
	}
}

// fairQueue is a round-robin of FIFO queues, one per tenant key: pop takes
// the head of the next key's queue in turn. A key seen for the first time
// joins the end of the turn order, so it waits at most one turn of every
// other key.
type fairQueue struct {
	byKey map[string][]*entry
	ring  []string // keys with waiting entries, in turn order
	next  int      // index in ring of the key served next
	n     int
}

func (q *fairQueue) push(e *entry) {
	l, ok := q.byKey[e.key]
	if !ok {
		// Join the turn order just before the key served next, that is at
		// the end of the current round.
		q.ring = append(q.ring, "")
		copy(q.ring[q.next+1:], q.ring[q.next:])
		q.ring[q.next] = e.key
		q.next = (q.next + 1) % len(q.ring)
	}
	q.byKey[e.key] = append(l, e)
	q.n++
}

func (q *fairQueue) pop() *entry {
	if q.n == 0 {
		return nil
	}
	k := q.ring[q.next]
	l := q.byKey[k]
	e := l[0]
	l[0] = nil
	q.n--
	if len(l) == 1 {
		q.dropKey(q.next)
		return e
	}
	q.byKey[k] = l[1:]
	q.next = (q.next + 1) % len(q.ring)
	return e
}

// remove takes e out of the queue, wherever it is.
func (q *fairQueue) remove(e *entry) {
	l := q.byKey[e.key]
	for i, x := range l {
		if x != e {
			continue
		}
		q.n--
		if len(l) == 1 {
			for j, k := range q.ring {
				if k == e.key {
					q.dropKey(j)
					break
				}
			}
			return
		}
		q.byKey[e.key] = append(l[:i:i], l[i+1:]...)
		return
	}
}

// dropKey removes the key at index i of the ring, whose queue is empty.
func (q *fairQueue) dropKey(i int) {
	delete(q.byKey, q.ring[i])
	q.ring = append(q.ring[:i], q.ring[i+1:]...)
	switch {
	case len(q.ring) == 0:
		q.next = 0
	case i < q.next:
		q.next--
	case q.next >= len(q.ring):
		q.next = 0
	}
}
