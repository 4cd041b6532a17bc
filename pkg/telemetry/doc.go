// Package telemetry is how Loom's services report what they do: OpenTelemetry
// traces exported by OTLP, OpenTelemetry metrics served to Prometheus on
// /metrics (next to controller-runtime's and client-go's own metrics), and
// logs that carry the trace and span IDs of the work they describe.
//
// pkg/service calls Setup once per process, so a service gets all of it
// without code of its own: every Kubernetes API request of its REST
// configuration is a child span of the work that caused it (WrapTransport),
// its slog records carry trace_id and span_id (LogHandler), and /metrics
// serves every instrument made from the global MeterProvider.
//
// # Configuration
//
// Tracing is off unless the standard environment asks for it: it is on when
// OTEL_TRACES_EXPORTER is "otlp", or when OTEL_TRACES_EXPORTER is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
// OTEL_SDK_DISABLED=true turns it off whatever else is set. The exporter
// speaks OTLP over gRPC and reads the other OTEL_EXPORTER_OTLP_* variables
// (headers, TLS, timeout, insecure); the sampler follows OTEL_TRACES_SAMPLER,
// batching OTEL_BSP_*, and resource attributes OTEL_RESOURCE_ATTRIBUTES and
// OTEL_SERVICE_NAME. Propagation is W3C trace context and baggage, installed
// globally whether or not tracing is on, so a process that does not record
// spans still passes on the trace it was handed.
//
// Metrics are always collected and served on /metrics. When
// OTEL_METRICS_EXPORTER lists "otlp" they are also pushed by OTLP/gRPC every
// OTEL_METRIC_EXPORT_INTERVAL milliseconds. OpenTelemetry instrument names
// become Prometheus names the usual way: dots become underscores, the unit
// is appended ("_seconds"), and counters end in "_total".
//
// # One trace per claim
//
// The bus carries trace context from a publisher to the handler of each event
// (pkg/bus), and API writes cannot carry it through the API server to the
// watch events they cause. Lineage closes that gap in the watcher: it
// remembers, for a while after an object is first seen, the span of the
// watcher's first event about it, and makes the spans of later events about
// the object, and of the objects it owns, children of that span. An XR is
// owned by its claim (spec.claimRef) and a composed resource by its
// controller XR, so the creation of a claim, its XR, its composed resources,
// and every change until they are ready, form one trace rooted at the
// watcher's span for the claim's ADDED event. "A while" is LOOM_TRACE_WINDOW
// (a Go duration, default ten minutes; negative turns lineage off). Work
// another object causes (an XR rendered again because its Composition got a
// new revision) belongs to that object's trace instead.
//
// Lineage also takes a W3C traceparent found on a new object
// (TraceAnnotation, stamped by Annotate when a service creates it), which
// then wins over its owners, for exact causality (the XR's first watch span
// a child of the binder span that created it). Nothing stamps objects
// today, and the watcher does not pass the annotation on (its informers
// keep no annotations, to save memory): ownership alone connects the trace,
// with no extra API writes.
//
// # Metrics of the services
//
// The bus records loom.bus.* instruments (events published and handled,
// handling duration, redeliveries, dead letters, consumer pending and
// ack-pending per partition). pkg/fn records Crossplane's
// composition_run_function_* instruments. This package adds the ones services
// report through helpers: time to Ready of claims and XRs (ObserveReady) and
// references waiting (SetReferencesWaiting). client-go requests are counted
// by controller-runtime's rest_client_requests_total, and process_* and go_*
// come from Prometheus' standard collectors.
package telemetry
