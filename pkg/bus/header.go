package bus

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// Headers the bus sets on its messages. NATS header keys are case-sensitive
// and are sent exactly as written here.
const (
	// HeaderMsgID is JetStream's deduplication header.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderNotBefore holds the earliest time (Unix nanoseconds) a requeued
	// request may be handled.
	HeaderNotBefore = "Loom-Not-Before"

	// HeaderDLQReason is why a message was dead-lettered.
	HeaderDLQReason = "Loom-Dlq-Reason"
	// HeaderDLQDeliveries is how many times it had been delivered.
	HeaderDLQDeliveries = "Loom-Dlq-Deliveries"
	// HeaderDLQSubject is the work subject it came from (replay publishes
	// there).
	HeaderDLQSubject = "Loom-Dlq-Subject"
	// HeaderDLQStreamSeq is its sequence in the work stream.
	HeaderDLQStreamSeq = "Loom-Dlq-Stream-Seq"
	// HeaderDLQFailedAt is when it was dead-lettered (RFC 3339, UTC).
	HeaderDLQFailedAt = "Loom-Dlq-Failed-At"
	// HeaderDLQService is the service that gave up on it.
	HeaderDLQService = "Loom-Dlq-Service"
)

// HeaderCarrier adapts NATS message headers to OpenTelemetry propagation.
// Unlike HTTP headers, NATS header keys are case-sensitive and never
// canonicalized, so the HTTP carrier must not be used.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key, or "".
func (c HeaderCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set replaces the values of key with value.
func (c HeaderCarrier) Set(key, value string) { c[key] = []string{value} }

// Keys lists the keys present, in no particular order.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// InjectTrace writes the trace context of ctx into h with the global
// propagator.
func InjectTrace(ctx context.Context, h nats.Header) {
	otel.GetTextMapPropagator().Inject(ctx, HeaderCarrier(h))
}

// ExtractTrace returns ctx carrying the trace context found in h, if any,
// with the global propagator.
func ExtractTrace(ctx context.Context, h nats.Header) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, HeaderCarrier(h))
}

// republished reports whether header k of a stored message goes with it when
// the bus publishes it again (requeued, dead-lettered or replayed). The
// message ID and JetStream's publish expectations (Nats-Expected-*, which a
// resync carries) belong to the original publish: copied, they would make
// the stream refuse the copy. The not-before stamp of a requeue is set anew
// where it applies.
func republished(k string) bool {
	return k != HeaderMsgID && k != HeaderNotBefore && !strings.HasPrefix(k, "Nats-Expected-")
}
