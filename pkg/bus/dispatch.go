package bus

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomxr/loom/pkg/reconcile"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// maxLinks bounds the trace links a handling span keeps to folded events.
const maxLinks = 32

// targetState is where a target of a partition is: waiting for a handler
// slot, deferred by its guard (backoff or budget), running, or abandoned
// because the partition stopped taking work.
type targetState int

const (
	stateNew targetState = iota
	stateWaiting
	stateDeferred
	stateRunning
	stateAbandoned
)

// target is the state of a target of this partition from its first event
// until its handling ends. Its fields are guarded by the lease's mutex.
type target struct {
	uid   string
	key   string // the tenant key its requests queue under
	kind  string
	state targetState
	// pm is the event it waits with while waiting or deferred; nil while
	// running (the handling goroutine holds it).
	pm     *pending
	urgent bool          // an urgent event came for it: wait in the urgent lane
	resync bool          // only resync events came for it: wait in the resync lane
	room   int           // the lane whose look-ahead room it holds, or -1
	entry  *entry        // its place in the scheduler, while waiting
	timer  *time.Timer   // while deferred
	unhold chan struct{} // while held (see hold): closed when the hold ends
	held   *pending      // the newest event that arrived meanwhile, not yet handled
	folded int           // older events that held superseded
	links  []trace.Link  // of the folded events
}

// isUrgent reports whether a message came through a partition's urgent lane.
func isUrgent(msg jetstream.Msg) bool { return strings.HasSuffix(msg.Subject(), "."+urgentToken) }

// isResync reports whether a message came through a partition's resync lane.
func isResync(msg jetstream.Msg) bool { return strings.HasSuffix(msg.Subject(), "."+resyncToken) }

// isOverflow reports whether a message came through a partition's overflow
// lane.
func isOverflow(msg jetstream.Msg) bool { return strings.HasSuffix(msg.Subject(), "."+overflowToken) }

// urgentReq reports whether a request is urgent: it came through the urgent
// lane, or through the overflow lane from the urgent one (its event says
// so).
func urgentReq(pm *pending) bool {
	return isUrgent(pm.msg) || isOverflow(pm.msg) && pm.req.Event.GetUrgent()
}

// The look-ahead rooms of a partition (lease.room): one per lane, and the
// spare rooms of the lanes that move events to the overflow lane (urgent
// and normal), for tenants under their share of the lane.
const (
	roomUrgent = iota
	roomNormal
	roomResync
	roomOverflow
	roomUrgentSpare
	roomNormalSpare
	rooms
)

// spareRoom is the spare room of a lane that moves events (roomUrgent or
// roomNormal), or -1.
func spareRoom(room int) int {
	switch room {
	case roomUrgent:
		return roomUrgentSpare
	case roomNormal:
		return roomNormalSpare
	default:
		return -1
	}
}

// shareOf is the lane whose shares room counts towards (roomUrgent or
// roomNormal, for the lane's own room and its spare), or -1.
func shareOf(room int) int {
	switch room {
	case roomUrgent, roomUrgentSpare:
		return roomUrgent
	case roomNormal, roomNormalSpare:
		return roomNormal
	default:
		return -1
	}
}

// laneIndex is the look-ahead room of the lane a message came through. The
// resync lane has room of its own so that a resync backlog never holds the
// room real changes need; so does the overflow lane, which holds what the
// urgent and normal lanes had no room for.
func laneIndex(msg jetstream.Msg) int {
	switch {
	case isUrgent(msg):
		return roomUrgent
	case isResync(msg):
		return roomResync
	case isOverflow(msg):
		return roomOverflow
	default:
		return roomNormal
	}
}

// lane is the lane t waits in unless its guard sends it to quarantine:
// urgent once an urgent event came for it, resync while only resync events
// did, else normal (overflow events included).
func (t *target) lane() lane {
	switch {
	case t.urgent:
		return laneUrgent
	case t.resync:
		return laneResync
	default:
		return laneNormal
	}
}

// pending is a received message with its decoded request.
type pending struct {
	msg   jetstream.Msg
	req   Request
	seq   uint64
	at    time.Time         // when it was received, or its last InProgress while waiting
	trace trace.SpanContext // the handling span, once handled
}

// onMsg receives every message of the partition. A message for a target
// that is already waiting or running is folded into it; otherwise the
// target waits for a handler slot in the scheduler, or, from a full urgent
// or normal lane, goes to the overflow lane (takeRoom). onMsg returns at
// once unless the lane already has WithLookahead targets waiting and the
// message cannot go elsewhere, which holds back further pulls of the lane.
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
	pm := &pending{msg: msg, seq: meta.Sequence.Stream, at: time.Now()}
	delivery := int(meta.NumDelivered) //nolint:gosec // A delivery count never exceeds an int.
	nb := notBefore(msg.Headers())
	wait := time.Until(nb)
	var stamp int64
	if !nb.IsZero() {
		stamp = nb.UnixNano()
	}
	if l.isMoot(msg.Subject(), stamp) {
		// A later run of the target asked for no requeue.
		_ = msg.Ack()
		w.metrics.coalesced(w.service, 1)
		return
	}
	l.arrived(msg.Subject(), stamp, nb.IsZero() || wait <= 0)
	if !nb.IsZero() {
		if wait > 0 {
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
	if w.arrivals != nil && !isOverflow(msg) {
		// An overflow event arrived once already, in the urgent or
		// normal lane.
		w.arrivals(pm.req)
	}
	if delivery > 1 {
		w.metrics.redelivered(w.service, tgt.GetKind())
	}
	if l.refresh(pm) {
		// A redelivery of an event that waits here (its InProgress came
		// late): not a handler that kept failing, whatever its count.
		return
	}
	if delivery > w.cfg.MaxDeliver {
		l.deadLetter(pm, delivery, fmt.Sprintf("delivered %d times, more than max deliver %d (the handler never finished: crash or timeout?)", delivery, w.cfg.MaxDeliver))
		return
	}

	if l.foldInto(pm) {
		return
	}
	key := w.fairKey(pm.req)
	room, ok := l.takeRoom(pm, key)
	if !ok {
		return
	}
	uid := tgt.GetUid()
	l.mu.Lock()
	if l.stopping() {
		l.mu.Unlock()
		l.unreserve(room)
		_ = msg.Nak()
		return
	}
	if t := l.targets[uid]; t != nil {
		// Another lane brought an event for it meanwhile.
		up, to := l.foldLocked(t, pm)
		l.mu.Unlock()
		l.unreserve(room)
		if up != nil {
			w.sched.upgrade(up, to)
		}
		return
	}
	t := &target{uid: uid, key: key, kind: tgt.GetKind(), pm: pm, urgent: urgentReq(pm), resync: isResync(msg), room: room}
	if lane := shareOf(room); lane >= 0 {
		l.held[lane][key]++
	}
	l.targets[uid] = t
	l.handlers.Add(1)
	l.mu.Unlock()
	l.schedule(t)
}

// refresh replaces the waiting or held event of pm's target with pm if pm
// is a redelivery of it, and reports whether it was.
func (l *lease) refresh(pm *pending) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.targets[pm.req.Target.GetUid()]
	switch {
	case t == nil:
		return false
	case t.pm != nil && t.pm.seq == pm.seq:
		t.pm = pm
	case t.held != nil && t.held.seq == pm.seq:
		t.held = pm
	default:
		return false
	}
	return true
}

// foldInto folds pm into its target if the target is waiting or running,
// and reports whether it did.
func (l *lease) foldInto(pm *pending) bool {
	l.mu.Lock()
	t := l.targets[pm.req.Target.GetUid()]
	if t == nil || l.stopping() {
		l.mu.Unlock()
		return false
	}
	up, to := l.foldLocked(t, pm)
	l.mu.Unlock()
	if up != nil {
		l.w.sched.upgrade(up, to)
	}
	return true
}

// foldLocked folds pm into t and, if t waits for a slot, returns its
// scheduler entry and the lane it should wait in now (the scheduler moves
// it only to a lane served earlier). The caller holds l.mu.
func (l *lease) foldLocked(t *target, pm *pending) (*entry, lane) {
	l.fold(t, pm)
	if t.state == stateWaiting {
		return t.entry, t.lane()
	}
	return nil, laneNormal
}

// takeRoom takes look-ahead room for the new target of pm, of tenant key,
// in the room of the lane pm came through, and returns that room. It waits
// while the lane has WithLookahead targets waiting, except in the urgent
// and normal lanes, where a tenant's backlog must not keep another tenant's
// event unread in the stream behind it: there, once the lane is full, an
// event of a tenant that holds its share of the lane or more (see
// overShare) is moved to the partition's overflow lane (which never moves
// anything on), and one of a tenant under its share takes the lane's spare
// room. takeRoom returns false when it has settled pm instead: moved it, or
// given it back (Nak) because the partition stops taking work first.
func (l *lease) takeRoom(pm *pending, key string) (int, bool) {
	room := laneIndex(pm.msg)
	orSpare := -1
	if spare := spareRoom(room); spare >= 0 {
		if l.tryReserve(room) {
			return room, true
		}
		switch {
		case !l.overShare(room, key):
			orSpare = spare
		case pm.req.Delivery == 1 && l.overflow(pm):
			// (An event delivered again, because its handler crashed or
			// the partition changed owners, stays: a copy would start its
			// delivery count again.)
			return 0, false
		}
	}
	if got, ok := l.reserve(room, orSpare); ok {
		return got, true
	}
	_ = pm.msg.Nak()
	return 0, false
}

// tryReserve takes look-ahead room without waiting, and reports whether it
// did.
func (l *lease) tryReserve(room int) bool {
	select {
	case l.room[room] <- struct{}{}:
		return true
	default:
		return false
	}
}

// reserve takes look-ahead room in room, or in spare when spare is not -1,
// whichever has some first, waiting while neither has; it returns the room
// taken, or false if the partition stops taking work first.
func (l *lease) reserve(room, spare int) (int, bool) {
	var other chan struct{} // nil: a case that never fires
	if spare >= 0 {
		other = l.room[spare]
	}
	select {
	case l.room[room] <- struct{}{}:
		return room, true
	case other <- struct{}{}:
		return spare, true
	case <-l.quit:
		return 0, false
	}
}

func (l *lease) unreserve(room int) { <-l.room[room] }

// overShare reports whether tenant key holds its share of the look-ahead
// of lane (roomUrgent or roomNormal) or more: WithLookahead divided among
// the tenants that hold some of it, key included, and at least one.
func (l *lease) overShare(lane int, key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := l.held[lane][key]
	tenants := len(l.held[lane])
	if held == 0 {
		tenants++
	}
	return held >= max(1, l.w.lookahead/tenants)
}

// freeRoom gives back the look-ahead room t holds, if any. The caller holds
// l.mu.
func (l *lease) freeRoom(t *target) {
	if t.room < 0 {
		return
	}
	if lane := shareOf(t.room); lane >= 0 {
		if l.held[lane][t.key]--; l.held[lane][t.key] <= 0 {
			delete(l.held[lane], t.key)
		}
	}
	l.unreserve(t.room)
	t.room = -1
}

// schedule sends a target that holds an event (t.pm) and no slot to the
// scheduler, or defers it while its guard says so. The caller owns t: it
// is neither waiting, deferred nor running.
func (l *lease) schedule(t *target) {
	w := l.w
	d, reason := w.guard.delay(t.uid)
	l.mu.Lock()
	if l.stopping() {
		l.mu.Unlock()
		l.abandon(t)
		return
	}
	if d > 0 {
		t.state = stateDeferred
		l.freeRoom(t)
		t.timer = time.AfterFunc(d, func() { l.wake(t) })
		l.mu.Unlock()
		w.metrics.throttled(w.service, t.kind, reason)
		return
	}
	ln := t.lane()
	if w.guard.suspect(t.uid) {
		ln = laneQuarantine
	}
	t.state = stateWaiting
	t.entry = &entry{key: t.key, lane: ln, start: func(p pool) { l.start(t, p) }}
	e := t.entry
	l.mu.Unlock()
	w.sched.add(e)
}

// wake schedules a deferred target whose wait is over.
func (l *lease) wake(t *target) {
	l.mu.Lock()
	if t.state != stateDeferred {
		l.mu.Unlock()
		return
	}
	t.state = stateNew
	t.endWait()
	l.mu.Unlock()
	l.schedule(t)
}

// endWait stops the timer of a deferred or held target and ends its hold.
// The caller holds the lease's mutex.
func (t *target) endWait() {
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	if t.unhold != nil {
		close(t.unhold)
		t.unhold = nil
	}
}

// hold defers a target whose handler asked to wait (Result.Wait) with its
// newest event pm, holding no slot and no look-ahead room, until res.Wait is
// closed or res.RequeueAfter (reconcile.DefaultHoldTimeout when not
// positive) has passed. pm stays unsettled meanwhile (heartbeatIdle keeps it
// from redelivery); a newer event that arrives is folded as for any
// deferred target. The caller owns t, which is running, and has released
// its slot.
func (l *lease) hold(t *target, pm *pending, links []trace.Link, res Result) {
	w := l.w
	d := res.RequeueAfter
	if d <= 0 {
		d = reconcile.DefaultHoldTimeout
	}
	l.mu.Lock()
	t.pm = pm
	t.links = append(links, t.links...)
	if l.stopping() {
		// abandonIdle has run or is about to, and will not see t: give
		// its events back here.
		t.state = stateNew
		l.mu.Unlock()
		l.abandon(t)
		return
	}
	t.state = stateDeferred
	pm.at = time.Now()
	t.timer = time.AfterFunc(d, func() { l.wake(t) })
	unhold := make(chan struct{})
	t.unhold = unhold
	l.mu.Unlock()
	w.metrics.throttled(w.service, t.kind, "wait")
	go func() {
		select {
		case <-res.Wait:
			l.wake(t)
		case <-unhold:
		}
	}()
}

// start runs a waiting target in the slot of pool p it was granted.
func (l *lease) start(t *target, p pool) {
	l.mu.Lock()
	if t.state != stateWaiting {
		// Abandoned meanwhile: hand the slot on.
		l.mu.Unlock()
		l.w.sched.release(p)
		return
	}
	t.state = stateRunning
	t.entry = nil
	l.freeRoom(t)
	pm := t.pm
	t.pm = nil
	l.mu.Unlock()
	go l.handle(t, pm, p)
}

// abandon gives a target's events back (Nak) for whoever owns the partition
// next, and forgets the target. The caller owns t and does not hold l.mu.
func (l *lease) abandon(t *target) {
	l.mu.Lock()
	t.state = stateAbandoned
	if l.targets[t.uid] == t {
		delete(l.targets, t.uid)
	}
	l.freeRoom(t)
	pm, held := t.pm, t.held
	t.pm, t.held = nil, nil
	l.mu.Unlock()
	if pm != nil {
		_ = pm.msg.Nak()
	}
	if held != nil {
		_ = held.msg.Nak()
	}
	l.handlers.Done()
}

// abandonIdle abandons every waiting and deferred target of the partition.
// The caller has closed l.quit, so that no target starts waiting later.
func (l *lease) abandonIdle() {
	l.mu.Lock()
	var idle []*target
	for _, t := range l.targets {
		if t.state == stateWaiting || t.state == stateDeferred {
			t.endWait()
			t.state = stateNew // owned by this function now: start and wake let go
			idle = append(idle, t)
		}
	}
	l.mu.Unlock()
	for _, t := range idle {
		if t.entry != nil {
			l.w.sched.remove(t.entry)
		}
		l.abandon(t)
	}
}

// heartbeatIdle sends InProgress for the events of waiting and deferred
// targets whose last sign of life (receipt or InProgress) is more than
// AckWait/2 old, so that the server does not redeliver them while they
// wait: each waiting event costs one InProgress per AckWait/2. Running
// targets have their own heartbeats.
func (l *lease) heartbeatIdle() {
	now := time.Now()
	old := now.Add(-l.w.cfg.AckWait / 2)
	var msgs []jetstream.Msg
	l.mu.Lock()
	for _, t := range l.targets {
		if t.state == stateRunning {
			continue
		}
		for _, pm := range []*pending{t.pm, t.held} {
			if pm != nil && pm.at.Before(old) {
				pm.at = now
				msgs = append(msgs, pm.msg)
			}
		}
	}
	l.mu.Unlock()
	for _, m := range msgs {
		_ = m.InProgress()
	}
}

// fold records pm as the newest event of a target being handled or
// waiting. The caller holds l.mu.
func (l *lease) fold(t *target, pm *pending) {
	if t.held != nil && t.held.seq == pm.seq {
		t.held = pm // a redelivery of the same message
		return
	}
	if t.pm != nil && t.pm.seq == pm.seq {
		t.pm = pm // a redelivery of the message it waits with
		return
	}
	if isResync(pm.msg) {
		// Nothing is known to have changed, and the target is handled
		// anyway: it waits, or runs and re-reads the current state. (A
		// resync published to a target with a request queued in the same
		// lane is refused by the stream for the same reason.)
		_ = pm.msg.Ack()
		l.w.metrics.coalesced(l.w.service, 1)
		return
	}
	t.resync = false
	if t.held != nil {
		// Superseded before it was handled; pm carries the work now.
		keepHandOver(t.held, pm)
		_ = t.held.msg.Ack()
		t.folded++
	}
	t.held = pm
	if urgentReq(pm) {
		t.urgent = true
	}
	if len(t.links) < maxLinks {
		if sc := trace.SpanContextFromContext(ExtractTrace(context.Background(), pm.msg.Headers())); sc.IsValid() {
			t.links = append(t.links, trace.Link{SpanContext: sc})
		}
	}
}

// handle runs the handler for a target in a slot of pool p, then again for
// every event that arrived meanwhile, one at a time, and settles each
// message. It gives the slot up and sends the target back to the scheduler
// when its guard defers it or moves it to the other pool.
func (l *lease) handle(t *target, pm *pending, p pool) {
	w := l.w
	// A newer event that arrived while the target waited for a slot
	// supersedes the one it waited with: handle that one only.
	l.mu.Lock()
	next, folded, links := t.take(pm)
	l.mu.Unlock()
	if next != nil {
		keepHandOver(pm, next)
		l.supersede(pm, next, folded+1, 0, nil)
		pm = next
	}
	for {
		w.guard.begin(t.uid)
		res, d, err := l.call(t, pm, links)
		failed := err != nil && l.ctx.Err() == nil
		w.guard.end(t.uid, failed)
		w.metrics.ran(w.service, t.kind, p, failed)

		l.mu.Lock()
		next, folded, links = t.take(pm)
		stopping := l.stopping()
		held := err == nil && res.Wait != nil && !stopping
		if (next == nil || stopping) && !held {
			delete(l.targets, t.uid)
		}
		l.mu.Unlock()

		if held {
			// The handler waits on its own state: keep the newest event
			// unsettled and give the slot up until it may go on.
			if next != nil {
				l.supersede(pm, next, folded, d, nil)
				pm = next
			}
			w.sched.release(p)
			l.hold(t, pm, links, res)
			return
		}
		switch {
		case next != nil && !stopping:
			// A newer event replaced this one in the stream: handle it now,
			// unless the target must wait or change pools.
			l.supersede(pm, next, folded, d, err)
			pm = next
			if !l.mustLeave(t, p) {
				continue
			}
			w.sched.release(p)
			l.mu.Lock()
			t.state = stateNew
			t.pm = pm
			t.links = append(links, t.links...)
			l.mu.Unlock()
			l.schedule(t)
			return
		case next != nil:
			_ = next.msg.Nak()
		}
		l.settle(pm, res, err, d)
		if err == nil && res.IsZero() {
			l.endTimers(pm.msg.Subject())
		}
		w.sched.release(p)
		l.handlers.Done()
		return
	}
}

// mustLeave reports whether a target running in pool p must give its slot
// up before its next run: its guard defers it, or it is suspect in the
// main pool (or no longer suspect in the quarantine pool).
func (l *lease) mustLeave(t *target, p pool) bool {
	if d, _ := l.w.guard.delay(t.uid); d > 0 {
		return true
	}
	return l.w.guard.suspect(t.uid) != (p == poolQuarantine)
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

// keepHandOver gives next, which supersedes old before old was handled,
// the result old hands over (eventsv1.Event.Publication) when next hands
// none over itself: an event that says something changed may replace
// another, but a hand-over is news no other event repeats.
func keepHandOver(old, next *pending) {
	if p := old.req.Event.GetPublication(); p != nil && next.req.Event.GetPublication() == nil && next.req.Event != nil {
		next.req.Event.Publication = p
	}
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

// call runs the handler once for target t, with the per-message timeout,
// the event's trace, InProgress heartbeats while it runs, panics turned into
// errors, and reconcile.Superseded answering whether a newer event for t
// has arrived since.
func (l *lease) call(t *target, pm *pending, links []trace.Link) (res Result, d time.Duration, err error) {
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
		hctx := reconcile.WithSuperseded(reconcile.WithRequest(ctx, pm.req), func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			return t.held != nil && t.held.seq != pm.seq
		})
		res, err = w.handler.Handle(hctx, pm.req)
	}()
	d = time.Since(start)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return res, d, err
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
