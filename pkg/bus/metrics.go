package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/loomxr/loom/pkg/telemetry"
)

// Outcomes of handling an event, as recorded in metrics and logs.
const (
	OutcomeSuccess    = "success"     // acked
	OutcomeRequeue    = "requeue"     // handled, asked to come back later
	OutcomeError      = "error"       // failed, will be retried with backoff
	OutcomeDeadLetter = "dead_letter" // failed permanently or exhausted, dead-lettered
	OutcomeSuperseded = "superseded"  // a newer event for the target arrived meanwhile
)

// durationBuckets are the buckets of the handling duration histogram, in
// seconds.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120} //nolint:gochecknoglobals // Treated as a constant.

// metrics holds the bus's OpenTelemetry instruments. They come from the
// global MeterProvider, which does nothing until a service installs one.
type metrics struct {
	meter        metric.Meter
	publishedC   metric.Int64Counter
	handledC     metric.Int64Counter
	duration     metric.Float64Histogram
	coalescedC   metric.Int64Counter
	deadLettersC metric.Int64Counter
	redeliveredC metric.Int64Counter
	ownedC       metric.Int64UpDownCounter
	pendingG     metric.Int64ObservableGauge
	ackPendingG  metric.Int64ObservableGauge
	redeliveredG metric.Int64ObservableGauge
	throttledC   metric.Int64Counter
	runsC        metric.Int64Counter
	queueWaitH   metric.Float64Histogram
	peakRunsG    metric.Int64ObservableGauge
	overflowedC  metric.Int64Counter

	// The attributes of the measurements made per event.
	publishedA, handledA, queueWaitA, runsA, failedRunsA *telemetry.Attrs
}

func newMetrics() *metrics {
	m := otel.Meter(instrumentation)
	// Instrument creation fails only for invalid names, which are constants
	// here; a failed instrument is a no-op one, so errors are dropped.
	pub, _ := m.Int64Counter("loom.bus.events.published",
		metric.WithDescription("Events published to the bus, by service (the receiving one), target kind, outcome (ok, error), the kind of the object that changed (source) and the event's type (added, modified, deleted, resync, requeue)."))
	han, _ := m.Int64Counter("loom.bus.events.handled",
		metric.WithDescription("Events handled by workers, by service, target kind and outcome."))
	dur, _ := m.Float64Histogram("loom.bus.handle.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of one handler call, by service, target kind and outcome."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	coa, _ := m.Int64Counter("loom.bus.events.coalesced",
		metric.WithDescription("Events folded into the handling of a newer event for the same target, and requeues made moot by a later run of their target."))
	dlq, _ := m.Int64Counter("loom.bus.dead_letters",
		metric.WithDescription("Events dead-lettered, by service and target kind."))
	red, _ := m.Int64Counter("loom.bus.redeliveries",
		metric.WithDescription("Events delivered again after a failure, a timeout or a crash (retries), by service and target kind."))
	own, _ := m.Int64UpDownCounter("loom.bus.partitions.owned",
		metric.WithDescription("Partitions this replica owns, by service."))
	pen, _ := m.Int64ObservableGauge("loom.bus.consumer.pending",
		metric.WithDescription("Events waiting in a partition's consumer, not yet delivered, by service and partition (reported by the owner)."))
	ack, _ := m.Int64ObservableGauge("loom.bus.consumer.ack_pending",
		metric.WithDescription("Events delivered from a partition's consumer and not yet acknowledged, by service and partition (reported by the owner)."))
	rdg, _ := m.Int64ObservableGauge("loom.bus.consumer.redelivered",
		metric.WithDescription("Events of a partition's consumer that JetStream is delivering again and that are not yet acknowledged, by service and partition (reported by the owner)."))
	thr, _ := m.Int64Counter("loom.bus.targets.throttled",
		metric.WithDescription("Handlings of a target deferred, holding no slot, by service, target kind and reason (backoff: it failed lately; budget: it ran its budget of runs this minute; wait: its handler asked to wait for its own state, Result.Wait)."))
	runs, _ := m.Int64Counter("loom.bus.handler.runs",
		metric.WithDescription("Handler calls, by service, target kind, pool (main; resync for main-pool slots lent to resync requests; quarantine for targets that failed or were throttled lately) and failed (true, false)."))
	qw, _ := m.Float64Histogram("loom.bus.queue.wait", metric.WithUnit("s"),
		metric.WithDescription("Time a received request waited for a handler slot, by service and lane (urgent, normal, resync, quarantine)."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	peak, _ := m.Int64ObservableGauge("loom.bus.target.runs_per_minute.max",
		metric.WithDescription("The most handler runs one target had within one minute on this replica since it started, by service; at most the per-target budget."))
	ovf, _ := m.Int64Counter("loom.bus.events.overflowed",
		metric.WithDescription("Events a worker moved from a partition's full urgent or normal lane to its overflow lane because their tenant held its share of the lane or more, by service, target kind and lane (urgent, normal): each is moved once, so that other tenants' events are read past that tenant's backlog."))
	return &metrics{meter: m, overflowedC: ovf, publishedC: pub, handledC: han, duration: dur, coalescedC: coa, deadLettersC: dlq,
		redeliveredC: red, ownedC: own, pendingG: pen, ackPendingG: ack, redeliveredG: rdg,
		throttledC: thr, runsC: runs, queueWaitH: qw, peakRunsG: peak,
		publishedA:  telemetry.NewAttrs(nil, "service", "kind", "outcome", "source", "type"),
		handledA:    telemetry.NewAttrs(nil, "service", "kind", "outcome"),
		queueWaitA:  telemetry.NewAttrs(nil, "service", "lane"),
		runsA:       telemetry.NewAttrs([]attribute.KeyValue{attribute.Bool("failed", false)}, "service", "kind", "pool"),
		failedRunsA: telemetry.NewAttrs([]attribute.KeyValue{attribute.Bool("failed", true)}, "service", "kind", "pool")}
}

func (m *metrics) published(service, kind, source, typ string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.publishedC.Add(context.Background(), 1, m.publishedA.Option(service, kind, outcome, source, typ))
}

func (m *metrics) handled(service, kind, outcome string, d time.Duration) {
	attrs := m.handledA.Option(service, kind, outcome)
	m.handledC.Add(context.Background(), 1, attrs)
	if d > 0 {
		m.duration.Record(context.Background(), d.Seconds(), attrs)
	}
}

// declare makes the failure counters of service exist at zero, so that
// dashboards and alerts see a zero rather than no data before the first
// failure.
func (m *metrics) declare(service string) {
	attrs := metric.WithAttributes(attribute.String("service", service))
	m.redeliveredC.Add(context.Background(), 0, attrs)
	m.deadLettersC.Add(context.Background(), 0, attrs)
	m.throttledC.Add(context.Background(), 0, attrs)
	m.overflowedC.Add(context.Background(), 0, attrs)
}

func (m *metrics) overflowed(service, kind string, from lane) {
	m.overflowedC.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("service", service), attribute.String("kind", kind), attribute.String("lane", from.String())))
}

func (m *metrics) throttled(service, kind, reason string) {
	m.throttledC.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("service", service), attribute.String("kind", kind), attribute.String("reason", reason)))
}

func (m *metrics) ran(service, kind string, p pool, failed bool) {
	a := m.runsA
	if failed {
		a = m.failedRunsA
	}
	m.runsC.Add(context.Background(), 1, a.Option(service, kind, p.String()))
}

func (m *metrics) queueWait(service string, ln lane, d time.Duration) {
	m.queueWaitH.Record(context.Background(), d.Seconds(), m.queueWaitA.Option(service, ln.String()))
}

func (m *metrics) redelivered(service, kind string) {
	m.redeliveredC.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("service", service), attribute.String("kind", kind)))
}

// observeConsumers reports the pending, ack-pending and redelivered counts of the
// consumers of the partitions w owns, read from JetStream at each
// collection, until the returned function is called.
func (m *metrics) observeConsumers(w *Worker) func() {
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		o.ObserveInt64(m.peakRunsG, w.guard.peakRuns(), metric.WithAttributes(attribute.String("service", w.service)))
		if w.nc.Status() != nats.CONNECTED {
			return nil
		}
		// One bound for all partitions, so that a slow server cannot stall
		// a scrape for long.
		ctx, cancel := context.WithTimeout(ctx, kvTimeout)
		defer cancel()
		for _, p := range w.Owned() {
			// The urgent, normal and overflow lanes of the partition,
			// summed: the lag KEDA scales on. The resync lane is
			// background work that scaling out must not chase (see the
			// chart's scaledobject.yaml), and is left out.
			var pending, ackPending, redelivered int64
			seen := false
			for _, name := range []string{ConsumerName(w.service, p), UrgentConsumerName(w.service, p), OverflowConsumerName(w.service, p)} {
				c, err := w.js.Consumer(ctx, StreamName(w.service), name)
				if ctx.Err() != nil {
					return nil
				}
				if err != nil {
					continue
				}
				var info *jetstream.ConsumerInfo
				if info = c.CachedInfo(); info == nil {
					continue
				}
				seen = true
				pending += int64(info.NumPending) //nolint:gosec // Message counts never exceed an int64.
				ackPending += int64(info.NumAckPending)
				redelivered += int64(info.NumRedelivered)
			}
			if !seen {
				continue
			}
			attrs := metric.WithAttributes(attribute.String("service", w.service), attribute.Int("partition", p))
			o.ObserveInt64(m.pendingG, pending, attrs)
			o.ObserveInt64(m.ackPendingG, ackPending, attrs)
			o.ObserveInt64(m.redeliveredG, redelivered, attrs)
		}
		return nil
	}, m.pendingG, m.ackPendingG, m.redeliveredG, m.peakRunsG)
	if err != nil {
		return func() {}
	}
	return func() { _ = reg.Unregister() }
}

func (m *metrics) coalesced(service string, n int) {
	m.coalescedC.Add(context.Background(), int64(n), metric.WithAttributes(attribute.String("service", service)))
}

func (m *metrics) deadLettered(service, kind string) {
	m.deadLettersC.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("service", service), attribute.String("kind", kind)))
}

func (m *metrics) owned(service string, delta int64) {
	m.ownedC.Add(context.Background(), delta, metric.WithAttributes(attribute.String("service", service)))
}
