// Package watch is the watcher's engine: it runs one informer per watched
// kind, keeps the set of watched kinds in step with what the cluster defines
// (XRDs define XR and claim kinds, XRs and Compositions name composed kinds,
// the renderer's watch requests name more), and publishes an event for every
// change to each service that must react, naming the target it reconciles
// (see package route for the table).
//
// Memory stays bounded: kinds whose spec the watcher reads (XRDs, CRDs,
// Compositions, XRs, claims) are cached through transforms that keep only the
// few fields it needs; every other kind is watched metadata-only, and composed
// kinds only with the crossplane.io/composite label.
//
// Watch requests: the renderer asks for objects to be watched on behalf of an
// XR by writing a JSON list of requests under the XR's UID in the JetStream
// key-value bucket loom-watches (format and helpers: package
// github.com/loomxr/loom/pkg/watchreq). The watcher follows the bucket, runs
// a metadata-only watch of each requested kind, and publishes a change of a
// matching object to the renderer with each requesting XR as the target.
//
// Lifecycle: Run lists everything, waits until the initial lists are synced,
// publishes one RESYNC event per service and target, and only then reports
// ready. It repeats that resync every resync period (jittered), and sooner
// when a publish may have been lost. Several watchers can run at once: the bus
// drops duplicate events.
package watch

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"

	"github.com/loomxr/loom/pkg/telemetry"
	"github.com/loomxr/loom/pkg/watchreq"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/kindset"
)

// Publisher publishes events to the bus; *bus.Publisher satisfies it.
type Publisher interface {
	// Publish sends ev to service asynchronously.
	Publish(ctx context.Context, service string, ev *eventsv1.Event) error
	// Flush waits for every event sent so far and returns the first failure.
	Flush(ctx context.Context) error
}

// Defaults of the options.
const (
	DefaultResyncPeriod = 10 * time.Minute
	// DefaultSyncTimeout bounds how long Run waits for an informer's initial
	// list before it publishes the initial resync anyway (an informer the
	// watcher has no RBAC for never syncs; its objects are published when it
	// does).
	DefaultSyncTimeout = time.Minute
	// resyncJitter is the fraction by which each resync period varies.
	resyncJitter = 0.2
	// pendingRetry is how often kinds that are not served yet are retried
	// through discovery (kinds defined by CRDs are retried on every CRD change).
	pendingRetry = 15 * time.Second
	// maxPendingBackoff bounds the time between discovery refreshes.
	maxPendingBackoff = 5 * time.Minute
	// flushEvery is how often the watcher checks that what it published was
	// stored.
	flushEvery = 5 * time.Second
	// retryResync is how soon a resync follows a failed publish.
	retryResync = 10 * time.Second
)

// Option configures a Watcher.
type Option func(*Watcher)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(w *Watcher) { w.log = l } }

// WithResyncPeriod sets the mean time between full resyncs; each period varies
// by ±20%. Zero or less disables periodic resyncs (the initial one still runs).
func WithResyncPeriod(d time.Duration) Option { return func(w *Watcher) { w.resyncPeriod = d } }

// WithSyncTimeout sets how long Run waits for initial lists before it
// publishes the initial resync.
func WithSyncTimeout(d time.Duration) Option { return func(w *Watcher) { w.syncTimeout = d } }

// WithWatchRequests makes the watcher follow the renderer's watch requests in
// kv (the watchreq.Bucket bucket). Without it the watcher serves no requests.
func WithWatchRequests(kv jetstream.KeyValue) Option { return func(w *Watcher) { w.requestsKV = kv } }

// WithMirror makes the watcher write every object it watches, Secrets
// excepted, to m before it publishes an event that names it (see package
// github.com/loomxr/loom/pkg/mirror). Without it the watcher keeps no mirror.
func WithMirror(m Mirror) Option { return func(w *Watcher) { w.mirror = m } }

// WithCrashFile arms a fault for chaos tests: whenever the file at path
// exists as the watcher has written a live change to the mirror and not yet
// published its events, the watcher removes the file and exits the process
// at once, as a crash at that moment would. The events are then never
// published by this process; the next watcher's start-up resync must make
// up for them. Empty (the default) arms nothing.
func WithCrashFile(path string) Option { return func(w *Watcher) { w.crashFile = path } }

// WithMeterProvider sets where the watcher's metrics go; the default is the
// global MeterProvider.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(w *Watcher) { w.meters = mp } }

// WithComposedWait sets how long, at most, a change of an XR's spec waits
// for the composed resources it names before it reaches the services that
// read them (default DefaultComposedWait; zero or negative: not at all).
func WithComposedWait(d time.Duration) Option { return func(w *Watcher) { w.composedWait = d } }

// WithRESTMapper sets the mapper used to find the resource of kinds that no
// CRD defines (built-in kinds and aggregated APIs). The default maps through
// cached discovery.
func WithRESTMapper(m meta.ResettableRESTMapper) Option { return func(w *Watcher) { w.mapper = m } }

// A Watcher watches the API server and publishes change events.
type Watcher struct {
	crashFile    string // see WithCrashFile
	dynamic      dynamic.Interface
	metadata     metadata.Interface
	mapper       meta.ResettableRESTMapper
	pub          Publisher
	log          *slog.Logger
	resyncPeriod time.Duration
	syncTimeout  time.Duration
	requestsKV   jetstream.KeyValue
	mirror       Mirror
	meters       metric.MeterProvider
	// withheld counts changes whose events were not published because the
	// mirror write failed.
	withheld metric.Int64Counter
	// urgency bounds each target's urgent deliveries
	// (DefaultUrgentPerTarget), and demoted counts those it sent to the
	// normal lane.
	urgency *urgency
	demoted metric.Int64Counter
	// composedHeld counts the XR changes held for their composed
	// resources, by how the wait ended (awaitComposed).
	composedHeld      metric.Int64Counter
	composedHeldAttrs *telemetry.Attrs

	// pendingRefs are the composed resources whose references have not
	// resolved, by XR (see pendingReferences).
	pendingRefs pendingReferences
	// firstStatus are the composed resources with no status yet of the
	// XRs with no Ready condition yet (see firstStatuses).
	firstStatus firstStatuses

	// ctx is Run's context; informers and publishes use it.
	ctx context.Context
	// lineage joins the events of a new object, and of the objects it
	// owns, to the trace of its first event (pkg/telemetry).
	lineage *telemetry.Lineage

	mu sync.RWMutex
	// sources are the running informers, by kind.
	sources map[schema.GroupVersionKind]*source
	// pending are the kinds that should be watched but are not served yet.
	pending map[schema.GroupVersionKind]bool
	// pendingReset and pendingBackoff pace discovery refreshes for pending kinds.
	pendingReset   time.Time
	pendingBackoff time.Duration
	// crds are the CRDs, established or not, by the kind they define.
	crds map[schema.GroupKind]crdInfo
	// defs are the XR and claim kinds of each XRD, by XRD UID.
	defs map[types.UID]definition
	// composed are the composed kinds, by source ("xr/<uid>", "composition/<uid>").
	composed *kindset.Set
	// requested are the kinds of watch requests, by requesting XR UID.
	requested *kindset.Set
	// requests are the watch requests by kind, then requesting XR UID.
	requests map[schema.GroupVersionKind]map[types.UID][]watchreq.Request
	// started counts source starts, so that Run knows when the set settled.
	started int

	// awaitMu guards awaiting and awaitingOf: XR changes waiting for their
	// claim to be cached, by claim, and the claim each XR waits for.
	awaitMu    sync.Mutex
	awaiting   map[claimKey]map[types.UID]awaiting
	awaitingOf map[types.UID]claimKey

	// composedWaits are the XR changes that wait for composed resources,
	// at most composedWait (awaitComposed).
	composedWaits composedWaits
	composedWait  time.Duration

	// live is set once events of informers are published directly; before
	// that the initial resync covers them.
	live atomic.Bool
	// ready is set once the initial resync was published and stored.
	ready atomic.Bool
	// resyncSoon asks the run loop for an early resync.
	resyncSoon chan struct{}
}

// New returns a Watcher that lists and watches through the given clients and
// publishes to pub. disc may be nil when WithRESTMapper is given.
func New(dyn dynamic.Interface, md metadata.Interface, disc discovery.DiscoveryInterface, pub Publisher, opts ...Option) *Watcher {
	w := &Watcher{
		lineage:       telemetry.NewLineage(0),
		dynamic:       dyn,
		metadata:      md,
		pub:           pub,
		log:           slog.Default(),
		resyncPeriod:  DefaultResyncPeriod,
		syncTimeout:   DefaultSyncTimeout,
		sources:       map[schema.GroupVersionKind]*source{},
		pending:       map[schema.GroupVersionKind]bool{},
		crds:          map[schema.GroupKind]crdInfo{},
		defs:          map[types.UID]definition{},
		composed:      kindset.New(),
		requested:     kindset.New(),
		requests:      map[schema.GroupVersionKind]map[types.UID][]watchreq.Request{},
		resyncSoon:    make(chan struct{}, 1),
		awaiting:      map[claimKey]map[types.UID]awaiting{},
		awaitingOf:    map[types.UID]claimKey{},
		urgency:       newUrgency(DefaultUrgentPerTarget, time.Now),
		composedWaits: composedWaits{held: map[types.UID]*heldXR{}},
		composedWait:  DefaultComposedWait,
	}
	for _, o := range opts {
		o(w)
	}
	if w.meters == nil {
		w.meters = otel.GetMeterProvider()
	}
	// Instrument creation fails only for invalid names, a constant here; a
	// failed instrument is a no-op one.
	w.withheld, _ = w.meters.Meter("github.com/loomxr/loom/services/watcher").Int64Counter("loom.watcher.mirror.withheld",
		metric.WithDescription("Changes whose events the watcher did not publish because it could not write the object to the mirror, by kind; a resync writes and publishes them."))
	w.composedHeldAttrs = telemetry.NewAttrs(nil, "outcome")
	w.composedHeld, _ = w.meters.Meter("github.com/loomxr/loom/services/watcher").Int64Counter("loom.watcher.composed.held",
		metric.WithDescription("Changes of an XR's spec that waited for the composed resources they name to be mirrored before they reached the secrets service and the binder, by how the wait ended: mirrored, or timeout (--composed-wait passed: a resource was not created, or its mirror write failed)."))
	w.demoted, _ = w.meters.Meter("github.com/loomxr/loom/services/watcher").Int64Counter("loom.watcher.urgent.demoted",
		metric.WithDescription("Urgent deliveries the watcher sent to the normal lane because their target had its share of urgent deliveries in the last minute, by service."))
	if w.mapper == nil && disc != nil {
		w.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	}
	return w
}

// Ready returns nil once the initial lists are synced and the initial resync
// was published. Its signature fits service.Runtime.AddReadinessCheck.
func (w *Watcher) Ready(context.Context) error {
	if !w.ready.Load() {
		return errors.New("initial lists are not yet synced and published")
	}
	return nil
}

// Run watches until ctx ends, then stops every informer and returns nil. It
// returns an error only if it cannot start.
func (w *Watcher) Run(ctx context.Context) error {
	if w.mapper == nil {
		return errors.New("cannot run watcher: no discovery client or REST mapper")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.ctx = ctx
	defer w.stopAll()
	defer w.stopComposedWaits()

	if w.requestsKV != nil {
		initial := make(chan struct{})
		go w.followRequests(ctx, initial)
		select {
		case <-initial:
		case <-ctx.Done():
			return nil
		}
	}

	// CRDs first: they tell which kinds are served.
	w.mu.Lock()
	w.ensureCRDSource()
	w.mu.Unlock()
	if !w.waitSynced(ctx, w.syncTimeout) {
		w.log.Warn("CustomResourceDefinitions are not synced yet; continuing")
	}
	w.mu.Lock()
	w.reconcile()
	w.mu.Unlock()
	if !w.waitSynced(ctx, w.syncTimeout) && ctx.Err() == nil {
		w.log.Warn("some informers did not sync in time; their objects are published once they do", "unsynced", w.unsynced())
	}
	if ctx.Err() != nil {
		return nil
	}

	w.live.Store(true)
	if err := w.resync(ctx); err != nil {
		w.log.Warn("initial resync incomplete; retrying soon", "err", err)
		w.requestResync()
	}
	w.ready.Store(true)
	w.log.Info("initial resync published", "kinds", w.kindCount())

	resync := time.NewTimer(w.nextResync())
	defer resync.Stop()
	if w.resyncPeriod <= 0 {
		resync.Stop()
	}
	pending := time.NewTicker(pendingRetry)
	defer pending.Stop()
	flush := time.NewTicker(flushEvery)
	defer flush.Stop()
	var soon <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-resync.C:
			if err := w.resync(ctx); err != nil {
				w.log.Warn("resync incomplete; retrying soon", "err", err)
				w.requestResync()
			}
			if w.resyncPeriod > 0 {
				resync.Reset(w.nextResync())
			}
		case <-w.resyncSoon:
			if soon == nil {
				soon = time.After(retryResync)
			}
		case <-soon:
			soon = nil
			if err := w.resync(ctx); err != nil {
				w.log.Warn("resync incomplete; retrying soon", "err", err)
				w.requestResync()
			}
		case <-pending.C:
			w.retryPending()
		case <-flush.C:
			fctx, fcancel := context.WithTimeout(ctx, flushEvery)
			err := w.pub.Flush(fctx)
			fcancel()
			if err != nil && ctx.Err() == nil {
				w.log.Warn("events may have been lost; resyncing soon", "err", err)
				w.requestResync()
			}
		}
	}
}

// requestResync asks for a resync soon, without blocking.
func (w *Watcher) requestResync() {
	select {
	case w.resyncSoon <- struct{}{}:
	default:
	}
}

// nextResync returns the resync period with ±20% jitter.
func (w *Watcher) nextResync() time.Duration {
	if w.resyncPeriod <= 0 {
		return time.Hour
	}
	f := 1 + resyncJitter*(2*rand.Float64()-1) //nolint:gosec // jitter needs no cryptographic randomness
	return time.Duration(float64(w.resyncPeriod) * f)
}

func (w *Watcher) kindCount() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.sources)
}
