package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Names of the instruments this package records, as OpenTelemetry names;
// Prometheus sees them with dots as underscores and the unit appended, for
// example loom_claim_time_to_ready_seconds.
const (
	MetricClaimTimeToReady     = "loom.claim.time_to_ready"
	MetricCompositeTimeToReady = "loom.composite.time_to_ready"
	MetricReferencesWaiting    = "loom.binder.references.waiting"
	MetricK8sRequests          = "loom.k8s.requests"
)

// ReadyBuckets are the histogram buckets of the time-to-Ready instruments,
// in seconds: from a render that finds everything ready at once to cloud
// resources that take an hour.
var ReadyBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600} //nolint:gochecknoglobals // Treated as a constant.

// referencesTTL is how long a SetReferencesWaiting value counts without being
// set again. The binder handles every XR at least once per resync (ten
// minutes by default), so a live XR's value never expires, and the values of
// XRs whose partition moved to another replica fade out.
const referencesTTL = 30 * time.Minute

// The instruments are made lazily from the global MeterProvider, so that
// they are bound to the provider Setup installs even when a helper is first
// called before it (the global provider delegates). Setup drops them when it
// installs a provider, so that a process (a test binary) that calls Setup
// again records into the new provider rather than the first one.
var (
	instMu sync.Mutex //nolint:gochecknoglobals // The process's instruments, created once.
	inst   *ready     //nolint:gochecknoglobals // As above.
)

func instruments() *ready {
	instMu.Lock()
	defer instMu.Unlock()
	if inst == nil {
		inst = newReady()
	}
	return inst
}

// resetInstruments makes the next helper call create the instruments anew.
func resetInstruments() {
	instMu.Lock()
	inst = nil
	instMu.Unlock()
}

func newReady() *ready {
	m := otel.Meter(instrumentationPrefix + "pkg/telemetry")
	claim, _ := m.Float64Histogram(MetricClaimTimeToReady, metric.WithUnit("s"),
		metric.WithDescription("Time from a claim's creation to its Ready condition becoming True, by kind."),
		metric.WithExplicitBucketBoundaries(ReadyBuckets...))
	xr, _ := m.Float64Histogram(MetricCompositeTimeToReady, metric.WithUnit("s"),
		metric.WithDescription("Time from a composite resource's creation to its Ready condition becoming True, by kind."),
		metric.WithExplicitBucketBoundaries(ReadyBuckets...))
	req, _ := m.Int64Counter(MetricK8sRequests,
		metric.WithDescription("Kubernetes API requests of this process, by verb, resource and outcome (HTTP status code, or error)."))
	r := &ready{claim: claim, xr: xr, requests: req, requestAttrs: NewAttrs(nil, "verb", "resource", "outcome"), waiting: map[string]waiting{}}
	_, _ = m.Int64ObservableGauge(MetricReferencesWaiting,
		metric.WithDescription("References of composed resources waiting to resolve, summed over the composite resources this replica handled."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(r.waitingTotal(time.Now()))
			return nil
		}))
	return r
}

type ready struct {
	claim    metric.Float64Histogram
	xr       metric.Float64Histogram
	requests metric.Int64Counter
	// requestAttrs are the attributes of requests.
	requestAttrs *Attrs

	mu      sync.Mutex
	waiting map[string]waiting
}

type waiting struct {
	n   int64
	set time.Time
}

// ObserveClaimReady records that a claim of kind, created at created, became
// Ready now. Call it once per transition, where the Ready condition is
// written as True over a condition that was not True (after the write
// succeeded), so that replicas and re-reconciles do not count twice.
func ObserveClaimReady(ctx context.Context, kind string, created time.Time) {
	observe(ctx, instruments().claim, kind, created)
}

// ObserveCompositeReady records that a composite resource of kind, created
// at created, became Ready now, under the same rule as ObserveClaimReady.
func ObserveCompositeReady(ctx context.Context, kind string, created time.Time) {
	observe(ctx, instruments().xr, kind, created)
}

func observe(ctx context.Context, h metric.Float64Histogram, kind string, created time.Time) {
	if created.IsZero() {
		return
	}
	d := max(time.Since(created), 0)
	h.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String("kind", kind)))
}

// SetReferencesWaiting records that the composite resource uid has n
// references waiting to resolve (0 when all resolved or it is gone). The
// loom.binder.references.waiting gauge reports the sum over composite
// resources, each value counting for 30 minutes after it was last set.
func SetReferencesWaiting(uid string, n int) {
	r := instruments()
	r.mu.Lock()
	defer r.mu.Unlock()
	if n <= 0 {
		delete(r.waiting, uid)
		return
	}
	r.waiting[uid] = waiting{n: int64(n), set: time.Now()}
}

func (r *ready) waitingTotal(now time.Time) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sum int64
	for uid, w := range r.waiting {
		if now.Sub(w.set) > referencesTTL {
			delete(r.waiting, uid)
			continue
		}
		sum += w.n
	}
	return sum
}
