package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// maxReason bounds the reason header of a dead letter.
const maxReason = 2000

// DeadLetter is one message in the dead-letter stream.
type DeadLetter struct {
	// Seq is its sequence in the dead-letter stream; ReplayDeadLetter takes it.
	Seq uint64 `json:"seq"`
	// Service is the service that gave up on it.
	Service string `json:"service"`
	// Subject is the work subject it came from.
	Subject string `json:"subject"`
	// Event is the decoded event, or nil if it could not be decoded.
	Event *eventsv1.Event `json:"-"`
	// Target is the event's target (or object), or nil if undecodable.
	Target *eventsv1.ObjectRef `json:"-"`
	// Reason says why it was dead-lettered.
	Reason string `json:"reason"`
	// Deliveries is how many times it had been delivered.
	Deliveries int `json:"deliveries"`
	// FailedAt is when it was dead-lettered.
	FailedAt time.Time `json:"failedAt"`
}

// deadLetter copies a message to the dead-letter stream with the reason, then
// terminates it. If the copy cannot be stored the message is retried later
// instead, so nothing is lost.
func (l *lease) deadLetter(pm *pending, delivery int, reason string) {
	w := l.w
	dl := nats.NewMsg(DeadLetterSubject(w.service))
	dl.Data = pm.msg.Data()
	for k, v := range pm.msg.Headers() {
		if republished(k) {
			dl.Header[k] = v
		}
	}
	reason = headerValue(reason)
	dl.Header.Set(HeaderDLQReason, reason)
	dl.Header.Set(HeaderDLQDeliveries, strconv.Itoa(delivery))
	dl.Header.Set(HeaderDLQSubject, pm.msg.Subject())
	dl.Header.Set(HeaderDLQStreamSeq, strconv.FormatUint(pm.seq, 10))
	dl.Header.Set(HeaderDLQFailedAt, time.Now().UTC().Format(time.RFC3339Nano))
	dl.Header.Set(HeaderDLQService, w.service)
	// Dead-lettering one message twice (a crash between the two steps) stores
	// it once.
	dl.Header.Set(HeaderMsgID, fmt.Sprintf("loom-dlq:%s:%d", StreamName(w.service), pm.seq))
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	if _, err := w.js.PublishMsg(ctx, dl); err != nil {
		w.log.Info("cannot dead-letter message; will retry", "subject", pm.msg.Subject(), "error", err)
		_ = pm.msg.NakWithDelay(w.cfg.AckWait)
		return
	}
	_ = pm.msg.TermWithReason(truncate(reason, 200))
	kind := pm.req.Target.GetKind()
	w.metrics.handled(w.service, kind, OutcomeDeadLetter, 0)
	w.metrics.deadLettered(w.service, kind)
}

// headerValue makes s safe as a NATS header value: one line, bounded.
func headerValue(s string) string {
	s = strings.NewReplacer("\r\n", " | ", "\n", " | ", "\r", " ").Replace(s)
	return truncate(s, maxReason)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// ListDeadLetters returns the dead letters of service (every service if
// service is ""), oldest first.
func ListDeadLetters(ctx context.Context, js jetstream.JetStream, service string) ([]DeadLetter, error) {
	filter := fmt.Sprintf("%s.%s.>", subjectPrefix, dlqToken)
	if service != "" {
		if !isService(service) {
			return nil, fmt.Errorf("cannot list dead letters: unknown service %q", service)
		}
		filter = DeadLetterSubject(service)
	}
	s, err := js.Stream(ctx, DeadLetterStream)
	if err != nil {
		return nil, fmt.Errorf("cannot open stream %s: %w", DeadLetterStream, err)
	}
	var out []DeadLetter
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read dead letter after sequence %d: %w", seq, err)
		}
		out = append(out, parseDeadLetter(m))
		seq = m.Sequence + 1
	}
}

// GetDeadLetter returns the dead letter at seq.
func GetDeadLetter(ctx context.Context, js jetstream.JetStream, seq uint64) (DeadLetter, error) {
	s, err := js.Stream(ctx, DeadLetterStream)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("cannot open stream %s: %w", DeadLetterStream, err)
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("cannot read dead letter %d: %w", seq, err)
	}
	return parseDeadLetter(m), nil
}

func parseDeadLetter(m *jetstream.RawStreamMsg) DeadLetter {
	d := DeadLetter{
		Seq:     m.Sequence,
		Service: m.Header.Get(HeaderDLQService),
		Subject: m.Header.Get(HeaderDLQSubject),
		Reason:  m.Header.Get(HeaderDLQReason),
	}
	if d.Service == "" {
		d.Service = strings.TrimPrefix(m.Subject, fmt.Sprintf("%s.%s.", subjectPrefix, dlqToken))
	}
	d.Deliveries, _ = strconv.Atoi(m.Header.Get(HeaderDLQDeliveries))
	d.FailedAt, _ = time.Parse(time.RFC3339Nano, m.Header.Get(HeaderDLQFailedAt))
	if ev, err := DecodeEvent(m.Data); err == nil {
		d.Event = ev
		d.Target = ev.GetTarget()
		if d.Target == nil {
			d.Target = ev.GetObject()
		}
	}
	return d
}

// ReplayDeadLetter publishes the dead letter at seq to the work subject it
// came from, as a fresh message (delivery 1), then deletes it from the
// dead-letter stream. Replaying the same dead letter twice (a crash between
// the two steps) publishes it once.
func ReplayDeadLetter(ctx context.Context, js jetstream.JetStream, seq uint64) (DeadLetter, error) {
	s, err := js.Stream(ctx, DeadLetterStream)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("cannot open stream %s: %w", DeadLetterStream, err)
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("cannot read dead letter %d: %w", seq, err)
	}
	d := parseDeadLetter(m)
	if _, _, _, err := parseWorkSubject(d.Subject); err != nil {
		return d, fmt.Errorf("cannot replay dead letter %d: %w", seq, err)
	}
	msg := nats.NewMsg(d.Subject)
	msg.Data = m.Data
	for k, v := range m.Header {
		if !strings.HasPrefix(k, "Loom-Dlq-") && republished(k) {
			msg.Header[k] = v
		}
	}
	msg.Header.Set(HeaderMsgID, fmt.Sprintf("loom-replay:%d:%s", seq, m.Header.Get(HeaderDLQFailedAt)))
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return d, fmt.Errorf("cannot replay dead letter %d to %s: %w", seq, d.Subject, err)
	}
	if err := s.DeleteMsg(ctx, seq); err != nil {
		return d, fmt.Errorf("cannot delete replayed dead letter %d: %w", seq, err)
	}
	return d, nil
}
