package bus

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// lease is one period of ownership of one partition by this replica: from
// taking the lease until the partition's last handler has returned. Its
// goroutine (run) renews the lease, fences the partition if renewing fails
// for too long, and releases the lease after a graceful drain.
type lease struct {
	w     *Worker
	p     int
	key   string
	batch int

	rev      uint64    // current lease revision; only run uses it
	deadline time.Time // fence time; only run uses it

	// ctx is the parent of every handler context; it is cancelled when the
	// partition is fenced or a drain runs out of time.
	ctx    context.Context
	cancel context.CancelFunc

	quit     chan struct{} // closed: take no more work
	quitOnce sync.Once
	releaseC chan struct{} // closed: release gracefully
	relOnce  sync.Once
	fenceC   chan string // a reason to stop at once
	done     chan struct{}

	// room bounds, per lane (urgent, normal, resync, overflow: see
	// laneIndex), how many targets wait for a slot: each waiting target
	// holds one token (WithLookahead). The urgent and normal lanes have as
	// much spare room again, for tenants under their share (see takeRoom).
	room [rooms]chan struct{}
	// moving bounds the moves to the overflow lane awaiting JetStream's
	// answer (maxMoving).
	moving chan struct{}

	mu       sync.Mutex
	targets  map[string]*target
	handlers sync.WaitGroup
	// held counts the targets that hold room of the urgent and normal
	// lanes (their own or spare, see shareOf), by lane (roomUrgent,
	// roomNormal) and tenant key.
	held [2]map[string]int
	// timers are the not-before stamps (Unix nanoseconds) of the requeue
	// copies this lease published, or is publishing, that are still in the
	// stream as far as it knows, by subject (see requeue).
	timers map[string]int64
	// moot are the not-before stamps of requeue copies still in the
	// stream that a later run of their target made moot (see endTimers),
	// by subject: each is acknowledged without a run when it comes.
	moot map[string]int64
}

func newLease(w *Worker, p int, rev uint64, sent time.Time, batch int) *lease {
	ctx, cancel := context.WithCancel(context.Background())
	l := &lease{
		w:        w,
		p:        p,
		key:      w.leaseKey(p),
		batch:    batch,
		rev:      rev,
		deadline: sent.Add(w.leaseTTL - w.margin),
		ctx:      ctx,
		cancel:   cancel,
		quit:     make(chan struct{}),
		releaseC: make(chan struct{}),
		fenceC:   make(chan string, 1),
		done:     make(chan struct{}),
		targets:  map[string]*target{},
		timers:   map[string]int64{},
		moot:     map[string]int64{},
		held:     [2]map[string]int{{}, {}},
		moving:   make(chan struct{}, maxMoving),
	}
	for i := range l.room {
		l.room[i] = make(chan struct{}, w.lookahead)
	}
	return l
}

// release asks the lease to drain and release; it does not wait.
func (l *lease) release() { l.relOnce.Do(func() { close(l.releaseC) }) }

// fence asks the lease to stop at once; it does not wait.
func (l *lease) fence(reason string) {
	select {
	case l.fenceC <- reason:
	default:
	}
}

// stopTaking makes the partition take no more work and gives back the
// events of targets that wait for a slot or are deferred. It holds l.mu
// while it closes quit so that no target starts waiting after it returns.
func (l *lease) stopTaking() {
	l.quitOnce.Do(func() {
		l.mu.Lock()
		close(l.quit)
		l.mu.Unlock()
		l.abandonIdle()
	})
}

func (l *lease) stopping() bool {
	select {
	case <-l.quit:
		return true
	default:
		return false
	}
}

// run owns the lease until it is released, lost or fenced.
func (l *lease) run() {
	w := l.w
	log := w.log.With("partition", l.p)
	if w.ownershipHook != nil {
		w.ownershipHook(l.p, true)
	}
	w.metrics.owned(w.service, 1)
	// Ownership ends when the last handler has returned; only then may the
	// lease go, so the next owner never overlaps with this one.
	var cc lanes
	defer func() {
		if w.ownershipHook != nil {
			w.ownershipHook(l.p, false)
		}
		w.metrics.owned(w.service, -1)
		l.deleteLease()
		w.mu.Lock()
		delete(w.owned, l.p)
		w.mu.Unlock()
		close(l.done)
		if cc != nil {
			// Take the partition back at once if it is still ours to own;
			// after a failure to consume, wait for the next tick instead.
			w.poke()
		}
	}()

	cc, err := l.consume()
	if err != nil {
		log.Info("cannot consume partition; giving it up", "error", err)
		l.stopTaking()
		l.cancel()
		return
	}
	log.Debug("partition owned")

	renew := time.NewTicker(w.renewEvery)
	defer renew.Stop()
	beat := time.NewTicker(w.cfg.AckWait / 4)
	defer beat.Stop()
	fenceAt := time.NewTimer(time.Until(l.deadline))
	defer fenceAt.Stop()
	var drained chan struct{}
	releasing := l.releaseC
	for {
		select {
		case <-renew.C:
			if err := l.renew(); err != nil {
				if errors.Is(err, errLeaseLost) {
					l.stopNow(cc, log, "lease lost")
					return
				}
				log.Debug("cannot renew lease", "error", err)
				continue
			}
			fenceAt.Reset(time.Until(l.deadline))
		case <-beat.C:
			l.heartbeatIdle()
		case <-fenceAt.C:
			l.stopNow(cc, log, "cannot renew lease before it could expire")
			return
		case reason := <-l.fenceC:
			l.stopNow(cc, log, reason)
			return
		case <-releasing:
			releasing = nil
			drained = make(chan struct{})
			go l.drain(cc, drained)
		case <-drained:
			log.Debug("partition released")
			return
		}
	}
}

// lanes are the consume contexts of a partition's lanes: urgent, normal,
// resync and overflow.
type lanes []jetstream.ConsumeContext

// Drain drains every lane.
func (ls lanes) Drain() {
	for _, c := range ls {
		c.Drain()
	}
}

// Closed is closed once every lane is.
func (ls lanes) Closed() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for _, c := range ls {
			<-c.Closed()
		}
		close(ch)
	}()
	return ch
}

// consume starts pulling the partition's messages, from every lane. The
// urgent, resync and overflow consumers are created here when missing
// (EnsureStreams creates the normal ones only), so that streams made before
// a lane existed need no migration.
func (l *lease) consume() (lanes, error) {
	w := l.w
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	stream := StreamName(w.service)
	var ls lanes
	for _, cfg := range []jetstream.ConsumerConfig{
		w.cfg.urgentConsumerConfig(w.service, l.p),
		w.cfg.consumerConfig(w.service, l.p),
		w.cfg.resyncConsumerConfig(w.service, l.p),
		w.cfg.overflowConsumerConfig(w.service, l.p),
	} {
		cons, err := w.js.Consumer(ctx, stream, cfg.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			cons, err = w.js.CreateOrUpdateConsumer(ctx, stream, cfg)
		}
		var cc jetstream.ConsumeContext
		if err == nil {
			cc, err = cons.Consume(l.onMsg,
				jetstream.PullMaxMessages(l.batch),
				jetstream.PullHeartbeat(pullHeartbeat),
				jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
					w.log.Debug("consume error", "partition", l.p, "consumer", cfg.Durable, "error", err)
				}))
		}
		if err != nil {
			for _, c := range ls {
				c.Stop()
			}
			return nil, err
		}
		ls = append(ls, cc)
	}
	return ls, nil
}

var errLeaseLost = errors.New("lease lost")

// renew extends the lease with a compare-and-set on its revision.
func (l *lease) renew() error {
	ctx, cancel := context.WithTimeout(context.Background(), min(kvTimeout, l.w.renewEvery))
	defer cancel()
	sent := time.Now()
	rev, err := l.w.leases.Update(ctx, l.key, []byte(l.w.instance), l.rev)
	if err != nil {
		var jsErr jetstream.JetStreamError
		if errors.As(err, &jsErr) && jsErr.APIError() != nil &&
			(jsErr.APIError().ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
				jsErr.APIError().ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return errLeaseLost
		}
		return err
	}
	l.rev = rev
	l.deadline = sent.Add(l.w.leaseTTL - l.w.margin)
	return nil
}

// stopNow fences the partition: handlers are cancelled at once. run then
// deletes the lease if it is still ours (harmless if not), once they have
// returned.
func (l *lease) stopNow(cc lanes, log interface {
	Info(string, ...any)
}, reason string) {
	log.Info("fencing partition", "reason", reason)
	l.stopTaking()
	l.cancel()
	// Buffered messages reach onMsg, which gives them back at once.
	cc.Drain()
	l.waitHandlers()
}

// drain stops taking work, lets running handlers finish within the drain
// timeout, then cancels the rest; it closes done once all have returned.
func (l *lease) drain(cc lanes, done chan struct{}) {
	l.stopTaking()
	cc.Drain()
	select {
	case <-cc.Closed():
	case <-time.After(l.w.drainTimeout):
	}
	finished := make(chan struct{})
	go func() { l.handlers.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(l.w.drainTimeout):
		l.w.log.Info("drain timed out; cancelling handlers", "partition", l.p)
		l.cancel()
		l.waitHandlers()
	}
	l.cancel()
	close(done)
}

// waitHandlers waits for every handler of the partition to return, logging
// when one ignores its cancelled context.
func (l *lease) waitHandlers() {
	finished := make(chan struct{})
	go func() { l.handlers.Wait(); close(finished) }()
	for {
		select {
		case <-finished:
			return
		case <-time.After(l.w.margin):
			l.w.log.Error("a handler ignores its cancelled context; the partition stays fenced until it returns", "partition", l.p)
		}
	}
}

// deleteLease deletes the lease if its revision is still ours.
func (l *lease) deleteLease() {
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	_ = l.w.leases.Delete(ctx, l.key, jetstream.LastRevision(l.rev))
}
