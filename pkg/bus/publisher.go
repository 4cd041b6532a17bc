package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// instrumentation names the tracer and meter of the bus.
const instrumentation = "github.com/loomxr/loom/pkg/bus"

// publishAttempts is how many times an event is sent before its failure is
// reported; with delays doubling from 100ms up to 2s, the last attempt comes
// about 15s after the first, long enough for a cluster to elect a new stream
// leader. Deduplication makes resending safe.
const publishAttempts = 11

// Publisher publishes events to the work streams of the consuming services.
// It is safe for concurrent use. Publishing is asynchronous: Publish returns
// once the event is sent, and Flush waits for JetStream to have stored every
// event sent so far.
type Publisher struct {
	js          jetstream.JetStream
	rawCfg      Config
	cfg         Config
	cfgErr      error
	source      string
	maxInFlight int
	log         *slog.Logger
	tracer      trace.Tracer
	metrics     *metrics

	slots chan struct{}

	mu      sync.Mutex
	checked map[string]bool // services whose stream's partition count matches
	pending int
	idle    chan struct{} // closed while pending == 0
	err     error         // first failure since the last Flush
}

// NewPublisher returns a Publisher that publishes with js. It starts nothing
// and needs no closing; call Flush before exiting to wait for acknowledgements.
func NewPublisher(js jetstream.JetStream, opts ...PublisherOption) *Publisher {
	p := &Publisher{
		js:          js,
		maxInFlight: 256,
		log:         slog.Default(),
		tracer:      otel.Tracer(instrumentation),
		metrics:     newMetrics(),
		checked:     map[string]bool{},
	}
	for _, o := range opts {
		o.applyPublisher(p)
	}
	p.cfg, p.cfgErr = p.rawCfg.withDefaults()
	p.slots = make(chan struct{}, p.maxInFlight)
	p.idle = make(chan struct{})
	close(p.idle)
	return p
}

// Publish sends ev to service's work stream, on the subject of its target
// (ev.Target, or ev.Object when unset) in the lane the event asks for:
// resync (ev.Type RESYNC, urgent or not), urgent (ev.Urgent) or normal. It
// fills in Source and ObservedTime when they are unset, on a copy: ev itself
// is never modified. It injects the trace context of ctx into the message
// headers, and sets Nats-Msg-Id to target UID, object UID, resourceVersion
// and type when the event has a resourceVersion, so that several publishers
// (active-active watchers) store each change once within
// Config.DuplicateWindow. Events without a resourceVersion are never
// deduplicated.
//
// Publish blocks while WithMaxInFlight events await their acknowledgement, and
// returns an error if ev is invalid, ctx ends while it waits, the event
// cannot be sent, or (checked on the first event for each service) the
// service's stream is missing or has another partition count. A failure after sending (after retries) is logged and
// returned by the next Flush.
func (p *Publisher) Publish(ctx context.Context, service string, ev *eventsv1.Event) error {
	if p.cfgErr != nil {
		return p.cfgErr
	}
	msg, err := p.message(service, ev)
	if err != nil {
		return err
	}
	if err := p.check(ctx, service); err != nil {
		return err
	}
	ctx, span := p.tracer.Start(ctx, "publish "+StreamName(service),
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.destination.name", msg.Subject),
			attribute.String("loom.service", service),
		))
	defer span.End()
	InjectTrace(ctx, msg.Header)

	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("cannot publish event for %s: %w", msg.Subject, ctx.Err())
	}
	f, err := p.js.PublishMsgAsync(msg)
	if err != nil {
		<-p.slots
		span.SetStatus(codes.Error, err.Error())
		return fmt.Errorf("cannot publish event for %s: %w", msg.Subject, err)
	}
	p.mu.Lock()
	if p.pending == 0 {
		p.idle = make(chan struct{})
	}
	p.pending++
	p.mu.Unlock()
	go p.await(f, service, ev) //nolint:gosec // The acknowledgement outlives the publishing request on purpose.
	return nil
}

// check verifies, once per service, that the service's work stream has the
// partition count this publisher routes with.
func (p *Publisher) check(ctx context.Context, service string) error {
	p.mu.Lock()
	ok := p.checked[service]
	p.mu.Unlock()
	if ok {
		return nil
	}
	err := retry(ctx, "cannot check stream "+StreamName(service), func(ctx context.Context) error {
		return checkPartitions(ctx, p.js, service, p.cfg.Partitions)
	})
	if err != nil {
		return fmt.Errorf("cannot publish event: %w", err)
	}
	p.mu.Lock()
	p.checked[service] = true
	p.mu.Unlock()
	return nil
}

// message builds the NATS message of ev.
func (p *Publisher) message(service string, ev *eventsv1.Event) (*nats.Msg, error) {
	if !isService(service) {
		return nil, fmt.Errorf("cannot publish event: unknown service %q", service)
	}
	if ev == nil {
		return nil, errors.New("cannot publish a nil event")
	}
	target := ev.GetTarget()
	if target == nil {
		target = ev.GetObject()
	}
	if target == nil {
		return nil, errors.New("cannot publish event: it names neither a target nor an object")
	}
	if err := checkToken(target.GetUid()); err != nil {
		return nil, fmt.Errorf("cannot publish event for %s %q: target UID %q %w", target.GetKind(), target.GetName(), target.GetUid(), err)
	}
	if (ev.GetSource() == "" && p.source != "") || ev.GetObservedTime() == nil {
		ev = proto.Clone(ev).(*eventsv1.Event) //nolint:forcetypeassert // Cloning an Event yields an Event.
		if ev.Source == "" {
			ev.Source = p.source
		}
		if ev.ObservedTime == nil {
			ev.ObservedTime = timestamppb.Now()
		}
	}
	data, err := proto.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("cannot encode event: %w", err)
	}
	resync := ev.GetType() == eventsv1.EventType_EVENT_TYPE_RESYNC
	var subject string
	switch {
	case resync:
		// Background work, served only when no real change waits; never
		// urgent, since nothing is known to have changed.
		subject = ResyncWorkSubject(service, p.cfg.Partitions, target.GetUid())
	case ev.GetPublication() != nil:
		subject = HandOverWorkSubject(service, p.cfg.Partitions, target.GetUid())
	case ev.GetUrgent():
		subject = UrgentWorkSubject(service, p.cfg.Partitions, target.GetUid())
	default:
		subject = WorkSubject(service, p.cfg.Partitions, target.GetUid())
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	if id := MsgID(ev); id != "" {
		msg.Header.Set(HeaderMsgID, id)
	}
	if resync {
		// A resync says nothing is known to have changed. Publishing it
		// over a resync already queued for the target would only move the
		// target to the back of its resync lane: under a standing backlog,
		// a target resynced more often than the lane drains would never be
		// handled. So a resync is stored only where its target has no
		// resync queued (see alreadyQueued); one that arrives while the
		// target has a request in another lane is acknowledged by the
		// worker without a run of its own (see lease.fold).
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	}
	return msg, nil
}

// alreadyQueued reports whether err is the stream refusing a resync because
// its target already has one queued: that is the outcome the resync wanted.
// Replicated streams report the refusal with another code.
func alreadyQueued(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// msgKind is the kind of ev's target, for metrics.
func msgKind(ev *eventsv1.Event) string {
	if t := ev.GetTarget(); t != nil {
		return t.GetKind()
	}
	return ev.GetObject().GetKind()
}

// msgType is ev's type in lower case (added, modified, deleted, resync,
// requeue), for metrics.
func msgType(ev *eventsv1.Event) string {
	return strings.ToLower(strings.TrimPrefix(ev.GetType().String(), "EVENT_TYPE_"))
}

// MsgID is the deduplication ID of an event: target UID, object UID,
// resourceVersion and type, or "" when the event has no resourceVersion.
func MsgID(ev *eventsv1.Event) string {
	if ev.GetResourceVersion() == "" {
		return ""
	}
	target := ev.GetTarget()
	if target == nil {
		target = ev.GetObject()
	}
	return fmt.Sprintf("%s:%s:%s:%d", target.GetUid(), ev.GetObject().GetUid(), ev.GetResourceVersion(), ev.GetType())
}

// await waits for the acknowledgement of f, resending the message on failure,
// then frees its slot.
func (p *Publisher) await(f jetstream.PubAckFuture, service string, ev *eventsv1.Event) {
	var err error
	select {
	case <-f.Ok():
	case err = <-f.Err():
	}
	if alreadyQueued(err) {
		err = nil
	}
	delay := 100 * time.Millisecond
	for attempt := 1; err != nil && attempt < publishAttempts && resendable(err); attempt++ {
		time.Sleep(delay) //nolint:forbidigo // A backoff between publish attempts in a goroutine of its own; nothing to wait on.
		delay = min(2*delay, 2*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = p.js.PublishMsg(ctx, f.Msg())
		cancel()
		if alreadyQueued(err) {
			err = nil
		}
	}
	p.metrics.published(service, msgKind(ev), ev.GetObject().GetKind(), msgType(ev), err)
	p.mu.Lock()
	if err != nil {
		p.log.Info("cannot publish event", "subject", f.Msg().Subject, "error", err)
		if p.err == nil {
			p.err = fmt.Errorf("cannot publish event for %s: %w", f.Msg().Subject, err)
		}
	}
	p.pending--
	if p.pending == 0 {
		close(p.idle)
	}
	p.mu.Unlock()
	<-p.slots
}

// resendable reports whether resending may succeed after err.
func resendable(err error) bool {
	var jsErr jetstream.JetStreamError
	if errors.As(err, &jsErr) && jsErr.APIError() != nil {
		return retryable(err)
	}
	return !errors.Is(err, nats.ErrConnectionClosed)
}

// Flush waits until every event published so far is acknowledged (or has
// failed after retries), then returns the first failure since the previous
// Flush, if any. It returns ctx's error if ctx ends first.
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	idle := p.idle
	p.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
		return fmt.Errorf("cannot flush published events: %w", ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.err
	p.err = nil
	return err
}
