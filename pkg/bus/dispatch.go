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

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// maxLinks bounds the trace links a handling span keeps to folded events.
const maxLinks = 32

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
	if IsPermanent(err) {
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
