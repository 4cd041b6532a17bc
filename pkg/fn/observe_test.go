package fn

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

func TestSpansAndReports(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	runner := RunnerFn(func(ctx context.Context, fn string, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
		if fn == "broken" {
			return nil, errors.New("boom")
		}
		return echo(ctx, req)
	})
	var reports []StepReport
	e := NewExecutor(runner, WithTracerProvider(tp), WithStepObserver(func(r StepReport) { reports = append(reports, r) }))
	_, err := e.Run(t.Context(), []Step{{Name: "one", Function: "ok"}, {Name: "two", Function: "broken"}, {Name: "three", Function: "ok"}}, observedXR())
	if err == nil {
		t.Fatal("Run(...): want error from step two")
	}

	type span struct {
		Name   string
		Attrs  []attribute.KeyValue
		Status codes.Code
	}
	var got []span
	for _, s := range rec.Ended() {
		got = append(got, span{Name: s.Name(), Attrs: s.Attributes(), Status: s.Status().Code})
	}
	want := []span{
		{Name: "fn.Step", Attrs: []attribute.KeyValue{attribute.String("loom.step", "one"), attribute.String("loom.function", "ok"), attribute.Int("loom.calls", 1)}, Status: codes.Unset},
		{Name: "fn.Step", Attrs: []attribute.KeyValue{attribute.String("loom.step", "two"), attribute.String("loom.function", "broken"), attribute.Int("loom.calls", 1)}, Status: codes.Error},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b attribute.Value) bool { return a.Emit() == b.Emit() })); diff != "" {
		t.Errorf("spans: -want, +got:\n%s", diff)
	}

	type report struct {
		Step, Function string
		Calls          int
		Failed         bool
	}
	var gotReports []report
	for _, r := range reports {
		if r.Duration <= 0 {
			t.Errorf("report of step %q: duration %s is not positive", r.Step, r.Duration)
		}
		gotReports = append(gotReports, report{r.Step, r.Function, r.Calls, r.Err != nil})
	}
	if diff := cmp.Diff([]report{{"one", "ok", 1, false}, {"two", "broken", 1, true}}, gotReports); diff != "" {
		t.Errorf("reports: -want, +got:\n%s", diff)
	}
}
