package telemetry

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The tests of this package share the global OpenTelemetry providers that
// Setup installs, so none of them runs in parallel; each test that needs a
// fresh setup calls setup.
func setup(t *testing.T) (*prometheus.Registry, *tracetest.InMemoryExporter) {
	t.Helper()
	reg := prometheus.NewRegistry()
	spans := tracetest.NewInMemoryExporter()
	shutdown, err := Setup(t.Context(), "test", "test-0",
		WithRegisterer(reg), WithSpanExporter(spans), WithLookupEnv(noEnv))
	if err != nil {
		t.Fatalf("Setup(...): %v", err)
	}
	t.Cleanup(func() { _ = shutdown(context.Background()) })
	return reg, spans
}

func noEnv(string) (string, bool) { return "", false }

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// flush exports the spans ended so far.
func flush(t *testing.T) {
	t.Helper()
	if tp, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		if err := tp.ForceFlush(t.Context()); err != nil {
			t.Fatalf("ForceFlush: %v", err)
		}
	}
}

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	rsp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	if err != nil {
		t.Fatalf("read /metrics: %v", err)
	}
	if rsp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s\n%s", rsp.Status, b)
	}
	return string(b)
}

func TestTracesEnabled(t *testing.T) {
	cases := map[string]struct {
		reason string
		env    map[string]string
		want   bool
	}{
		"Default": {
			reason: "Without any OTEL_* variable tracing is off.",
			want:   false,
		},
		"Endpoint": {
			reason: "An OTLP endpoint turns tracing on.",
			env:    map[string]string{EnvEndpoint: "http://127.0.0.1:4317"},
			want:   true,
		},
		"TracesEndpoint": {
			reason: "A traces-only OTLP endpoint turns tracing on.",
			env:    map[string]string{EnvTracesEndpoint: "http://127.0.0.1:4317"},
			want:   true,
		},
		"ExporterNone": {
			reason: "OTEL_TRACES_EXPORTER=none wins over an endpoint.",
			env:    map[string]string{EnvEndpoint: "http://127.0.0.1:4317", EnvTracesExporter: "none"},
			want:   false,
		},
		"ExporterOTLP": {
			reason: "OTEL_TRACES_EXPORTER=otlp turns tracing on with the default endpoint.",
			env:    map[string]string{EnvTracesExporter: "console, OTLP"},
			want:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := func(k string) string { return tc.env[k] }
			if got := tracesEnabled(env); got != tc.want {
				t.Errorf("%s\ntracesEnabled(...): got %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

func TestSetupOffByDefault(t *testing.T) {
	reg := prometheus.NewRegistry()
	otel.SetTracerProvider(noop.NewTracerProvider())
	shutdown, err := Setup(t.Context(), "test", "test-0", WithRegisterer(reg), WithLookupEnv(noEnv))
	if err != nil {
		t.Fatalf("Setup(...): %v", err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		t.Errorf("Setup without OTEL_* variables installed a recording TracerProvider")
	}
	// The propagator is installed anyway, so a trace passes through.
	if got := otel.GetTextMapPropagator().Fields(); !strings.Contains(strings.Join(got, ","), "traceparent") {
		t.Errorf("propagator fields %v lack traceparent", got)
	}
}

func TestSetupDisabled(t *testing.T) {
	reg := prometheus.NewRegistry()
	otel.SetTracerProvider(noop.NewTracerProvider())
	shutdown, err := Setup(t.Context(), "test", "test-0", WithRegisterer(reg),
		WithLookupEnv(envOf(map[string]string{EnvSDKDisabled: "true", EnvEndpoint: "http://127.0.0.1:1"})))
	if err != nil {
		t.Fatalf("Setup(...): %v", err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		t.Errorf("Setup with OTEL_SDK_DISABLED=true installed a recording TracerProvider")
	}
}

func TestSetupMetricNames(t *testing.T) {
	reg, _ := setup(t)
	m := otel.Meter("test")
	h, _ := m.Float64Histogram("composition_run_function_seconds", metric.WithUnit("s"))
	h.Record(t.Context(), 0.5)
	c, _ := m.Int64Counter("loom.test.events")
	c.Add(t.Context(), 2)
	d, _ := m.Float64Histogram("loom.test.duration", metric.WithUnit("s"))
	d.Record(t.Context(), 1)

	got := scrape(t, HandlerFor(reg))
	for _, want := range []string{
		"composition_run_function_seconds_count 1",
		"loom_test_events_total 2",
		"loom_test_duration_seconds_count 1",
		`target_info{service_instance_id="test-0",service_name="test",service_namespace="loom"`,
		"process_cpu_seconds_total",
		"go_goroutines",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, got)
		}
	}
}

func TestHandlerGathersControllerRuntime(t *testing.T) {
	shutdown, err := Setup(t.Context(), "test", "test-0", WithLookupEnv(noEnv))
	if err != nil {
		t.Fatalf("Setup(...): %v", err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	c, _ := otel.Meter("test").Int64Counter("loom.test.handler")
	c.Add(t.Context(), 1)
	cr := prometheus.NewCounter(prometheus.CounterOpts{Name: "loom_test_controller_runtime_total"})
	if err := crmetrics.Registry.Register(cr); err != nil {
		t.Fatalf("cannot register with controller-runtime's registry: %v", err)
	}
	defer crmetrics.Registry.Unregister(cr)
	cr.Inc()
	got := scrape(t, Handler())
	for _, want := range []string{
		"loom_test_handler_total 1",            // the OpenTelemetry MeterProvider
		"loom_test_controller_runtime_total 1", // controller-runtime's registry
		"process_resident_memory_bytes",        // the collectors Setup adds there
	} {
		if !strings.Contains(got, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestSpanName(t *testing.T) {
	cases := map[string]struct {
		reason string
		method string
		path   string
		header http.Header
		want   string
	}{
		"Get":              {reason: "A GET of a named object is a get.", method: "GET", path: "/apis/example.org/v1/namespaces/ns/xthings/a", want: "k8s get xthings"},
		"List":             {reason: "A GET of a collection is a list.", method: "GET", path: "/apis/example.org/v1/xthings", want: "k8s list xthings"},
		"Core":             {reason: "The core group has no group segment.", method: "GET", path: "/api/v1/namespaces/ns/secrets/s", want: "k8s get secrets"},
		"Namespace":        {reason: "A namespace is a cluster-scoped object of the core group.", method: "GET", path: "/api/v1/namespaces/ns", want: "k8s get namespaces"},
		"Create":           {reason: "A POST creates.", method: "POST", path: "/apis/example.org/v1/xthings", want: "k8s create xthings"},
		"Update":           {reason: "A PUT updates.", method: "PUT", path: "/apis/example.org/v1/namespaces/ns/claims/c", want: "k8s update claims"},
		"ApplyStatus":      {reason: "An apply patch of a subresource names both.", method: "PATCH", path: "/apis/nop.loom.dev/v1alpha1/nopresources/n/status", header: http.Header{"Content-Type": {"application/apply-patch+yaml"}}, want: "k8s apply nopresources/status"},
		"MergePatch":       {reason: "Other patches are patches.", method: "PATCH", path: "/apis/example.org/v1/xthings/a", header: http.Header{"Content-Type": {"application/merge-patch+json"}}, want: "k8s patch xthings"},
		"Delete":           {reason: "A DELETE of a named object deletes it.", method: "DELETE", path: "/apis/example.org/v1/xthings/a", want: "k8s delete xthings"},
		"DeleteCollection": {reason: "A DELETE of a collection deletes many.", method: "DELETE", path: "/apis/example.org/v1/xthings", want: "k8s deletecollection xthings"},
		"Discovery":        {reason: "Discovery paths are named by method and path.", method: "GET", path: "/apis/example.org/v1", want: "k8s GET /apis/example.org/v1"},
		"Version":          {reason: "Non-resource paths are named by method and path.", method: "GET", path: "/version", want: "k8s GET /version"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "https://k8s"+tc.path, nil)
			for k, v := range tc.header {
				r.Header[k] = v
			}
			if diff := cmp.Diff(tc.want, SpanName(r)); diff != "" {
				t.Errorf("%s\nSpanName(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWrapTransport(t *testing.T) {
	_, spans := setup(t)
	var gotParent []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotParent = append(gotParent, r.Header.Get("traceparent"))
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	c := &http.Client{Transport: WrapTransport(http.DefaultTransport)}
	get := func(ctx context.Context, path string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		rsp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, rsp.Body)
		_ = rsp.Body.Close()
	}

	ctx, parent := otel.Tracer("test").Start(t.Context(), "handle")
	get(ctx, "/apis/example.org/v1/namespaces/ns/xthings/a")
	get(ctx, "/apis/example.org/v1/xthings?watch=true")
	parent.End()
	get(t.Context(), "/apis/example.org/v1/xthings")
	flush(t)

	var names []string
	for _, s := range spans.GetSpans() {
		names = append(names, s.Name)
		if s.Name == "k8s get xthings" && s.Parent.SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %q has parent %s, want %s", s.Name, s.Parent.SpanID(), parent.SpanContext().SpanID())
		}
	}
	if diff := cmp.Diff([]string{"k8s get xthings", "handle"}, names); diff != "" {
		t.Errorf("spans: -want, +got:\n%s", diff)
	}
	if len(gotParent) != 3 || gotParent[0] == "" || gotParent[1] != "" || gotParent[2] != "" {
		t.Errorf("traceparent headers seen by the server: %q; want one on the first request only", gotParent)
	}
}

func TestRequestVerbResource(t *testing.T) {
	cases := map[string]struct {
		reason       string
		method, path string
		header       http.Header
		want         [2]string
	}{
		"Get":         {reason: "A GET of a named object is a get.", method: "GET", path: "/apis/example.org/v1/namespaces/ns/xthings/a", want: [2]string{"get", "xthings"}},
		"List":        {reason: "A GET of a collection is a list.", method: "GET", path: "/apis/example.org/v1/xthings", want: [2]string{"list", "xthings"}},
		"Watch":       {reason: "A GET with watch=true is a watch.", method: "GET", path: "/apis/example.org/v1/xthings?watch=true", want: [2]string{"watch", "xthings"}},
		"ApplyStatus": {reason: "An apply patch of a subresource names both.", method: "PATCH", path: "/apis/nop.loom.dev/v1alpha1/nopresources/n/status", header: http.Header{"Content-Type": {"application/apply-patch+yaml"}}, want: [2]string{"apply", "nopresources/status"}},
		"Create":      {reason: "A POST creates.", method: "POST", path: "/api/v1/namespaces/ns/secrets", want: [2]string{"create", "secrets"}},
		"Discovery":   {reason: "A path that names no resource is other, by method.", method: "GET", path: "/apis/example.org/v1", want: [2]string{"get", "other"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "https://k8s"+tc.path, nil)
			for k, v := range tc.header {
				r.Header[k] = v
			}
			verb, res := RequestVerbResource(r)
			if diff := cmp.Diff(tc.want, [2]string{verb, res}); diff != "" {
				t.Errorf("%s\nRequestVerbResource(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWrapTransportCountsRequests(t *testing.T) {
	reg, _ := setup(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/missing") {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, "{}")
	}))
	c := &http.Client{Transport: WrapTransport(http.DefaultTransport)}
	do := func(path string) {
		t.Helper()
		rsp, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, rsp.Body)
		_ = rsp.Body.Close()
	}
	do("/apis/example.org/v1/namespaces/ns/xthings/a")
	do("/apis/example.org/v1/namespaces/ns/xthings/a")
	do("/apis/example.org/v1/namespaces/ns/xthings/missing")
	do("/apis/example.org/v1/xthings?watch=true")
	srv.Close()
	if _, err := c.Get(srv.URL + "/api/v1/namespaces/ns/secrets/s"); err == nil {
		t.Fatal("GET on a closed server succeeded")
	}

	text := scrape(t, HandlerFor(reg))
	for _, want := range []string{
		`loom_k8s_requests_total{outcome="200",resource="xthings",verb="get"} 2`,
		`loom_k8s_requests_total{outcome="404",resource="xthings",verb="get"} 1`,
		`loom_k8s_requests_total{outcome="200",resource="xthings",verb="watch"} 1`,
		`loom_k8s_requests_total{outcome="error",resource="secrets",verb="get"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s; it has:\n%s", want, grepLines(text, "loom_k8s_requests_total"))
		}
	}
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestLogHandler(t *testing.T) {
	_, _ = setup(t)
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewTextHandler(&buf, nil))).With("service", "test")
	ctx, span := otel.Tracer("test").Start(t.Context(), "work")
	defer span.End()

	log.InfoContext(ctx, "inside")
	log.Info("outside")
	log.InfoContext(ctx, "explicit", LogTraceID, "given")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), buf.String())
	}
	sc := span.SpanContext()
	if want := "trace_id=" + sc.TraceID().String() + " span_id=" + sc.SpanID().String(); !strings.Contains(lines[0], want) {
		t.Errorf("line logged inside a span lacks %q: %s", want, lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("line logged without a context has a trace ID: %s", lines[1])
	}
	if strings.Count(lines[2], "trace_id") != 1 {
		t.Errorf("line with its own trace_id got another: %s", lines[2])
	}
	if _, ok := LogHandler(LogHandler(slog.DiscardHandler)).(traceHandler); !ok {
		t.Errorf("LogHandler(LogHandler(h)) is not a traceHandler")
	}
}

func TestTraceParent(t *testing.T) {
	_, _ = setup(t)
	if got := TraceParent(t.Context()); got != "" {
		t.Errorf("TraceParent without a span: got %q, want none", got)
	}
	ctx, span := otel.Tracer("test").Start(t.Context(), "create")
	defer span.End()
	a := Annotate(ctx, nil)
	tp := a[TraceAnnotation]
	if !strings.HasPrefix(tp, "00-"+span.SpanContext().TraceID().String()+"-"+span.SpanContext().SpanID().String()) {
		t.Errorf("Annotate(...)[%s] = %q; want the span's traceparent", TraceAnnotation, tp)
	}
	sc := ParseTraceParent(tp)
	if sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() {
		t.Errorf("ParseTraceParent(%q) = %v; want the span's context", tp, sc)
	}
	if ParseTraceParent("garbage").IsValid() {
		t.Errorf("ParseTraceParent(garbage) is valid")
	}
	if got := Annotate(t.Context(), map[string]string{"a": "b"}); len(got) != 1 {
		t.Errorf("Annotate without a span changed the annotations: %v", got)
	}
}

func TestLineage(t *testing.T) {
	_, exp := setup(t)
	now := time.Unix(1000, 0)
	l := NewLineage(time.Minute)
	l.now = func() time.Time { return now }
	start := func(name string, s Sighting) trace.SpanContext {
		_, span := l.Start(t.Context(), name, s)
		span.End()
		return span.SpanContext()
	}
	tr := otel.Tracer("test")
	_, creator := tr.Start(t.Context(), "binder creates the XR")
	creator.End()
	creatorTP := TraceParent(trace.ContextWithSpanContext(t.Context(), creator.SpanContext()))

	claim := start("claim added", Sighting{UID: "claim", New: true})
	claimAgain := start("claim modified", Sighting{UID: "claim"})
	xr := start("xr added", Sighting{UID: "xr", New: true, Owners: []string{"claim"}})
	stamped := start("stamped xr added", Sighting{UID: "xr2", New: true, TraceParent: creatorTP, Owners: []string{"claim"}})
	composed := start("composed added", Sighting{UID: "composed", New: true, Owners: []string{"xr"}})
	orphan := start("orphan added", Sighting{UID: "orphan", New: true, Owners: []string{"unknown"}})
	old := start("old modified", Sighting{UID: "old", TraceParent: creatorTP})
	gone := start("composed deleted", Sighting{UID: "composed", Deleted: true})
	if got := l.Len(); got != 4 {
		// claim, xr, xr2 and orphan; composed was deleted.
		t.Errorf("Len() = %d, want 4", got)
	}
	now = now.Add(2 * time.Minute)
	late := start("claim modified later", Sighting{UID: "claim"})
	if got := l.Len(); got != 0 {
		t.Errorf("Len() after the window = %d, want 0", got)
	}
	flush(t)

	parents := map[string]trace.SpanContext{}
	for _, s := range exp.GetSpans() {
		parents[s.Name] = s.Parent
	}
	cases := map[string]struct {
		reason string
		span   string
		got    trace.SpanContext
		parent trace.SpanContext
	}{
		"Root":     {reason: "A new object without lineage starts a trace.", span: "claim added", got: claim, parent: trace.SpanContext{}},
		"Same":     {reason: "A later change joins the object's lineage.", span: "claim modified", got: claimAgain, parent: claim},
		"Owner":    {reason: "A new XR joins its claim's lineage.", span: "xr added", got: xr, parent: claim},
		"Stamped":  {reason: "A new object's trace annotation wins over its owner.", span: "stamped xr added", got: stamped, parent: creator.SpanContext()},
		"Nested":   {reason: "A composed resource joins its XR's lineage.", span: "composed added", got: composed, parent: xr},
		"Orphan":   {reason: "An unknown owner has no lineage.", span: "orphan added", got: orphan, parent: trace.SpanContext{}},
		"OldStamp": {reason: "Only new objects follow their annotation.", span: "old modified", got: old, parent: trace.SpanContext{}},
		"Expired":  {reason: "Lineage ends after the window.", span: "claim modified later", got: late, parent: trace.SpanContext{}},
		"Deleted":  {reason: "Deletion is still part of the lineage.", span: "composed deleted", got: gone, parent: composed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := parents[tc.span]
			if got.SpanID() != tc.parent.SpanID() {
				t.Errorf("%s\nparent of %q: got span %s, want %s", tc.reason, tc.span, got.SpanID(), tc.parent.SpanID())
			}
			if tc.parent.IsValid() && tc.got.TraceID() != tc.parent.TraceID() {
				t.Errorf("%s\n%q is in trace %s, want %s", tc.reason, tc.span, tc.got.TraceID(), tc.parent.TraceID())
			}
		})
	}
}

func TestLineageWindowFromEnv(t *testing.T) {
	defer setLineageWindow(DefaultLineageWindow)
	shutdown, err := Setup(t.Context(), "test", "test-0", WithRegisterer(prometheus.NewRegistry()),
		WithLookupEnv(envOf(map[string]string{EnvLineageWindow: "-1s"})))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	if got := LineageWindow(); got != -time.Second {
		t.Errorf("LineageWindow() = %s, want -1s from %s", got, EnvLineageWindow)
	}
}

func TestLineageOff(t *testing.T) {
	_, _ = setup(t)
	l := NewLineage(-1)
	_, span := l.Start(t.Context(), "claim added", Sighting{UID: "claim", New: true})
	span.End()
	if l.Len() != 0 {
		t.Errorf("a negative window kept a lineage")
	}
}

func TestReadyAndWaiting(t *testing.T) {
	reg, _ := setup(t)
	ObserveClaimReady(t.Context(), "XClaim", time.Now().Add(-3*time.Second))
	ObserveCompositeReady(t.Context(), "XThing", time.Now().Add(-2*time.Second))
	ObserveCompositeReady(t.Context(), "XThing", time.Time{}) // unknown creation: ignored
	SetReferencesWaiting("a", 2)
	SetReferencesWaiting("b", 3)
	SetReferencesWaiting("b", 1)
	SetReferencesWaiting("c", 4)
	SetReferencesWaiting("c", 0)
	got := scrape(t, HandlerFor(reg))
	for _, want := range []string{
		`loom_claim_time_to_ready_seconds_bucket{kind="XClaim",le="2.5"} 0`,
		`loom_claim_time_to_ready_seconds_bucket{kind="XClaim",le="5"} 1`,
		`loom_composite_time_to_ready_seconds_count{kind="XThing"} 1`,
		"loom_binder_references_waiting 3",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, got)
		}
	}
	r := instruments()
	if got := r.waitingTotal(time.Now().Add(referencesTTL + time.Minute)); got != 0 {
		t.Errorf("waiting references after their TTL: got %d, want 0", got)
	}
}

// BenchmarkLineageStart measures the watcher's cost per published change:
// with tracing off (the default) and on.
func BenchmarkLineageStart(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "Off"
		if on {
			name = "On"
		}
		b.Run(name, func(b *testing.B) {
			if on {
				tp := sdktrace.NewTracerProvider()
				otel.SetTracerProvider(tp)
				defer func() { _ = tp.Shutdown(context.Background()) }()
			} else {
				otel.SetTracerProvider(noop.NewTracerProvider())
			}
			l := NewLineage(time.Minute)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				uid := strconv.Itoa(i % 1024)
				_, span := l.Start(context.Background(), "watch XThing", Sighting{UID: uid, New: i < 1024, Owners: []string{"claim"}})
				span.End()
			}
		})
	}
}
