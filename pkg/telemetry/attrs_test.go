package telemetry

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/loomxr/loom/pkg/testing/metrictest"
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

	got := metrictest.Counts(t, rd)
	want := map[string]int64{
		"test.count{failed=true,kind=XR,service=renderer}": 3,
		"test.count{failed=true,kind=XR,service=binder}":   1,
		"test.count{failed=true,kind=,service=binder}":     1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("counted: -want, +got:\n%s", diff)
	}
}
