// Package metrictest reads what a test's OpenTelemetry meter provider
// measured.
package metrictest

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Counts collects r and returns each data point of its int64 sums (their
// value) and float64 histograms (their count), keyed by the instrument's
// name and the point's attributes: "name{k1=v1,k2=v2}", attributes sorted
// by key. It fails the test if r cannot be collected.
func Counts(t testing.TB, r sdkmetric.Reader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(t.Context(), &rm); err != nil {
		t.Fatalf("cannot collect metrics: %v", err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name+"{"+p.Attributes.Encoded(attribute.DefaultEncoder())+"}"] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name+"{"+p.Attributes.Encoded(attribute.DefaultEncoder())+"}"] = int64(p.Count) //nolint:gosec // A test's counts are small.
				}
			}
		}
	}
	return got
}
