package bus

import (
	"slices"
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
// resync lanes share the main pool, served in that order within a tenant key
// (tenants take turns across the urgent and normal lanes; see scheduler);
// the quarantine lane has its own. Lanes are declared in the order they are
// served.
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
// who runs next. The main pool's free slots go to real changes (the urgent
// and normal lanes) and to resync requests only when no change waits (and
// then to at most resyncSlots at once). Changes are served round-robin
// across tenant keys first and by lane second: each key in turn starts its
// oldest urgent request, or its oldest normal one when it has no urgent
// one, so that a burst of one tenant, whatever its lane, does not make
// another's request wait behind all of it, and a tenant's progress still
// passes its own backlog of new work. Suspect targets run only in the
// quarantine pool.
type scheduler struct {
	mu         sync.Mutex
	free       int       // free slots of the main pool
	rfree      int       // main-pool slots resync runs may still take
	qfree      int       // free slots of the quarantine pool
	live       fairQueue // the urgent and normal lanes
	resync     fairQueue
	quarantine fairQueue
	observe    func(l lane, waited time.Duration)
}

func newScheduler(main, quarantine int, observe func(lane, time.Duration)) *scheduler {
	return &scheduler{free: main, rfree: resyncSlots(main), qfree: quarantine, observe: observe}
}

// queue returns the queue of lane l.
func (s *scheduler) queue(l lane) *fairQueue {
	switch l {
	case laneResync:
		return &s.resync
	case laneQuarantine:
		return &s.quarantine
	default:
		return &s.live
	}
}

// add queues e and starts whatever can start.
func (s *scheduler) add(e *entry) {
	s.mu.Lock()
	e.since = time.Now()
	e.queued = true
	s.queue(e.lane).push(e)
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
	s.queue(e.lane).remove(e)
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
	s.queue(e.lane).remove(e)
	e.lane = to
	s.queue(to).push(e)
	granted := s.dispatch()
	s.mu.Unlock()
	s.start(granted)
}

// waiting returns how many requests wait in each lane, indexed by lane.
func (s *scheduler) waiting() [4]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n [4]int
	for _, q := range []*fairQueue{&s.live, &s.resync, &s.quarantine} {
		for l, c := range q.byLane {
			n[l] += c
		}
	}
	return n
}

// dispatch takes slots for as many waiters as can start. The caller holds
// s.mu and starts the returned entries after unlocking.
func (s *scheduler) dispatch() []*entry {
	var granted []*entry
	for s.free > 0 {
		e := s.live.pop()
		if e == nil && s.rfree > 0 {
			if e = s.resync.pop(); e != nil {
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
		e := s.quarantine.pop()
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

// fairQueue is a round-robin of queues, one per tenant key: pop takes,
// from the next key in turn, the key's oldest entry of the first lane that
// has one (lanes in the order they are served). A key seen for the first
// time joins the end of the turn order, so it waits at most one turn of
// every other key.
type fairQueue struct {
	byKey  map[string]*keyQueue
	ring   []string // keys with waiting entries, in turn order
	next   int      // index in ring of the key served next
	byLane [4]int   // waiting entries, by lane
}

// keyQueue is one key's waiting entries, a FIFO queue per lane.
type keyQueue struct {
	lanes [4][]*entry
	n     int
}

func (q *fairQueue) push(e *entry) {
	if q.byKey == nil {
		q.byKey = map[string]*keyQueue{}
	}
	k, ok := q.byKey[e.key]
	if !ok {
		// Join the turn order just before the key served next, that is at
		// the end of the current round.
		k = &keyQueue{}
		q.byKey[e.key] = k
		q.ring = append(q.ring, "")
		copy(q.ring[q.next+1:], q.ring[q.next:])
		q.ring[q.next] = e.key
		q.next = (q.next + 1) % len(q.ring)
	}
	k.lanes[e.lane] = append(k.lanes[e.lane], e)
	k.n++
	q.byLane[e.lane]++
}

func (q *fairQueue) pop() *entry {
	if len(q.ring) == 0 {
		return nil
	}
	k := q.byKey[q.ring[q.next]]
	var e *entry
	for l, es := range k.lanes {
		if len(es) > 0 {
			e = es[0]
			es[0] = nil
			k.lanes[l] = es[1:]
			break
		}
	}
	q.taken(e)
	if k.n == 0 {
		q.dropKey(q.next)
		return e
	}
	q.next = (q.next + 1) % len(q.ring)
	return e
}

// taken counts e out of the queue.
func (q *fairQueue) taken(e *entry) {
	q.byKey[e.key].n--
	q.byLane[e.lane]--
}

// remove takes e out of the queue, wherever it is.
func (q *fairQueue) remove(e *entry) {
	k := q.byKey[e.key]
	if k == nil {
		return
	}
	es := k.lanes[e.lane]
	i := slices.Index(es, e)
	if i < 0 {
		return
	}
	k.lanes[e.lane] = append(es[:i:i], es[i+1:]...)
	q.taken(e)
	if k.n == 0 {
		q.dropKey(slices.Index(q.ring, e.key))
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
