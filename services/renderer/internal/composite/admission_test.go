package composite

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/pkg/reconcile"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// rs returns n names of composed resources: r0, r1, ...
func rs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "r" + strconv.Itoa(i)
	}
	return out
}

// closed reports whether a wake channel is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestAdmission(t *testing.T) {
	now := time.Unix(1000, 0)
	a := NewAdmission(6, 30*time.Second)
	a.now = func() time.Time { return now }

	// A tenant with nothing outstanding is admitted whatever it asks.
	if w, _ := a.Admit("bulk", "x1", rs(9)); w != nil {
		t.Fatal("x1 of a tenant with nothing outstanding waits; want it admitted")
	}
	// Over the limit, the next XRs wait in the order they came.
	w2, retry := a.Admit("bulk", "x2", rs(3))
	if w2 == nil || retry != 30*time.Second {
		t.Fatalf("x2 over the limit: wait %v, retry %s; want a wait of at most the expiry", w2, retry)
	}
	w3, _ := a.Admit("bulk", "x3", rs(3))
	if w3 == nil {
		t.Fatal("x3 over the limit does not wait")
	}
	// Another tenant is admitted at once.
	if w, _ := a.Admit("interactive", "i1", rs(3)); w != nil {
		t.Fatal("another tenant's XR waits behind bulk; want it admitted")
	}
	// Asking again keeps the place in line.
	if again, _ := a.Admit("bulk", "x2", rs(3)); again != w2 {
		t.Fatal("x2 asking again got another place in line")
	}
	if n, waiting := a.Outstanding("bulk"); n != 9 || waiting != 2 {
		t.Fatalf("bulk outstanding %d, waiting %d; want 9 and 2", n, waiting)
	}

	// The providers observe x1's resources but one: still no room.
	a.Observe("x1", rs(4))
	if closed(w2) {
		t.Fatal("x2 woken with 4+3 over a limit of 6")
	}
	// All of x1's: x2 and then x3 fit (3+3), in order, with room reserved.
	a.Observe("x1", rs(0))
	if !closed(w2) || !closed(w3) {
		t.Fatalf("after x1 was observed: x2 woken %t, x3 woken %t; want both", closed(w2), closed(w3))
	}
	if n, waiting := a.Outstanding("bulk"); n != 6 || waiting != 0 {
		t.Fatalf("bulk outstanding %d, waiting %d; want 6 reserved and none waiting", n, waiting)
	}
	// The woken XR's render is admitted on its reservation.
	if w, _ := a.Admit("bulk", "x2", rs(3)); w != nil {
		t.Fatal("woken x2 waits again; want its reserved room")
	}

	// A waiter whose XR is gone is woken and dropped; its room goes on.
	w4, _ := a.Admit("bulk", "x4", rs(2))
	w5, _ := a.Admit("bulk", "x5", rs(2))
	a.Forget("x4")
	if !closed(w4) || closed(w5) {
		t.Fatalf("after x4 was forgotten: x4 woken %t, x5 woken %t; want x4 only", closed(w4), closed(w5))
	}
	a.Forget("x3")
	if !closed(w5) {
		t.Fatal("x5 not woken after x3, outstanding, was forgotten")
	}

	// Counts expire: what no provider looks at stops holding the tenant.
	w6, _ := a.Admit("bulk", "x6", rs(6))
	if w6 == nil {
		t.Fatal("x6 admitted over the limit")
	}
	now = now.Add(31 * time.Second)
	if w, _ := a.Admit("bulk", "x6", rs(6)); w != nil {
		t.Fatal("x6 still waits after every count expired")
	}

	// Renders of XRs never admitted are not counted.
	a.Observe("unknown", rs(5))
	if n, _ := a.Outstanding("interactive"); n != 3 {
		t.Fatalf("interactive outstanding %d; want 3", n)
	}
	// Nothing outstanding and nobody waiting: the tenant is dropped.
	a.Observe("i1", rs(0))
	if len(a.tenants) != 1 || a.tenants["interactive"] != nil {
		t.Fatalf("tenants %v; want bulk only", a.tenants)
	}
	if NewAdmission(0, time.Second) != nil {
		t.Fatal("NewAdmission(0) bounds; want nil, no bound")
	}
}

// TestAdmissionSeen: news that a provider looked at a resource frees its
// room at once, by name, each resource once, and wakes the next waiter.
func TestAdmissionSeen(t *testing.T) {
	a := NewAdmission(3, time.Minute)
	if w, _ := a.Admit("bulk", "x1", rs(3)); w != nil {
		t.Fatal("x1 waits; want it admitted")
	}
	w2, _ := a.Admit("bulk", "x2", rs(2))
	if w2 == nil {
		t.Fatal("x2 over the limit does not wait")
	}
	a.Seen("x1", "r0")
	a.Seen("x1", "r0") // the same news again
	a.Seen("x1", "other")
	a.Seen("unknown", "r1")
	if n, waiting := a.Outstanding("bulk"); n != 2 || waiting != 1 {
		t.Fatalf("after one resource seen: %d outstanding, %d waiting; want 2, 1", n, waiting)
	}
	if closed(w2) {
		t.Fatal("x2 woken with 2 outstanding and 2 asked of 3; want it waiting")
	}
	a.Seen("x1", "r1")
	if !closed(w2) {
		t.Fatal("x2 not woken once its 2 fit; want it admitted")
	}
	// Its render asks again and keeps its reserved room.
	if w, _ := a.Admit("bulk", "x2", rs(2)); w != nil {
		t.Fatal("x2 waits after it was woken; want it admitted")
	}
	if n, _ := a.Outstanding("bulk"); n != 3 {
		t.Fatalf("%d outstanding; want 3 (x1's r2, x2's two)", n)
	}
	// A render that counts again replaces what Seen left.
	a.Observe("x1", nil)
	a.Seen("x2", "r0")
	a.Seen("x2", "r1")
	if n, waiting := a.Outstanding("bulk"); n != 0 || waiting != 0 {
		t.Fatalf("everything seen: %d outstanding, %d waiting; want none", n, waiting)
	}
	if len(a.byUID) != 0 || len(a.tenants) != 0 {
		t.Fatalf("byUID %v, tenants %v left; want none", a.byUID, a.tenants)
	}
}

// TestAdmissionArrived: only news of a composed resource's status, for its
// XR, counts as seen.
func TestAdmissionArrived(t *testing.T) {
	a := NewAdmission(10, time.Minute)
	a.Admit("bulk", "x1", rs(3))
	req := func(reason, object, objectUID string) reconcile.Request {
		return reconcile.Request{Event: &eventsv1.Event{Reason: reason,
			Object: &eventsv1.ObjectRef{Name: object, Uid: objectUID}, Target: &eventsv1.ObjectRef{Name: "xr", Uid: "x1"}}}
	}
	a.Arrived(req("composed resource changed", "r0", "c0"))                                            // a spec change: no news of the provider
	a.Arrived(req(eventsv1.ReasonComposedTurnedReady, "r0", "x1"))                                     // the XR's own event
	a.Arrived(reconcile.Request{Event: &eventsv1.Event{Reason: eventsv1.ReasonComposedStatusChanged}}) // names nothing
	if n, _ := a.Outstanding("bulk"); n != 3 {
		t.Fatalf("%d outstanding after no news; want 3", n)
	}
	a.Arrived(req(eventsv1.ReasonComposedTurnedReady, "r0", "c0"))
	a.Arrived(req(eventsv1.ReasonComposedStatusChanged, "r1", "c1"))
	if n, _ := a.Outstanding("bulk"); n != 1 {
		t.Fatalf("%d outstanding after news of two; want 1", n)
	}
	var none *Admission
	none.Arrived(req(eventsv1.ReasonComposedTurnedReady, "r2", "c2")) // no bound: ignored
}

// TestAdmissionGauges: the gauges report each tenant's outstanding
// resources and waiting XRs, a tenant gone idle at zero for a while, then
// not at all.
func TestAdmissionGauges(t *testing.T) {
	now := time.Unix(1000, 0)
	a := NewAdmission(3, time.Hour)
	a.now = func() time.Time { return now }
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	if err := a.Instrument(mp.Meter("test")); err != nil {
		t.Fatal(err)
	}
	collect := func() map[string][2]int64 {
		t.Helper()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(t.Context(), &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string][2]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				g, ok := m.Data.(metricdata.Gauge[int64])
				if !ok {
					t.Fatalf("%s is %T, want an int64 gauge", m.Name, m.Data)
				}
				i := map[string]int{MetricAdmissionOutstanding: 0, MetricAdmissionWaiting: 1}[m.Name]
				for _, p := range g.DataPoints {
					tenant, _ := p.Attributes.Value("tenant")
					v := out[tenant.AsString()]
					v[i] = p.Value
					out[tenant.AsString()] = v
				}
			}
		}
		return out
	}

	if got := collect(); len(got) != 0 {
		t.Fatalf("gauges before any tenant: %v; want none", got)
	}
	a.Admit("bulk", "x1", rs(3))
	a.Admit("bulk", "x2", rs(2))
	a.Admit("bulk", "x3", rs(1))
	a.Admit("interactive", "i1", rs(1))
	want := map[string][2]int64{"bulk": {3, 2}, "interactive": {1, 0}}
	if diff := cmp.Diff(want, collect()); diff != "" {
		t.Errorf("gauges: -want, +got:\n%s", diff)
	}
	// The interactive claim's resource is seen: its tenant stays at zero.
	a.Observe("i1", nil)
	now = now.Add(admissionSeriesTTL - time.Second)
	want = map[string][2]int64{"bulk": {3, 2}, "interactive": {0, 0}}
	if diff := cmp.Diff(want, collect()); diff != "" {
		t.Errorf("gauges after interactive went idle: -want, +got:\n%s", diff)
	}
	// Idle for longer than the TTL: no longer reported; active again:
	// reported again.
	now = now.Add(2 * time.Second)
	want = map[string][2]int64{"bulk": {3, 2}}
	if diff := cmp.Diff(want, collect()); diff != "" {
		t.Errorf("gauges after interactive was idle past the TTL: -want, +got:\n%s", diff)
	}
	a.Admit("interactive", "i2", rs(2))
	want = map[string][2]int64{"bulk": {3, 2}, "interactive": {2, 0}}
	if diff := cmp.Diff(want, collect()); diff != "" {
		t.Errorf("gauges after interactive came back: -want, +got:\n%s", diff)
	}
}

// TestAdmissionIdleBounded: tenants gone idle are remembered for the
// gauges' sake only for the TTL, even when nothing collects the gauges.
func TestAdmissionIdleBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	a := NewAdmission(3, time.Hour)
	a.now = func() time.Time { return now }
	for i := range 10 * minIdleCap {
		tenant := "t" + strconv.Itoa(i)
		uid := types.UID(tenant)
		a.Admit(tenant, uid, rs(1))
		a.Observe(uid, nil)
		now = now.Add(admissionSeriesTTL / minIdleCap)
	}
	// Tenants go idle at minIdleCap per TTL: about that many are within
	// it, and a prune never leaves more than twice that.
	if n := len(a.idle); n > 2*minIdleCap+1 {
		t.Fatalf("%d idle tenants remembered after %d went idle; want at most about %d", n, 10*minIdleCap, 2*minIdleCap)
	}
	if len(a.tenants) != 0 || len(a.byUID) != 0 {
		t.Fatalf("tenants %d, byUID %d left; want none", len(a.tenants), len(a.byUID))
	}
}
