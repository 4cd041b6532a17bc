package composite

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/pkg/reconcile"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// DefaultAdmissionLimit is how many composed resources that their providers
// have not yet observed one tenant may have at once, per renderer replica,
// before its XRs' first creations wait (WithAdmission). It is about what
// keeps a provider of 16 workers busy when news of its progress arrives
// within a few hundred milliseconds (see Seen): in the side-by-side
// benchmark, 16 cost a fifth of a bulk import's throughput, 32 less than
// the noise between runs, and 64 let a claim arriving mid-import wait
// half a second more behind it (BENCHMARKS.md).
const DefaultAdmissionLimit = 32

// Admission bounds, per tenant, the composed resources this replica created
// that their providers have not looked at yet (no status, not Ready). A
// provider serves its queue first come, first served: without a bound, a
// tenant that creates a thousand claims at once fills the queue of every
// provider it uses, and another tenant's new claim waits behind all of it
// however fairly Loom's own queues serve it. With one, a render that would
// create composed resources waits while its tenant is over the limit, in
// the order it came, holding no handler slot (reconcile.Result.Wait), and
// goes on as soon as the tenant's providers catch up; a tenant with nothing
// outstanding is always admitted. The count of a resource ends when news
// that its provider looked at it (its status changed) arrives at the
// replica (Seen, through Arrived), not when the XR's next render runs,
// which may wait behind the tenant's backlog: counted that late, the bound
// would starve the providers it is meant to share. Renders that create
// nothing are never held. What a provider never looks at (no provider runs
// for a kind) stops counting after the expiry, so that it cannot block its
// tenant for good.
//
// An Admission is safe for concurrent use. Its counts are this replica's:
// an XR's events all reach the replica that owns its partition, and with R
// replicas a tenant may have up to R times the limit outstanding.
type Admission struct {
	limit  int
	expiry time.Duration
	now    func() time.Time

	mu      sync.Mutex
	tenants map[string]*tenantFlow
	byUID   map[types.UID]string // the tenant of every XR counted or waiting
	// idle is when each tenant that had a flow lately last emptied it:
	// its gauges stay reported, at zero, for admissionSeriesTTL. Entries
	// older than that are dropped at each collection, and when idle
	// reaches idleCap (so that it stays bounded when nothing collects).
	idle    map[string]time.Time
	idleCap int
}

// Names of the Admission's gauges (see Instrument), as OpenTelemetry names;
// Prometheus sees loom_renderer_admission_outstanding and
// loom_renderer_admission_waiting.
const (
	MetricAdmissionOutstanding = "loom.renderer.admission.outstanding"
	MetricAdmissionWaiting     = "loom.renderer.admission.waiting"
)

// admissionSeriesTTL is how long a tenant's gauges stay reported, at zero,
// after its last outstanding resource and waiting XR are gone: a paced
// import's series end at zero on a dashboard rather than vanish mid-line,
// and tenants long idle cost no series.
const admissionSeriesTTL = 10 * time.Minute

// tenantFlow is one tenant's outstanding composed resources and the XRs
// waiting to create theirs.
type tenantFlow struct {
	total   int
	xrs     map[types.UID]*outstanding
	waiters []*admissionWaiter // first come, first served
}

// outstanding is the composed resources of one XR that are not observed
// yet, by name, since when the XR was admitted.
type outstanding struct {
	names map[string]bool
	since time.Time
}

// admissionWaiter is an XR whose render waits to create its resources.
type admissionWaiter struct {
	uid   types.UID
	names []string
	wake  chan struct{}
}

// NewAdmission returns an Admission of limit outstanding composed resources
// per tenant, whose counts expire after expiry; nil if limit is not
// positive (no bound).
func NewAdmission(limit int, expiry time.Duration) *Admission {
	if limit <= 0 {
		return nil
	}
	return &Admission{limit: limit, expiry: expiry, now: time.Now,
		tenants: map[string]*tenantFlow{}, byUID: map[types.UID]string{}, idle: map[string]time.Time{}, idleCap: minIdleCap}
}

// Instrument reports the Admission's counts at each collection of m's
// provider, by tenant (attribute tenant): loom.renderer.admission.outstanding,
// the composed resources this replica created that their providers have not
// looked at yet, and loom.renderer.admission.waiting, the XRs whose renders
// wait to create theirs. An operator reads them as "whose claims are paced,
// and behind how much": a tenant whose XRs wait is over the limit, and its
// new claims go on as its providers catch up.
func (a *Admission) Instrument(m metric.Meter) error {
	out, err := m.Int64ObservableGauge(MetricAdmissionOutstanding,
		metric.WithDescription("Composed resources this renderer replica created that their providers have not looked at yet (no status, not Ready), by tenant (--fair-key); at most the admission limit once the tenant's XRs wait."))
	if err != nil {
		return err
	}
	wait, err := m.Int64ObservableGauge(MetricAdmissionWaiting,
		metric.WithDescription("Composite resources whose render waits, holding no worker slot, to create composed resources until their tenant's providers catch up (--admission-limit), by tenant (--fair-key)."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, c := range a.counts() {
			attrs := metric.WithAttributes(attribute.String("tenant", c.tenant))
			o.ObserveInt64(out, int64(c.resources), attrs)
			o.ObserveInt64(wait, int64(c.waiting), attrs)
		}
		return nil
	}, out, wait)
	return err
}

// tenantCount is one tenant's counts, as the gauges report them.
type tenantCount struct {
	tenant             string
	resources, waiting int
}

// counts returns the counts of every tenant with a flow, and zeros for the
// tenants whose flow emptied within admissionSeriesTTL; it forgets the
// tenants idle for longer.
func (a *Admission) counts() []tenantCount {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]tenantCount, 0, len(a.tenants)+len(a.idle))
	for t, f := range a.tenants {
		out = append(out, tenantCount{tenant: t, resources: f.total, waiting: len(f.waiters)})
	}
	a.pruneIdle()
	for t := range a.idle {
		out = append(out, tenantCount{tenant: t})
	}
	return out
}

// minIdleCap is the fewest idle tenants kept before a prune.
const minIdleCap = 64

// pruneIdle drops the tenants idle for longer than admissionSeriesTTL, and
// sets the size at which the next prune comes to twice what is left, so
// that pruning costs O(1) per tenant gone idle. The caller holds a.mu.
func (a *Admission) pruneIdle() {
	old := a.now().Add(-admissionSeriesTTL)
	for t, at := range a.idle {
		if at.Before(old) {
			delete(a.idle, t)
		}
	}
	a.idleCap = max(minIdleCap, 2*len(a.idle))
}

// Admit asks whether the render of XR uid of tenant, after which its
// composed resources named unobserved would be unobserved, may create
// resources now. It returns nil if so (the XR counts those from now on),
// else a channel that is closed once it may, and how long to wait at most
// before asking again.
func (a *Admission) Admit(tenant string, uid types.UID, unobserved []string) (<-chan struct{}, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.flow(tenant)
	a.expire(f)
	if o := f.xrs[uid]; o != nil {
		// Admitted before (or woken with room reserved): keep its place.
		a.set(f, uid, o, unobserved)
		a.pump(tenant, f)
		return nil, 0
	}
	var w *admissionWaiter
	for _, x := range f.waiters {
		if x.uid == uid {
			w = x
			break
		}
	}
	if w == nil {
		w = &admissionWaiter{uid: uid, wake: make(chan struct{})}
		f.waiters = append(f.waiters, w)
		a.byUID[uid] = tenant
	}
	w.names = unobserved
	a.pump(tenant, f)
	if o := f.xrs[uid]; o != nil {
		// Admitted with its count reserved; a count of zero is
		// dropped, and a flow left empty with it.
		if len(unobserved) == 0 {
			a.set(f, uid, o, unobserved)
			a.pump(tenant, f)
		}
		return nil, 0
	}
	return w.wake, a.expiry
}

// set makes o, the unobserved resources of XR uid of flow f, names; an XR
// with none is dropped. The caller holds a.mu and pumps f's waiters after.
func (a *Admission) set(f *tenantFlow, uid types.UID, o *outstanding, names []string) {
	f.total -= len(o.names)
	o.names = nameSet(names)
	f.total += len(o.names)
	a.dropEmpty(f, uid, o)
}

// nameSet returns names as a set.
func nameSet(names []string) map[string]bool {
	s := make(map[string]bool, len(names))
	for _, n := range names {
		s[n] = true
	}
	return s
}

// Observe records that the composed resources of XR uid named unobserved
// are unobserved after a render that created none; an XR that was not
// admitted (its resources predate this replica's count) is not counted.
func (a *Admission) Observe(uid types.UID, unobserved []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tenant, f, o := a.counted(uid)
	if o == nil {
		return
	}
	a.set(f, uid, o, unobserved)
	a.expire(f)
	a.pump(tenant, f)
}

// Seen records that a provider has looked at the composed resource name of
// XR uid (its status changed), as soon as the news arrives: the next
// render of the XR, which Observe counts after, may wait behind other
// requests for a handler slot, and meanwhile the resource would hold its
// tenant's room although its provider's queue no longer holds it. A name
// that is not counted is ignored.
func (a *Admission) Seen(uid types.UID, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tenant, f, o := a.counted(uid)
	if o == nil || !o.names[name] {
		return
	}
	delete(o.names, name)
	f.total--
	a.dropEmpty(f, uid, o)
	a.pump(tenant, f)
}

// counted returns the tenant, flow and count of XR uid; o is nil when uid
// is not counted (unknown, or waiting). The caller holds a.mu.
func (a *Admission) counted(uid types.UID) (tenant string, f *tenantFlow, o *outstanding) {
	tenant, ok := a.byUID[uid]
	if !ok {
		return "", nil, nil
	}
	f = a.tenants[tenant]
	return tenant, f, f.xrs[uid]
}

// dropEmpty drops the count o of XR uid of flow f if it counts nothing.
// The caller holds a.mu.
func (a *Admission) dropEmpty(f *tenantFlow, uid types.UID, o *outstanding) {
	if len(o.names) == 0 {
		delete(f.xrs, uid)
		delete(a.byUID, uid)
	}
}

// Arrived is a bus.WithArrivals hook: a request that brings news of a
// provider looking at a composed resource (eventsv1.StatusNews) is passed
// to Seen as it arrives, whatever waits for a handler slot. A nil
// Admission ignores it.
func (a *Admission) Arrived(r reconcile.Request) {
	if a == nil || !eventsv1.StatusNews(r.Event) {
		return
	}
	a.Seen(types.UID(r.Event.GetTarget().GetUid()), r.Event.GetObject().GetName())
}

// Forget drops XR uid, which is gone: its count, or its place in the line.
func (a *Admission) Forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tenant, ok := a.byUID[uid]
	if !ok {
		return
	}
	delete(a.byUID, uid)
	f := a.tenants[tenant]
	if o := f.xrs[uid]; o != nil {
		f.total -= len(o.names)
		delete(f.xrs, uid)
	}
	for i, w := range f.waiters {
		if w.uid == uid {
			close(w.wake)
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			break
		}
	}
	a.pump(tenant, f)
}

// Outstanding returns tenant's count of unobserved composed resources and
// how many of its XRs wait.
func (a *Admission) Outstanding(tenant string) (resources, waiting int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.tenants[tenant]
	if f == nil {
		return 0, 0
	}
	return f.total, len(f.waiters)
}

// flow returns tenant's flow, creating it. The caller holds a.mu.
func (a *Admission) flow(tenant string) *tenantFlow {
	f := a.tenants[tenant]
	if f == nil {
		f = &tenantFlow{xrs: map[types.UID]*outstanding{}}
		a.tenants[tenant] = f
		delete(a.idle, tenant)
	}
	return f
}

// expire stops counting the XRs of f admitted longer ago than the expiry.
// The caller holds a.mu.
func (a *Admission) expire(f *tenantFlow) {
	if a.expiry <= 0 {
		return
	}
	old := a.now().Add(-a.expiry)
	for uid, o := range f.xrs {
		if o.since.Before(old) {
			f.total -= len(o.names)
			delete(f.xrs, uid)
			delete(a.byUID, uid)
		}
	}
}

// pump admits f's waiters, first come first served, while they fit: the
// tenant has nothing outstanding, or room for the waiter's count. An
// admitted waiter's count is reserved until its render asks again. It
// drops the flow of a tenant with nothing left. The caller holds a.mu.
func (a *Admission) pump(tenant string, f *tenantFlow) {
	for len(f.waiters) > 0 {
		w := f.waiters[0]
		if f.total > 0 && f.total+len(w.names) > a.limit {
			break
		}
		f.waiters = f.waiters[1:]
		o := &outstanding{names: nameSet(w.names), since: a.now()}
		f.xrs[w.uid] = o
		f.total += len(o.names)
		close(w.wake)
	}
	if f.total == 0 && len(f.waiters) == 0 {
		delete(a.tenants, tenant)
		a.idle[tenant] = a.now()
		if len(a.idle) >= a.idleCap {
			a.pruneIdle()
		}
	}
}

// admit asks the Admission, if any, whether the render out of st may create
// the composed resources it would create; see Admission.Admit. A render
// that creates none records its unobserved count and goes on.
func (r *Reconciler) admit(ctx context.Context, st *state, out *rendered) (<-chan struct{}, time.Duration) {
	if r.admission == nil {
		return nil, 0
	}
	creates := 0
	var unobserved []string
	for _, c := range out.resources {
		switch {
		case c.observed == nil && c.desired != nil:
			creates++
			if !c.ready {
				unobserved = append(unobserved, c.desired.GetName())
			}
		case c.observed != nil && !c.ready && !hasStatus(c.observed):
			unobserved = append(unobserved, c.observed.GetName())
		}
	}
	uid := st.xr.GetUID()
	if creates == 0 {
		r.admission.Observe(uid, unobserved)
		return nil, 0
	}
	tenant := ""
	if req, ok := reconcile.RequestFrom(ctx); ok && r.tenant != nil {
		tenant = r.tenant(req)
	}
	return r.admission.Admit(tenant, uid, unobserved)
}
