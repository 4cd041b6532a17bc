package bus

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Outcomes of handling an event, as recorded in metrics and logs.
const (
	OutcomeSuccess    = "success"     // acked
	OutcomeRequeue    = "requeue"     // handled, asked to come back later
	OutcomeError      = "error"       // failed, will be retried with backoff
	OutcomeDeadLetter = "dead_letter" // failed permanently or exhausted, dead-lettered
	OutcomeSuperseded = "superseded"  // a newer event for the target arrived meanwhile
)

// metrics holds the bus's OpenTelemetry instruments. They come from the
// global MeterProvider, which does nothing until a service installs one.
type metrics struct {
	publishedC   metric.Int64Counter
	handledC     metric.Int64Counter
	duration     metric.Float64Histogram
	coalescedC   metric.Int64Counter
	deadLettersC metric.Int64Counter
	ownedC       metric.Int64UpDownCounter
}

func newMetrics() *metrics {
	m := otel.Meter(instrumentation)
	// Instrument creation fails only for invalid names, which are constants
	// here; a failed instrument is a no-op one, so errors are dropped.
	pub, _ := m.Int64Counter("loom.bus.events.published",
		metric.WithDescription("Events published to the bus, by service and result."))
	han, _ := m.Int64Counter("loom.bus.events.handled",
		metric.WithDescription("Events handled by workers, by service and outcome."))
	dur, _ := m.Float64Histogram("loom.bus.handle.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of one handler call, by service and outcome."))
	coa, _ := m.Int64Counter("loom.bus.events.coalesced",
		metric.WithDescription("Events folded into the handling of a newer event for the same target."))
	dlq, _ := m.Int64Counter("loom.bus.dead_letters",
		metric.WithDescription("Events dead-lettered, by service."))
	own, _ := m.Int64UpDownCounter("loom.bus.partitions.owned",
		metric.WithDescription("Partitions this replica owns, by service."))
	return &metrics{publishedC: pub, handledC: han, duration: dur, coalescedC: coa, deadLettersC: dlq, ownedC: own}
}

func (m *metrics) published(service string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.publishedC.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("service", service), attribute.String("result", result)))
}

func (m *metrics) handled(service, outcome string, d time.Duration) {
	attrs := metric.WithAttributes(attribute.String("service", service), attribute.String("outcome", outcome))
	m.handledC.Add(context.Background(), 1, attrs)
	if d > 0 {
		m.duration.Record(context.Background(), d.Seconds(), attrs)
	}
}

func (m *metrics) coalesced(service string, n int) {
	m.coalescedC.Add(context.Background(), int64(n), metric.WithAttributes(attribute.String("service", service)))
}

func (m *metrics) deadLettered(service string) {
	m.deadLettersC.Add(context.Background(), 1, metric.WithAttributes(attribute.String("service", service)))
}

func (m *metrics) owned(service string, delta int64) {
	m.ownedC.Add(context.Background(), delta, metric.WithAttributes(attribute.String("service", service)))
}
