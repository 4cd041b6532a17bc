package telemetry

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestAttrs checks that measurements made with an Attrs' options carry the
// fixed attributes and the values given, by key, and that each combination
// of values is counted apart.
func TestAttrs(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	c, err := mp.Meter("test").Int64Counter("test.count")
	if err != nil {
		t.Fatal(err)
	}
	a := NewAttrs([]attribute.KeyValue{attribute.Bool("failed", true)}, "service", "kind")
	for range 3 {
		c.Add(t.Context(), 1, a.Option("renderer", "XR"))
	}
	c.Add(t.Context(), 1, a.Option("binder", "XR"))
	c.Add(t.Context(), 1, a.Option("binder"))

	var rm metricdata.ResourceMetrics
	if err := rd.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				got[p.Attributes.Encoded(attribute.DefaultEncoder())] = p.Value
			}
		}
	}
	want := map[string]int64{
		"failed=true,kind=XR,service=renderer": 3,
		"failed=true,kind=XR,service=binder":   1,
		"failed=true,kind=,service=binder":     1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("counted: -want, +got:\n%s", diff)
	}
}
