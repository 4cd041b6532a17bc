package fn

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc/status"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

// Crossplane's (v1.20) names for function call metrics, so that dashboards
// and alerts written for Crossplane work with Loom. Crossplane also labels
// them with function_package; Loom's functions have no package.
const (
	MetricRunFunctionRequests  = "composition_run_function_request_total"
	MetricRunFunctionResponses = "composition_run_function_response_total"
	MetricRunFunctionSeconds   = "composition_run_function_seconds"
)

// runMetrics are the Client's instruments, from the global MeterProvider.
type runMetrics struct {
	requests  metric.Int64Counter
	responses metric.Int64Counter
	seconds   metric.Float64Histogram
}

func newRunMetrics() *runMetrics { return newRunMetricsFrom(otel.GetMeterProvider()) }

func newRunMetricsFrom(mp metric.MeterProvider) *runMetrics {
	m := mp.Meter("github.com/loomxr/loom/pkg/fn")
	req, _ := m.Int64Counter(MetricRunFunctionRequests,
		metric.WithDescription("Total number of RunFunctionRequests sent."))
	rsp, _ := m.Int64Counter(MetricRunFunctionResponses,
		metric.WithDescription("Total number of RunFunctionResponses received."))
	sec, _ := m.Float64Histogram(MetricRunFunctionSeconds, metric.WithUnit("s"),
		metric.WithDescription("Histogram of RunFunctionResponse latency (seconds)."),
		metric.WithExplicitBucketBoundaries(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
	return &runMetrics{requests: req, responses: rsp, seconds: sec}
}

// sent counts a request about to be sent.
func (m *runMetrics) sent(ctx context.Context, function, target, method string) {
	m.requests.Add(ctx, 1, metric.WithAttributes(
		attribute.String("function_name", function),
		attribute.String("grpc_target", target),
		attribute.String("grpc_method", method)))
}

// answered records the outcome of a call: its gRPC code and the most severe
// result the function returned.
func (m *runMetrics) answered(ctx context.Context, function, target, method string, start time.Time, rsp *fnv1.RunFunctionResponse, err error) {
	attrs := metric.WithAttributes(
		attribute.String("function_name", function),
		attribute.String("grpc_target", target),
		attribute.String("grpc_method", method),
		attribute.String("grpc_code", status.Code(err).String()),
		attribute.String("result_severity", severity(rsp)))
	// The call's context may be cancelled by now; the measurement is not.
	ctx = context.WithoutCancel(ctx)
	m.responses.Add(ctx, 1, attrs)
	m.seconds.Record(ctx, time.Since(start).Seconds(), attrs)
}

// severity is the most severe result of rsp as Crossplane names it
// (Fatal, Warning, Normal), or "" without results.
func severity(rsp *fnv1.RunFunctionResponse) string {
	worst := ""
	rank := map[fnv1.Severity]int{fnv1.Severity_SEVERITY_NORMAL: 1, fnv1.Severity_SEVERITY_WARNING: 2, fnv1.Severity_SEVERITY_FATAL: 3}
	name := map[fnv1.Severity]string{fnv1.Severity_SEVERITY_NORMAL: "Normal", fnv1.Severity_SEVERITY_WARNING: "Warning", fnv1.Severity_SEVERITY_FATAL: "Fatal"}
	best := 0
	for _, r := range rsp.GetResults() {
		if rank[r.GetSeverity()] > best {
			best, worst = rank[r.GetSeverity()], name[r.GetSeverity()]
		}
	}
	return worst
}
