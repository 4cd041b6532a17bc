package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomxr/loom/pkg/reconcile"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// maxLinks bounds the trace links a handling span keeps to folded events.
const maxLinks = 32

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

	mu       sync.Mutex
	targets  map[string]*target
	handlers sync.WaitGroup
}

// target is the state of a target being handled in this partition.
type target struct {
	held   *pending // the newest event that arrived meanwhile, not yet handled
	folded int      // older events that held superseded
	links  []trace.Link
	// upgrade is closed when an urgent event arrives while the target
	// waits for a handler slot, making the wait urgent too.
	upgrade  chan struct{}
	upgraded bool
}

// isUrgent reports whether a message came through a partition's urgent lane.
func isUrgent(msg jetstream.Msg) bool { return strings.HasSuffix(msg.Subject(), "."+urgentToken) }

// pending is a received message with its decoded request.
type pending struct {
	msg   jetstream.Msg
	req   Request
	seq   uint64
	trace trace.SpanContext // the handling span, once handled
}

func newLease(w *Worker, p int, rev uint64, sent time.Time, batch int) *lease {
	ctx, cancel := context.WithCancel(context.Background())
	return &lease{
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
	}
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

// stopTaking makes the partition take no more work. It holds l.mu so that
// no handler is registered after it returns.
func (l *lease) stopTaking() {
	l.quitOnce.Do(func() {
		l.mu.Lock()
		close(l.quit)
		l.mu.Unlock()
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

// lanes are the consume contexts of a partition's lanes, urgent and other.
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

// consume starts pulling the partition's messages, from both lanes.
func (l *lease) consume() (lanes, error) {
	w := l.w
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	stream := StreamName(w.service)
	var ls lanes
	for _, cfg := range []jetstream.ConsumerConfig{w.cfg.urgentConsumerConfig(w.service, l.p), w.cfg.consumerConfig(w.service, l.p)} {
		cons, err := w.js.Consumer(ctx, stream, cfg.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			cons, err = w.js.CreateOrUpdateConsumer(ctx, stream, cfg)
		}
		var cc jetstream.ConsumeContext
		if err == nil {
			cc, err = cons.Consume(l.onMsg,
				jetstream.PullMaxMessages(l.batch),
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

// onMsg receives every message of the partition. It returns at once unless
// the replica's handler slots are all busy, which holds back further pulls.
func (l *lease) onMsg(msg jetstream.Msg) {
	w := l.w
	if l.stopping() {
		_ = msg.Nak()
		return
	}
	meta, err := msg.Metadata()
	if err != nil {
		// Not a JetStream message; nothing to acknowledge.
		w.log.Info("dropping message without JetStream metadata", "subject", msg.Subject(), "error", err)
		return
	}
	pm := &pending{msg: msg, seq: meta.Sequence.Stream}
	delivery := int(meta.NumDelivered)
	if nb := notBefore(msg.Headers()); !nb.IsZero() {
		if wait := time.Until(nb); wait > 0 {
			_ = msg.NakWithDelay(wait)
			return
		}
		delivery-- // the delivery that met the requeue's delay does not count
	}
	ev, tgt, err := decodeRequest(msg.Subject(), msg.Data())
	if err != nil {
		l.deadLetter(pm, delivery, fmt.Sprintf("undecodable: %v", err))
		return
	}
	pm.req = Request{Event: ev, Target: tgt, Delivery: max(1, delivery)}
	if delivery > 1 {
		w.metrics.redelivered(w.service, tgt.GetKind())
	}
	if delivery > w.cfg.MaxDeliver {
		l.deadLetter(pm, delivery, fmt.Sprintf("delivered %d times, more than max deliver %d (the handler never finished: crash or timeout?)", delivery, w.cfg.MaxDeliver))
		return
	}

	uid := tgt.GetUid()
	l.mu.Lock()
	if l.stopping() {
		l.mu.Unlock()
		_ = msg.Nak()
		return
	}
	if t := l.targets[uid]; t != nil {
		l.fold(t, pm)
		l.mu.Unlock()
		return
	}
	t := &target{upgrade: make(chan struct{})}
	l.targets[uid] = t
	l.handlers.Add(1)
	l.mu.Unlock()

	if !w.slots.acquire(isUrgent(msg), l.quit, t.upgrade) {
		l.mu.Lock()
		delete(l.targets, uid)
		held := t.held
		l.mu.Unlock()
		_ = msg.Nak()
		if held != nil {
			_ = held.msg.Nak()
		}
		l.handlers.Done()
		return
	}
	go l.handle(uid, t, pm)
}

// fold records pm as the newest event of a target being handled. The caller
// holds l.mu.
func (l *lease) fold(t *target, pm *pending) {
	if t.held != nil && t.held.seq == pm.seq {
		t.held = pm // a redelivery of the same message
		return
	}
	if t.held != nil {
		// Superseded before it was handled; pm carries the work now.
		_ = t.held.msg.Ack()
		t.folded++
	}
	t.held = pm
	if !t.upgraded && isUrgent(pm.msg) {
		t.upgraded = true
		close(t.upgrade)
	}
	if len(t.links) < maxLinks {
		if sc := trace.SpanContextFromContext(ExtractTrace(context.Background(), pm.msg.Headers())); sc.IsValid() {
			t.links = append(t.links, trace.Link{SpanContext: sc})
		}
	}
}

// handle runs the handler for a target, then again for every event that
// arrived meanwhile, one at a time, and settles each message.
func (l *lease) handle(uid string, t *target, pm *pending) {
	w := l.w
	defer func() {
		w.slots.release()
		l.handlers.Done()
	}()
	// A newer event that arrived while the target waited for a slot
	// supersedes the one it waited with: handle that one only.
	l.mu.Lock()
	next, folded, links := t.take(pm)
	l.mu.Unlock()
	if next != nil {
		l.supersede(pm, next, folded+1, 0, nil)
		pm = next
	}
	for {
		res, err, d := l.call(pm, links)

		l.mu.Lock()
		next, folded, links = t.take(pm)
		stopping := l.stopping()
		if next == nil || stopping {
			delete(l.targets, uid)
		}
		l.mu.Unlock()

		switch {
		case next != nil && !stopping:
			// A newer event replaced this one in the stream: handle it now.
			l.supersede(pm, next, folded, d, err)
			pm = next
			continue
		case next != nil:
			_ = next.msg.Nak()
		}
		l.settle(pm, res, err, d)
		return
	}
}

// take removes the event held for the target, unless it is a redelivery of
// pm, and returns it with the count of older events it folded and their
// trace links. The caller holds the lease's mutex.
func (t *target) take(pm *pending) (next *pending, folded int, links []trace.Link) {
	next, folded, links = t.held, t.folded, t.links
	t.held, t.folded, t.links = nil, 0, nil
	if next != nil && next.seq == pm.seq {
		next = nil // a redelivery of pm
	}
	return next, folded, links
}

// supersede settles pm, which next replaces after folding folded events:
// acknowledged, or dead-lettered if its handling failed permanently (err).
func (l *lease) supersede(pm, next *pending, folded int, d time.Duration, err error) {
	w := l.w
	if reconcile.IsTerminal(err) {
		l.deadLetter(pm, pm.req.Delivery, "permanent error: "+err.Error())
	} else {
		_ = pm.msg.Ack()
		w.metrics.handled(w.service, pm.req.Target.GetKind(), OutcomeSuperseded, d)
	}
	w.metrics.coalesced(w.service, folded)
	next.req.Coalesced = folded
}

// call runs the handler once, with the per-message timeout, the event's
// trace, InProgress heartbeats while it runs, and panics turned into errors.
func (l *lease) call(pm *pending, links []trace.Link) (res Result, err error, d time.Duration) {
	w := l.w
	ctx := ExtractTrace(l.ctx, pm.msg.Headers())
	ctx, cancel := context.WithTimeout(ctx, w.handlerTimeout)
	defer cancel()
	tgt := pm.req.Target
	ctx, span := w.tracer.Start(ctx, "handle "+w.service,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...),
		trace.WithAttributes(
			attribute.String("loom.service", w.service),
			attribute.String("loom.target.kind", tgt.GetKind()),
			attribute.String("loom.target.namespace", tgt.GetNamespace()),
			attribute.String("loom.target.name", tgt.GetName()),
			attribute.String("loom.target.uid", tgt.GetUid()),
			attribute.Int("loom.delivery", pm.req.Delivery),
			attribute.Int("loom.coalesced", pm.req.Coalesced),
		))
	defer span.End()
	pm.trace = span.SpanContext()

	hb := l.heartbeat(pm)
	defer hb.stop()
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("handler panicked: %v\n%s", r, debug.Stack())
			}
		}()
		res, err = w.handler.Handle(ctx, pm.req)
	}()
	d = time.Since(start)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return res, err, d
}

// heartbeater sends InProgress for a running message (and the message held
// behind it) so that the server does not redeliver them while the handler
// works longer than AckWait.
type heartbeater struct {
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

func (l *lease) heartbeat(pm *pending) *heartbeater {
	hb := &heartbeater{}
	every := l.w.cfg.AckWait / 3
	var beat func()
	beat = func() {
		hb.mu.Lock()
		defer hb.mu.Unlock()
		if hb.stopped {
			return
		}
		_ = pm.msg.InProgress()
		l.mu.Lock()
		if t := l.targets[pm.req.Target.GetUid()]; t != nil && t.held != nil {
			_ = t.held.msg.InProgress()
		}
		l.mu.Unlock()
		hb.timer = time.AfterFunc(every, beat)
	}
	hb.mu.Lock()
	hb.timer = time.AfterFunc(every, beat)
	hb.mu.Unlock()
	return hb
}

func (hb *heartbeater) stop() {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	hb.stopped = true
	hb.timer.Stop()
}

// settle maps a handler outcome to an acknowledgement.
func (l *lease) settle(pm *pending, res Result, err error, d time.Duration) {
	w := l.w
	req := pm.req
	debug := w.log.Enabled(context.Background(), slog.LevelDebug)
	switch {
	case err == nil && res.IsZero():
		_ = pm.msg.Ack()
		w.metrics.handled(w.service, req.Target.GetKind(), OutcomeSuccess, d)
		if debug {
			l.logFor(pm).Debug("handled", "duration", d, "coalesced", req.Coalesced)
		}
	case err == nil:
		after := res.RequeueAfter
		if after <= 0 {
			// Requeue without a delay: the shortest retry delay, so that
			// a handler requeueing at once cannot spin.
			after, _ = l.backoff(1)
		}
		l.requeue(pm, after)
		w.metrics.handled(w.service, req.Target.GetKind(), OutcomeRequeue, d)
		if debug {
			l.logFor(pm).Debug("handled; requeued", "after", after, "duration", d)
		}
	case l.ctx.Err() != nil:
		// Cancelled because this replica is giving the partition up: not the
		// event's fault. Hand it to the next owner at once.
		_ = pm.msg.Nak()
		l.logFor(pm).Info("handler cancelled while giving up the partition", "error", err)
	case reconcile.IsTerminal(err):
		l.deadLetter(pm, req.Delivery, "permanent error: "+err.Error())
		l.logFor(pm).Info("handler failed permanently; dead-lettered", "error", err)
	default:
		delay, ok := l.backoff(req.Delivery)
		if !ok || req.Delivery >= w.cfg.MaxDeliver {
			l.deadLetter(pm, req.Delivery, fmt.Sprintf("failed %d deliveries; last error: %v", req.Delivery, err))
			l.logFor(pm).Info("handler failed; deliveries exhausted, dead-lettered", "error", err)
			return
		}
		_ = pm.msg.NakWithDelay(delay)
		w.metrics.handled(w.service, req.Target.GetKind(), OutcomeError, d)
		l.logFor(pm).Info("handler failed; will retry", "error", err, "retry_in", delay)
	}
}

// logFor is the logger for one handling: the target, the delivery and the
// trace.
func (l *lease) logFor(pm *pending) *slog.Logger {
	t := pm.req.Target
	log := l.w.log.With("partition", l.p, "kind", t.GetKind(), "namespace", t.GetNamespace(),
		"name", t.GetName(), "uid", t.GetUid(), "delivery", pm.req.Delivery)
	if pm.trace.IsValid() {
		log = log.With("trace_id", pm.trace.TraceID().String(), "span_id", pm.trace.SpanID().String())
	}
	return log
}

// backoff returns the delay before the delivery after delivery, or false if
// the backoff says stop.
func (l *lease) backoff(delivery int) (time.Duration, bool) {
	b := l.w.newBackOff()
	var d time.Duration
	for range max(1, delivery) {
		if d = b.NextBackOff(); d == backoff.Stop {
			return 0, false
		}
	}
	return d, true
}

// requeue asks for the target to be handled again after delay: it publishes
// a copy of the event, stamped not-before, in place of the original (which is
// then acknowledged), unless a newer event for the target has arrived
// meanwhile. A copy starts again at delivery 1, so requeues never count
// towards MaxDeliver.
func (l *lease) requeue(pm *pending, delay time.Duration) {
	cp := nats.NewMsg(pm.msg.Subject())
	cp.Data = pm.msg.Data()
	for k, v := range pm.msg.Headers() {
		if republished(k) {
			cp.Header[k] = v
		}
	}
	cp.Header.Set(HeaderNotBefore, strconv.FormatInt(time.Now().Add(delay).UnixNano(), 10))
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	_, err := l.w.js.PublishMsg(ctx, cp, jetstream.WithExpectLastSequencePerSubject(pm.seq))
	var jsErr jetstream.JetStreamError
	switch {
	case err == nil:
		_ = pm.msg.Ack()
	case errors.As(err, &jsErr) && jsErr.APIError() != nil &&
		(jsErr.APIError().ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			jsErr.APIError().ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant):
		// A newer event replaced this one; it will be handled soon anyway.
		_ = pm.msg.Ack()
	default:
		// Fall back to a delayed redelivery, which counts as a delivery.
		_ = pm.msg.NakWithDelay(delay)
	}
}

// notBefore reads the requeue stamp of a message, or the zero time.
func notBefore(h nats.Header) time.Time {
	v := h.Get(HeaderNotBefore)
	if v == "" {
		return time.Time{}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// decodeRequest decodes a work message into its event and target, and checks
// that the subject names that target (so that routing, and with it
// exclusivity, cannot be fooled).
func decodeRequest(subject string, data []byte) (*eventsv1.Event, *eventsv1.ObjectRef, error) {
	_, _, uid, err := parseWorkSubject(subject)
	if err != nil {
		return nil, nil, err
	}
	ev, err := DecodeEvent(data)
	if err != nil {
		return nil, nil, err
	}
	tgt := ev.GetTarget()
	if tgt == nil {
		tgt = ev.GetObject()
	}
	if tgt.GetUid() != uid {
		return nil, nil, fmt.Errorf("cannot accept event: subject names target %q but the event names %q", uid, tgt.GetUid())
	}
	return ev, tgt, nil
}
