package bus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/loomxr/loom/pkg/rendezvous"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// kvTimeout bounds one key-value operation of the membership and lease
// protocol; a slower answer is treated as a failure and retried later.
const kvTimeout = 2 * time.Second

// minPullBatch is the fewest messages a lane's consumer asks for at once.
// With one, the client must send a new pull after every message, and when
// that message is handled before the client has marked its previous pull
// sent (a scheduling race in nats.go's Consume, seen on loaded machines),
// no pull is sent at all: the lane stalls until the client misses the
// heartbeats of its pull (pullHeartbeat). With a few, a later message of
// the batch asks again, and the race is rarer.
const minPullBatch = 4

// pullHeartbeat is how often the server confirms a lane's waiting pull
// request. A client that misses two sends a new pull: this bounds the stall
// above (and any lost pull request) to two heartbeats instead of nats.go's
// default of 30 s, for one small message per idle lane per heartbeat.
const pullHeartbeat = 2 * time.Second

// acquireRetry is the first wait before a lease that could not be taken is
// tried again; it doubles up to the renewal interval.
const acquireRetry = 100 * time.Millisecond

// Worker consumes one service's work stream as one replica among several,
// and calls a Handler for each target. See the package documentation for the
// guarantees (exclusivity, coalescing, outcomes).
type Worker struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	service   string
	replicaID string
	handler   Handler

	rawCfg         Config
	cfg            Config
	concurrency    int
	handlerTimeout time.Duration
	drainTimeout   time.Duration
	newBackOff     func() backoff.BackOff
	ownershipHook  func(partition int, owned bool)
	log            *slog.Logger
	tracer         trace.Tracer
	metrics        *metrics

	// instance tells this Worker's leases from those of an earlier process
	// with the same replica ID.
	instance string
	sched    *scheduler
	guard    *guard

	// Scheduling (WithLookahead, WithTargetBudget, WithQuarantine,
	// WithFairKey).
	lookahead  int
	budget     int
	quarantine int
	fairKey    func(Request) string
	arrivals   func(Request) // WithArrivals; nil for none

	running  atomic.Bool
	lastBeat atomic.Int64 // Unix nanoseconds of the last successful heartbeat
	readyTTL atomic.Int64 // the lease TTL, for Ready

	// Set by Run before any lease starts.
	members    jetstream.KeyValue
	leases     jetstream.KeyValue
	leaseTTL   time.Duration
	renewEvery time.Duration
	margin     time.Duration

	mu    sync.Mutex
	owned map[int]*lease
	wake  chan struct{}
}

// NewWorker returns a Worker that handles service's work as replica
// replicaID, with h. Replica IDs must be unique among the live replicas of a
// service (a pod name is); they are key-value key parts (letters, digits, '-',
// '_' and dots). nc must be the connection js uses. Nothing starts before Run.
func NewWorker(nc *nats.Conn, js jetstream.JetStream, service, replicaID string, h Handler, opts ...WorkerOption) (*Worker, error) {
	w := &Worker{
		nc:             nc,
		js:             js,
		service:        service,
		replicaID:      replicaID,
		handler:        h,
		concurrency:    16,
		handlerTimeout: time.Minute,
		drainTimeout:   15 * time.Second,
		newBackOff:     defaultBackOff,
		lookahead:      DefaultLookahead,
		budget:         DefaultTargetBudget,
		fairKey:        NamespaceKey,
		log:            slog.Default(),
		tracer:         otel.Tracer(instrumentation),
		metrics:        newMetrics(),
		owned:          map[int]*lease{},
		wake:           make(chan struct{}, 1),
	}
	for _, o := range opts {
		o.applyWorker(w)
	}
	var err error
	if w.cfg, err = w.rawCfg.withDefaults(); err != nil {
		return nil, err
	}
	switch {
	case nc == nil || js == nil:
		return nil, errors.New("cannot create worker: a NATS connection and a JetStream context are required")
	case !isService(service):
		return nil, fmt.Errorf("cannot create worker: unknown service %q", service)
	case checkKeyPart(replicaID) != nil:
		return nil, fmt.Errorf("cannot create worker: replica ID %q %v", replicaID, checkKeyPart(replicaID))
	case h == nil:
		return nil, errors.New("cannot create worker: a handler is required")
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	w.instance = replicaID + "/" + hex.EncodeToString(nonce[:])
	if w.quarantine <= 0 {
		w.quarantine = max(1, w.concurrency/4)
	}
	w.sched = newScheduler(w.concurrency, w.quarantine, func(ln lane, d time.Duration) { w.metrics.queueWait(w.service, ln, d) })
	w.guard = newGuard(w.newBackOff, w.budget)
	w.log = w.log.With("service", service, "replica", replicaID)
	return w, nil
}

// Waiting returns how many received requests wait for a handler slot
// (WithConcurrency), in the urgent lane and in the others (normal, resync
// and quarantine); at most WithLookahead per partition lane. Deferred
// requests (backoff, budget) do not count.
func (w *Worker) Waiting() (urgent, other int) {
	n := w.sched.waiting()
	return n[laneUrgent], n[laneNormal] + n[laneResync] + n[laneQuarantine]
}

// Ready reports whether Run is running, the connection is up and this
// replica's last membership heartbeat succeeded less than a lease TTL ago.
// Meant for /readyz.
func (w *Worker) Ready() bool {
	if !w.running.Load() || w.nc.Status() != nats.CONNECTED {
		return false
	}
	last := w.lastBeat.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < time.Duration(w.readyTTL.Load())
}

// Owned returns the partitions this replica owns, sorted: from taking the
// lease until the partition's last handler has returned.
func (w *Worker) Owned() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := make([]int, 0, len(w.owned))
	for p := range w.owned {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// Run joins the service's replicas and handles work until ctx ends. It
// heartbeats this replica's membership, takes leases on the partitions
// rendezvous hashing assigns to it, consumes them, and gives partitions up
// when other replicas join. When ctx ends it leaves the membership, stops
// taking work, waits for running handlers (up to the drain timeout, then
// cancels them), acknowledges what they finished, releases its leases so
// other replicas take over at once, and returns nil. It returns an error if
// the key-value buckets are missing (call EnsureStreams first) or the
// connection is closed under it. A Worker runs at most once at a time.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("cannot run worker: it is already running")
	}
	defer w.running.Store(false)

	if err := w.open(ctx); err != nil {
		return err
	}
	defer w.metrics.observeConsumers(w)()
	w.metrics.declare(w.service)
	wctx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatch()
	mw, err := w.members.Watch(wctx, w.service+".>")
	if err != nil {
		return fmt.Errorf("cannot watch members of %s: %w", w.service, err)
	}
	defer func() { _ = mw.Stop() }()
	lw, err := w.leases.Watch(wctx, w.service+".*", jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("cannot watch leases of %s: %w", w.service, err)
	}
	defer func() { _ = lw.Stop() }()

	c := &coordinator{w: w, members: map[string]time.Time{}}
	c.heartbeat(ctx)
	tick := time.NewTicker(w.renewEvery)
	defer tick.Stop()
	// A lease that could not be taken (the server slow or unreachable) is
	// tried again soon, backing off to the tick: with a long lease TTL the
	// tick alone would leave the partition unserved for a quarter of it.
	again := time.NewTimer(time.Hour)
	again.Stop()
	defer again.Stop()
	var backoff time.Duration
	retryFailed := func() {
		if !c.failed {
			backoff = 0
			return
		}
		backoff = min(max(2*backoff, acquireRetry), w.renewEvery)
		again.Reset(backoff)
	}
	w.log.Info("worker started", "lease_ttl", w.leaseTTL, "partitions", w.cfg.Partitions)
	for {
		select {
		case <-ctx.Done():
			w.leave()
			w.log.Info("worker stopped")
			return nil
		case <-tick.C:
			if w.nc.IsClosed() {
				w.fenceAll()
				return errors.New("cannot run worker: the NATS connection is closed")
			}
			c.heartbeat(ctx)
			if c.synced {
				c.reconcile(ctx)
				retryFailed()
			}
		case <-again.C:
			if c.synced {
				c.reconcile(ctx)
				retryFailed()
			}
		case e, ok := <-mw.Updates():
			if !ok {
				w.leave()
				return w.watchEnded("members")
			}
			if c.member(e) {
				c.reconcile(ctx)
				retryFailed()
			}
		case e, ok := <-lw.Updates():
			if !ok {
				w.leave()
				return w.watchEnded("leases")
			}
			if p, freed := w.freedPartition(e); freed && c.synced && c.desired(p) {
				c.acquire(ctx, p)
				if c.failed {
					retryFailed()
				}
			}
		case <-w.wake:
			if c.synced {
				c.reconcile(ctx)
				retryFailed()
			}
		}
	}
}

// watchEnded explains why a key-value watch ended under Run.
func (w *Worker) watchEnded(what string) error {
	if w.nc.IsClosed() {
		return errors.New("cannot run worker: the NATS connection is closed")
	}
	return fmt.Errorf("cannot run worker: the %s watch ended", what)
}

// open binds the key-value buckets and derives the lease timing from the
// leases bucket's TTL, so that every replica uses the same timing.
func (w *Worker) open(ctx context.Context) error {
	var err error
	err = retry(ctx, "cannot open bucket "+MembersBucket, func(ctx context.Context) error {
		w.members, err = w.js.KeyValue(ctx, MembersBucket)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w (call EnsureStreams first)", err)
	}
	err = retry(ctx, "cannot open bucket "+LeasesBucket, func(ctx context.Context) error {
		w.leases, err = w.js.KeyValue(ctx, LeasesBucket)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w (call EnsureStreams first)", err)
	}
	var st jetstream.KeyValueStatus
	err = retry(ctx, "cannot read bucket "+LeasesBucket, func(ctx context.Context) error {
		st, err = w.leases.Status(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if st.TTL() < time.Second {
		return fmt.Errorf("cannot run worker: bucket %s has TTL %s; it needs at least 1s (recreate it with EnsureStreams)", LeasesBucket, st.TTL())
	}
	w.leaseTTL = st.TTL()
	w.renewEvery = w.leaseTTL / 4
	w.margin = w.leaseTTL / 3
	w.readyTTL.Store(int64(w.leaseTTL))
	return retry(ctx, "cannot check stream "+StreamName(w.service), func(ctx context.Context) error {
		return checkPartitions(ctx, w.js, w.service, w.cfg.Partitions)
	})
}

// leaseKey is the key of a partition's lease.
func (w *Worker) leaseKey(p int) string { return w.service + "." + strconv.Itoa(p) }

// freedPartition reports whether e says a lease of this service was released
// or expired, and which partition it was for.
func (w *Worker) freedPartition(e jetstream.KeyValueEntry) (int, bool) {
	if e == nil || e.Operation() == jetstream.KeyValuePut {
		return 0, false
	}
	p, err := strconv.Atoi(strings.TrimPrefix(e.Key(), w.service+"."))
	if err != nil || p < 0 || p >= w.cfg.Partitions {
		return 0, false
	}
	return p, true
}

// poke asks the coordinator to reconcile soon.
func (w *Worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// leave deletes this replica's membership so that others take its
// partitions, then releases every lease gracefully and waits for them.
func (w *Worker) leave() {
	if w.nc.IsClosed() {
		w.fenceAll()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	if err := w.members.Delete(ctx, w.memberKey()); err != nil {
		w.log.Info("cannot delete membership", "error", err)
	}
	cancel()
	w.mu.Lock()
	ls := make([]*lease, 0, len(w.owned))
	for _, l := range w.owned {
		ls = append(ls, l)
	}
	w.mu.Unlock()
	for _, l := range ls {
		l.release()
	}
	for _, l := range ls {
		<-l.done
	}
}

// fenceAll stops every partition at once, without waiting for a drain.
func (w *Worker) fenceAll() {
	w.mu.Lock()
	ls := make([]*lease, 0, len(w.owned))
	for _, l := range w.owned {
		ls = append(ls, l)
	}
	w.mu.Unlock()
	for _, l := range ls {
		l.fence("connection closed")
	}
	for _, l := range ls {
		<-l.done
	}
}

func (w *Worker) memberKey() string { return w.service + "." + w.replicaID }

// coordinator is Run's state: which replicas are alive, and so which
// partitions this replica should own. Only Run's goroutine uses it.
type coordinator struct {
	w       *Worker
	members map[string]time.Time // replica ID -> last heartbeat seen
	// synced is set once the members watch has delivered every existing
	// entry; before, this replica would think itself alone and grab every
	// partition only to give most of them back.
	synced             bool
	loggedHeartbeatErr bool
	// failed is set when the last reconcile could not take the lease of a
	// partition assigned to this replica for a reason other than another
	// replica holding it.
	failed bool
}

// heartbeat refreshes this replica's membership entry.
func (c *coordinator) heartbeat(ctx context.Context) {
	w := c.w
	hctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	if _, err := w.members.Put(hctx, w.memberKey(), []byte(w.instance)); err != nil {
		if !c.loggedHeartbeatErr {
			w.log.Info("cannot heartbeat membership", "error", err)
			c.loggedHeartbeatErr = true
		}
		return
	}
	c.loggedHeartbeatErr = false
	w.lastBeat.Store(time.Now().UnixNano())
}

// member records a membership entry and reports whether the set of members
// may have changed (and the initial entries have all been seen).
func (c *coordinator) member(e jetstream.KeyValueEntry) bool {
	if e == nil { // end of the initial values
		c.synced = true
		return true
	}
	return c.record(e) && c.synced
}

func (c *coordinator) record(e jetstream.KeyValueEntry) bool {
	id := strings.TrimPrefix(e.Key(), c.w.service+".")
	if e.Operation() != jetstream.KeyValuePut {
		_, had := c.members[id]
		delete(c.members, id)
		return had
	}
	_, had := c.members[id]
	// An entry may be up to a TTL old when first seen; count its age.
	seen := time.Now()
	if age := time.Since(e.Created()); age > 0 && age < c.w.leaseTTL {
		seen = seen.Add(-age)
	}
	c.members[id] = seen
	return !had
}

// live returns the replica IDs believed alive, this one included, sorted.
func (c *coordinator) live() []string {
	ids := []string{c.w.replicaID}
	now := time.Now()
	for id, seen := range c.members {
		if id != c.w.replicaID && now.Sub(seen) < c.w.leaseTTL {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// desired reports whether rendezvous hashing assigns partition p to this
// replica among the live ones.
func (c *coordinator) desired(p int) bool {
	return owner(c.w.service, p, c.live()) == c.w.replicaID
}

// reconcile takes the partitions assigned to this replica and gives up the
// others.
func (c *coordinator) reconcile(ctx context.Context) {
	w := c.w
	live := c.live()
	want := 0
	for p := range w.cfg.Partitions {
		if owner(w.service, p, live) == w.replicaID {
			want++
		}
	}
	c.failed = false
	for p := range w.cfg.Partitions {
		mine := owner(w.service, p, live) == w.replicaID
		w.mu.Lock()
		l := w.owned[p]
		w.mu.Unlock()
		switch {
		case mine && l == nil:
			c.acquireN(ctx, p, want)
		case !mine && l != nil:
			l.release()
		}
	}
}

func (c *coordinator) acquire(ctx context.Context, p int) {
	live := c.live()
	want := 0
	for q := range c.w.cfg.Partitions {
		if owner(c.w.service, q, live) == c.w.replicaID {
			want++
		}
	}
	c.acquireN(ctx, p, want)
}

// acquireN tries to take the lease of partition p and, if it gets it, starts
// consuming p. want is how many partitions this replica should own, to size
// pull batches.
func (c *coordinator) acquireN(ctx context.Context, p, want int) {
	w := c.w
	w.mu.Lock()
	busy := w.owned[p] != nil
	w.mu.Unlock()
	if busy {
		return
	}
	key := w.leaseKey(p)
	actx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	sent := time.Now()
	rev, err := w.leases.Create(actx, key, []byte(w.instance))
	if errors.Is(err, jetstream.ErrKeyExists) {
		// Ours from before a lost answer or a fence? Then take it back.
		e, gerr := w.leases.Get(actx, key)
		if gerr != nil {
			c.failed = true
			return
		}
		if string(e.Value()) != w.instance {
			return // another replica's: its release or expiry wakes us
		}
		sent = time.Now()
		rev, err = w.leases.Update(actx, key, []byte(w.instance), e.Revision())
	}
	if err != nil {
		w.log.Debug("cannot take lease", "partition", p, "error", err)
		c.failed = true
		return
	}
	batch := max(minPullBatch, min(256, 2*w.concurrency/max(1, want)))
	l := newLease(w, p, rev, sent, batch)
	w.mu.Lock()
	w.owned[p] = l
	w.mu.Unlock()
	go l.run()
}

// owner picks the replica that should own partition p by rendezvous
// (highest random weight) hashing: each partition goes to the replica with
// the highest hash of (service, partition, replica), so a joining or leaving
// replica moves only its own share of partitions.
func owner(service string, p int, replicas []string) string {
	var best string
	var bestScore uint64
	for _, r := range replicas {
		s := rendezvous.Score(service, strconv.Itoa(p), r)
		if best == "" || s > bestScore || (s == bestScore && r < best) {
			best, bestScore = r, s
		}
	}
	return best
}
