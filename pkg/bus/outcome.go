package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loomxr/loom/pkg/reconcile"
)

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
// meanwhile, or a copy this lease published in another lane of the target
// is still there and comes back no later (a render that waits for the same
// deadline from each lane's event needs one timer, not one per lane). A copy
// starts again at delivery 1, so requeues never count towards MaxDeliver.
func (l *lease) requeue(pm *pending, delay time.Duration) {
	at := time.Now().Add(delay).UnixNano()
	// A copy due a little later still does: the handler computed the same
	// deadline for both, each run a moment after its settling began.
	if l.timerBy(pm.msg.Subject(), at+int64(min(delay/10, time.Second))) {
		_ = pm.msg.Ack()
		return
	}
	cp := copyMsg(pm, pm.msg.Subject())
	cp.Header.Set(HeaderNotBefore, strconv.FormatInt(at, 10))
	// The copy is recorded before it is published: it may come back (due,
	// for a short delay) before the publication's answer does.
	l.mu.Lock()
	l.timers[cp.Subject] = at
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	_, err := l.w.js.PublishMsg(ctx, cp, jetstream.WithExpectLastSequencePerSubject(pm.seq))
	if err != nil {
		l.mu.Lock()
		if l.timers[cp.Subject] == at {
			delete(l.timers, cp.Subject)
		}
		l.mu.Unlock()
	}
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

// copyMsg is a copy of pm's message, to be published on subject: its data
// and the headers that go with it when it is published again.
func copyMsg(pm *pending, subject string) *nats.Msg {
	cp := nats.NewMsg(subject)
	cp.Data = pm.msg.Data()
	for k, v := range pm.msg.Headers() {
		if republished(k) {
			cp.Header[k] = v
		}
	}
	return cp
}

// overflow moves pm, from the urgent or normal lane, to the overflow lane
// of its target: it publishes a copy there (a copy starts at delivery 1)
// and returns without waiting for JetStream's answer, so that a lane moving
// a tenant's backlog reads on at the pace of the network rather than one
// round trip per event; pm is acknowledged once the copy is stored (see
// moved). It reports false, with pm untouched, if the copy could not be
// sent, or the partition stops taking work while maxMoving moves wait.
func (l *lease) overflow(pm *pending) bool {
	select {
	case l.moving <- struct{}{}:
	case <-l.quit:
		return false
	}
	// Not resent by the client: a copy resent late could replace a newer
	// copy for the same target in the stream.
	f, err := l.w.js.PublishMsgAsync(copyMsg(pm, overflowSubject(pm.msg.Subject())), jetstream.WithRetryAttempts(0))
	if err != nil {
		<-l.moving
		l.logFor(pm).Debug("cannot move event to the overflow lane; it waits for room in its lane", "error", err)
		return false
	}
	l.handlers.Add(1)
	go l.moved(pm, f)
	return true
}

// maxMoving is how many moves to the overflow lane a lease may have sent
// and not yet seen stored.
const maxMoving = 256

// moved settles a move once JetStream answers for its copy: pm is
// acknowledged when the copy is stored, and given back otherwise, to come
// again as a redelivery, which waits for room in its lane (a redelivered
// event is never moved).
func (l *lease) moved(pm *pending, f jetstream.PubAckFuture) {
	defer l.handlers.Done()
	defer func() { <-l.moving }()
	timeout := time.NewTimer(kvTimeout)
	defer timeout.Stop()
	var err error
	select {
	case <-f.Ok():
	case err = <-f.Err():
	case <-timeout.C:
		err = errors.New("no answer from JetStream in time")
	}
	if err != nil {
		l.logFor(pm).Debug("cannot move event to the overflow lane; it comes again and waits for room in its lane", "error", err)
		_ = pm.msg.Nak()
		return
	}
	_ = pm.msg.Ack()
	from := laneNormal
	if isUrgent(pm.msg) {
		from = laneUrgent
	}
	l.w.metrics.overflowed(l.w.service, pm.req.Target.GetKind(), from)
}

// timerBy reports whether a requeue copy this lease published for the
// target of a work subject, in any of its lanes, is still in the stream and
// comes back by at (Unix nanoseconds).
func (l *lease) timerBy(subject string, at int64) bool {
	base := baseSubject(subject)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range append(laneSubjects(base), base+handOverSuffix, overflowSubject(base+handOverSuffix)) {
		if t, ok := l.timers[s]; ok && t <= at {
			return true
		}
	}
	return false
}

// laneSubjects are the subjects of a target's lanes but its hand-over
// ones, given its work subject.
func laneSubjects(base string) []string {
	return []string{base, base + "." + urgentToken, base + "." + resyncToken, base + "." + overflowToken}
}

// baseSubject is the work subject of the target of a subject of any lane.
func baseSubject(subject string) string {
	base := subject
	for _, suffix := range [...]string{"." + urgentToken, "." + resyncToken, "." + overflowToken, handOverSuffix} {
		base = strings.TrimSuffix(base, suffix)
	}
	return base
}

// endTimers makes moot the requeue copies of the target of subject that
// this lease published before a run of the target that has just succeeded
// asking for no requeue: that run saw newer state than the runs that asked
// for them, and the newest run's result is the one that holds (as when a
// newer event supersedes a run, whose requeue is dropped). A moot copy is
// acknowledged when it comes, without a run. Copies that hand a result over
// are not made moot: theirs is news no other event repeats.
func (l *lease) endTimers(subject string) {
	base := baseSubject(subject)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range laneSubjects(base) {
		if t, ok := l.timers[s]; ok {
			delete(l.timers, s)
			l.moot[s] = t
		}
	}
}

// isMoot reports whether a message of subject stamped notBefore (Unix
// nanoseconds; 0 for none) is a requeue copy made moot, and forgets it.
func (l *lease) isMoot(subject string, notBefore int64) bool {
	if notBefore == 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.moot[subject]; ok && t == notBefore {
		delete(l.moot, subject)
		return true
	}
	return false
}

// arrived forgets the requeue copy of a subject once any message of that
// subject arrives but the copy itself delivered early (stamped notBefore,
// Unix nanoseconds; 0 for none): the copy come back due, or another message,
// which replaced it in the stream (the stream keeps one message per
// subject; a redelivery of an older one only makes the lease publish a copy
// it could have spared). A copy replaced by a message this lease has not
// received yet still counts as there: that message, once handled, requeues
// anew if it must.
func (l *lease) arrived(subject string, notBefore int64, due bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.timers[subject]; ok && (t != notBefore || due) {
		delete(l.timers, subject)
	}
	if t, ok := l.moot[subject]; ok && t != notBefore {
		// Another message replaced the moot copy in the stream.
		delete(l.moot, subject)
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
