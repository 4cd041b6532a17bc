package bus_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/testing/poll"
)

// TestMetrics checks the instruments a publisher and a worker record, by
// kind and outcome, including a retry and the consumer gauges. It installs
// a global MeterProvider; other tests' instruments made meanwhile report to
// it too, so it only looks at its own kind.
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	otel.SetMeterProvider(mp)
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })

	h := newHarness(t, testConfig())
	var calls atomic.Int32
	h.start(bus.Binder, "m-0", bus.HandlerFunc(func(context.Context, bus.Request) (bus.Result, error) {
		if calls.Add(1) == 1 {
			return bus.Result{}, errBoom
		}
		return bus.Result{}, nil
	}), bus.WithBackoff(func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }))
	ev := event(uid(4242), 1)
	ev.Object.Kind = "XMetric"
	pub := h.publisher()
	if err := pub.Publish(t.Context(), bus.Binder, ev); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if err := pub.Flush(t.Context()); err != nil {
		t.Fatalf("Flush: %v", err)
	}

	want := map[string]int64{
		"loom.bus.events.published{kind=XMetric,outcome=ok,service=binder,source=XMetric,type=modified}": 1,
		"loom.bus.events.handled{kind=XMetric,outcome=error,service=binder}":                             1,
		"loom.bus.events.handled{kind=XMetric,outcome=success,service=binder}":                           1,
		"loom.bus.redeliveries{kind=XMetric,service=binder}":                                             1,
		"loom.bus.handle.duration{kind=XMetric,outcome=success,service=binder}":                          1,
		"loom.bus.handle.duration{kind=XMetric,outcome=error,service=binder}":                            1,
	}
	var got map[string]int64
	gauges := func() (pending, ackPending int) {
		for k := range got {
			switch {
			case strings.HasPrefix(k, "loom.bus.consumer.pending{"):
				pending++
			case strings.HasPrefix(k, "loom.bus.consumer.ack_pending{"):
				ackPending++
			}
		}
		return pending, ackPending
	}
	// The worker takes its partitions one by one; once it owns them all,
	// each reports its consumer's gauges.
	poll.True(t, 10*time.Second, "the handled event's metrics and the consumer gauges", func() bool {
		got = collect(t, reader)
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		p, a := gauges()
		return p == h.cfg.Partitions && a == h.cfg.Partitions
	})
}

// collect flattens the collected metrics to name{attrs} -> value (sums and
// gauges) or count (histograms), keeping the series of kind XMetric and the
// consumer gauges of the binder.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(t.Context(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	out := map[string]int64{}
	key := func(name string, s attribute.Set) (string, bool) {
		if k, ok := s.Value("kind"); ok && k.AsString() != "XMetric" {
			return "", false
		}
		if v, ok := s.Value("service"); !ok || v.AsString() != bus.Binder {
			return "", false
		}
		return name + "{" + s.Encoded(attribute.DefaultEncoder()) + "}", true
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if k, ok := key(m.Name, p.Attributes); ok {
						out[k] = p.Value
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if k, ok := key(m.Name, p.Attributes); ok {
						out[k] = p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if k, ok := key(m.Name, p.Attributes); ok {
						out[k] = int64(p.Count)
					}
				}
			}
		}
	}
	return out
}
