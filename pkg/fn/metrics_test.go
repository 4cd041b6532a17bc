package fn

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomxr/loom/pkg/testing/metrictest"
	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

// TestClientTelemetry checks that a Client's calls are counted with
// Crossplane's metric names, by gRPC code and result severity, and traced as
// children of the caller's span.
func TestClientTelemetry(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })

	target := serve(t, func(s *grpc.Server) {
		fnv1.RegisterFunctionRunnerServiceServer(s, &v1Server{handle: func(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
			if req.GetMeta().GetTag() == "fail" {
				return nil, status.Error(codes.Internal, "boom")
			}
			return &fnv1.RunFunctionResponse{Results: []*fnv1.Result{
				{Severity: fnv1.Severity_SEVERITY_NORMAL, Message: "fine"},
				{Severity: fnv1.Severity_SEVERITY_WARNING, Message: "careful"},
			}}, nil
		}})
	})
	c := NewClient(StaticResolver{"fn": target})
	// The instruments and the stats handler use the global providers; give
	// this Client the test's instead.
	c.metrics = newRunMetricsFrom(mp)
	c.dialOptions = []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp)))}
	t.Cleanup(func() { _ = c.Close() })

	ctx, parent := tp.Tracer("test").Start(t.Context(), "fn.Step")
	if _, err := c.RunFunction(ctx, "fn", &fnv1.RunFunctionRequest{Meta: &fnv1.RequestMeta{Tag: "ok"}}); err != nil {
		t.Fatalf("RunFunction: %v", err)
	}
	if _, err := c.RunFunction(ctx, "fn", &fnv1.RunFunctionRequest{Meta: &fnv1.RequestMeta{Tag: "fail"}}); err == nil {
		t.Fatalf("RunFunction of a failing call: no error")
	}
	parent.End()

	got := metrictest.Counts(t, reader)
	m, tgt := "grpc_method=/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction", "grpc_target="+target.Endpoint
	want := map[string]int64{
		MetricRunFunctionRequests + "{function_name=fn," + m + "," + tgt + "}":                                       2,
		MetricRunFunctionResponses + "{function_name=fn,grpc_code=OK," + m + "," + tgt + ",result_severity=Warning}": 1,
		MetricRunFunctionResponses + "{function_name=fn,grpc_code=Internal," + m + "," + tgt + ",result_severity=}":  1,
		MetricRunFunctionSeconds + "{function_name=fn,grpc_code=OK," + m + "," + tgt + ",result_severity=Warning}":   1,
		MetricRunFunctionSeconds + "{function_name=fn,grpc_code=Internal," + m + "," + tgt + ",result_severity=}":    1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics: -want, +got:\n%s", diff)
	}

	children := 0
	for _, s := range spans.GetSpans() {
		if s.Name == "apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction" && s.Parent.SpanID() == parent.SpanContext().SpanID() {
			children++
		}
	}
	if children != 2 {
		t.Errorf("got %d gRPC client spans under the step's span, want 2; spans: %v", children, spans.GetSpans())
	}
}
