package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TraceAnnotation may hold a W3C traceparent on an object a Loom service
// created, naming the span that created it (see Annotate). The watcher makes
// the object's first watch event a child of that span.
const TraceAnnotation = "loom.dev/traceparent"

// Annotate sets TraceAnnotation on annotations (allocating the map if nil)
// to the span context of ctx, and returns the map. Without a valid span in
// ctx it returns annotations unchanged. Call it only when creating an
// object: stamping each update would make every reconcile a write.
func Annotate(ctx context.Context, annotations map[string]string) map[string]string {
	tp := TraceParent(ctx)
	if tp == "" {
		return annotations
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[TraceAnnotation] = tp
	return annotations
}

// TraceParent returns the W3C traceparent of the span in ctx, or "".
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// ParseTraceParent returns the span context of a W3C traceparent; it is
// invalid when tp is not one.
func ParseTraceParent(tp string) trace.SpanContext {
	if tp == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}

// A Lineage remembers, for Window after the watcher first sees an object,
// the span of the first event it published about the object, so that later
// events about the object and about the objects it owns join that trace
// (see the package documentation). It is safe for concurrent use. Memory is
// bounded by the objects first seen within one window.
type Lineage struct {
	tracer trace.Tracer
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	spans   map[string]lineageEntry
	swept   time.Time
	sweepIn time.Duration
}

type lineageEntry struct {
	sc      trace.SpanContext
	expires time.Time
}

// NewLineage returns a Lineage keeping traces for window; 0 means
// LineageWindow(), a negative window keeps none (every event starts its own
// trace). Spans are started with the global TracerProvider (which hands
// the spans to a provider installed later, too).
func NewLineage(window time.Duration) *Lineage {
	if window == 0 {
		window = LineageWindow()
	}
	return &Lineage{tracer: otel.Tracer(instrumentationPrefix + "pkg/telemetry"), window: window, now: time.Now,
		spans: map[string]lineageEntry{}, sweepIn: max(window/4, time.Second)}
}

// A Sighting is what the watcher knows about one observed change, for
// Lineage.Start.
type Sighting struct {
	// UID of the changed object.
	UID string
	// New is set when the change is the object's creation as the watcher
	// sees it (an ADDED event while it is live). Only new objects start a
	// lineage.
	New bool
	// Deleted is set for a deletion; the object's lineage ends with it.
	Deleted bool
	// TraceParent is the object's TraceAnnotation, if the watcher keeps it.
	TraceParent string
	// Owners are the UIDs of objects whose trace the object joins when it
	// has none of its own: its claim (for an XR) and its controller (for a
	// composed resource), nearest first.
	Owners []string
}

// Start starts the span of one observed change, named name, with opts, and
// returns a context carrying it: a child of the object's lineage if it has
// one, else of its TraceParent (new objects only), else of its nearest
// owner's lineage, else a new trace. A new object's span then becomes its
// lineage for the window. The caller must end the span.
func (l *Lineage) Start(ctx context.Context, name string, s Sighting, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	now := l.now()
	parent := trace.SpanContext{}
	l.mu.Lock()
	l.sweep(now)
	if e, ok := l.spans[s.UID]; ok && now.Before(e.expires) {
		parent = e.sc
	}
	l.mu.Unlock()
	if !parent.IsValid() && s.New {
		parent = ParseTraceParent(s.TraceParent)
	}
	if !parent.IsValid() {
		l.mu.Lock()
		for _, o := range s.Owners {
			if e, ok := l.spans[o]; ok && now.Before(e.expires) {
				parent = e.sc
				break
			}
		}
		l.mu.Unlock()
	}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := l.tracer.Start(ctx, name, opts...)

	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case s.Deleted:
		delete(l.spans, s.UID)
	case s.New && l.window > 0 && span.SpanContext().IsValid():
		if _, ok := l.spans[s.UID]; !ok {
			l.spans[s.UID] = lineageEntry{sc: span.SpanContext(), expires: now.Add(l.window)}
		}
	}
	return ctx, span
}

// Len returns how many objects have a lineage, expired ones included until
// they are swept.
func (l *Lineage) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.spans)
}

// sweep drops expired entries, at most every sweepIn. Called with l.mu held.
func (l *Lineage) sweep(now time.Time) {
	if now.Sub(l.swept) < l.sweepIn {
		return
	}
	l.swept = now
	for k, e := range l.spans {
		if !now.Before(e.expires) {
			delete(l.spans, k)
		}
	}
}
