package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Environment variables Setup reads (besides those the OpenTelemetry SDK and
// exporters read themselves).
const (
	EnvSDKDisabled        = "OTEL_SDK_DISABLED"
	EnvTracesExporter     = "OTEL_TRACES_EXPORTER"
	EnvMetricsExporter    = "OTEL_METRICS_EXPORTER"
	EnvEndpoint           = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint     = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvMetricsEndpoint    = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
	EnvLineageWindow      = "LOOM_TRACE_WINDOW"
	DefaultLineageWindow  = 10 * time.Minute
	instrumentationPrefix = "github.com/loomxr/loom/"
)

// An Option configures Setup.
type Option func(*config)

type config struct {
	lookup     func(string) (string, bool)
	registerer prometheus.Registerer
	spans      sdktrace.SpanExporter
}

// WithLookupEnv replaces os.LookupEnv for the variables Setup itself reads
// (the OTLP exporters always read the process environment).
func WithLookupEnv(lookup func(string) (string, bool)) Option {
	return func(c *config) { c.lookup = lookup }
}

// WithRegisterer registers the Prometheus exporter, and the process and Go
// collectors, with r instead of a registry of the Setup call's own (served
// by Handler). Serve r with HandlerFor. For tests.
func WithRegisterer(r prometheus.Registerer) Option {
	return func(c *config) { c.registerer = r }
}

// WithSpanExporter turns tracing on with e, whatever the environment says.
// For tests.
func WithSpanExporter(e sdktrace.SpanExporter) Option {
	return func(c *config) { c.spans = e }
}

// Setup installs the process-wide OpenTelemetry configuration of a Loom
// service: the W3C propagator, a TracerProvider exporting by OTLP/gRPC when
// the environment asks for it (see the package documentation), and a
// MeterProvider read by the Prometheus registry that Handler serves (and
// pushed by OTLP when OTEL_METRICS_EXPORTER lists "otlp"). Resources name
// the service (service.name, service.namespace "loom") and the replica
// (service.instance.id).
//
// Setup is meant to be called once per process, before the service creates
// clients; a later call replaces what an earlier one installed (the earlier
// one's shutdown should have been called). The returned
// shutdown flushes pending spans and metrics and stops the exporters, within
// its context; it is never nil, even when Setup fails.
func Setup(ctx context.Context, service, replicaID string, opts ...Option) (shutdown func(context.Context) error, err error) {
	c := config{lookup: os.LookupEnv}
	for _, o := range opts {
		o(&c)
	}
	env := func(k string) string {
		v, _ := c.lookup(k)
		return strings.TrimSpace(v)
	}
	var shutdowns []func(context.Context) error
	shutdown = func(ctx context.Context) error {
		var errs []error
		for i := len(shutdowns) - 1; i >= 0; i-- {
			errs = append(errs, shutdowns[i](ctx))
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (func(context.Context) error, error) {
		_ = shutdown(ctx)
		return func(context.Context) error { return nil }, err
	}

	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if d, err := time.ParseDuration(env(EnvLineageWindow)); err == nil {
		setLineageWindow(d)
	}

	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", service),
			attribute.String("service.namespace", "loom"),
			attribute.String("service.instance.id", replicaID),
		),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil && res == nil {
		return fail(fmt.Errorf("cannot describe the telemetry resource: %w", err))
	}

	disabled := strings.EqualFold(env(EnvSDKDisabled), "true")
	spans := c.spans
	if spans == nil && !disabled && tracesEnabled(env) {
		e, err := otlptracegrpc.New(ctx)
		if err != nil {
			return fail(fmt.Errorf("cannot create the OTLP trace exporter: %w", err))
		}
		spans = e
	}
	if spans != nil {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		shutdowns = append(shutdowns, tp.Shutdown)
	}

	reg, collectorsTo := c.registerer, c.registerer
	if reg == nil {
		own := prometheus.NewRegistry()
		reg, collectorsTo = own, crmetrics.Registry
		defer func() {
			if err == nil {
				otelGatherer.set(own)
			}
		}()
	}
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		otelprom.WithoutScopeInfo(),
	)
	if err != nil {
		return fail(fmt.Errorf("cannot create the Prometheus exporter: %w", err))
	}
	for _, col := range []prometheus.Collector{
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	} {
		if err := collectorsTo.Register(col); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			return fail(fmt.Errorf("cannot register the process metrics: %w", err))
		}
	}
	mopts := []sdkmetric.Option{sdkmetric.WithReader(exp), sdkmetric.WithResource(res)}
	if !disabled && listed(env(EnvMetricsExporter), "otlp") {
		me, err := otlpmetricgrpc.New(ctx)
		if err != nil {
			return fail(fmt.Errorf("cannot create the OTLP metric exporter: %w", err))
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me)))
	}
	mp := sdkmetric.NewMeterProvider(mopts...)
	otel.SetMeterProvider(mp)
	resetInstruments()
	shutdowns = append(shutdowns, mp.Shutdown)
	return shutdown, nil
}

// tracesEnabled applies the package's rule for turning tracing on.
func tracesEnabled(env func(string) string) bool {
	if e := env(EnvTracesExporter); e != "" {
		return listed(e, "otlp")
	}
	return env(EnvEndpoint) != "" || env(EnvTracesEndpoint) != ""
}

// listed reports whether the comma-separated list has want.
func listed(list, want string) bool {
	for _, v := range strings.Split(list, ",") {
		if strings.EqualFold(strings.TrimSpace(v), want) {
			return true
		}
	}
	return false
}

// Handler serves, in the Prometheus text format, the metrics of
// controller-runtime's metrics.Registry (client-go's requests, and the
// process and Go collectors Setup adds) and those of the OpenTelemetry
// MeterProvider the last Setup installed.
func Handler() http.Handler {
	return HandlerFor(Gatherer())
}

// Gatherer gathers what Handler serves.
func Gatherer() prometheus.Gatherer {
	return prometheus.Gatherers{crmetrics.Registry, otelGatherer}
}

// otelGatherer gathers from the registry of the last Setup.
var otelGatherer = &switchGatherer{} //nolint:gochecknoglobals // The process's one Prometheus gatherer.

type switchGatherer struct {
	mu sync.Mutex
	g  prometheus.Gatherer
}

func (s *switchGatherer) set(g prometheus.Gatherer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.g = g
}

func (s *switchGatherer) Gather() ([]*dto.MetricFamily, error) {
	s.mu.Lock()
	g := s.g
	s.mu.Unlock()
	if g == nil {
		return nil, nil
	}
	return g.Gather()
}

// HandlerFor serves the metrics of g in the Prometheus text format, or in
// OpenMetrics when the scraper asks for it (Accept), which carries the
// exemplars that link a time-to-Ready observation to its trace.
func HandlerFor(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true})
}

// lineageWindow is how long Lineage keeps an object's trace.
var lineageWindow = struct { //nolint:gochecknoglobals // Treated as a constant.
	sync.Mutex
	d time.Duration
}{d: DefaultLineageWindow}

func setLineageWindow(d time.Duration) {
	lineageWindow.Lock()
	defer lineageWindow.Unlock()
	lineageWindow.d = d
}

// LineageWindow is how long a Lineage made with window 0 keeps the trace of
// a newly seen object: LOOM_TRACE_WINDOW as read by Setup, default ten
// minutes.
func LineageWindow() time.Duration {
	lineageWindow.Lock()
	defer lineageWindow.Unlock()
	return lineageWindow.d
}
