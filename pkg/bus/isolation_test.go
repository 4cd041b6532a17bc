package bus_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/testing/poll"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// nsEvent is a MODIFIED event for a namespaced object.
func nsEvent(ns, id string, rv int) *eventsv1.Event {
	ev := event(id, rv)
	ev.Object.Namespace = ns
	return ev
}

// With a backlog of one tenant's requests already waiting for the only
// handler slot, a request of another tenant is handled within a couple of
// handler runs when the queues are fair between tenants, and after the
// whole backlog when they are not. Runs are counted, not timed.
func TestFairBetweenTenants(t *testing.T) {
	const backlog = 200
	cases := map[string]struct {
		reason string
		key    func(bus.Request) string
		// urgent publishes a's backlog in the urgent lane (b's request is
		// normal).
		urgent bool
		// maxBefore is the most runs of the backlog before tenant b's.
		maxBefore int
		minBefore int
	}{
		"Namespace": {
			reason:    "Fair by namespace: b's request waits at most one run of a's, after the run holding the slot.",
			key:       bus.NamespaceKey,
			maxBefore: 2,
		},
		"NamespaceUrgentBacklog": {
			reason:    "Fair by namespace across lanes: b's normal request waits at most one run of a's urgent backlog.",
			key:       bus.NamespaceKey,
			urgent:    true,
			maxBefore: 2,
		},
		"None": {
			reason:    "First come, first served: b's request waits behind a's whole backlog (the contrast that shows the fairness is what helps).",
			key:       bus.NoKey,
			minBefore: backlog,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, heldConfig())
			p := h.publisher()
			b := newBlocker()
			publishAll(t, p, nsEvent("a", uid(0), 1))
			r := h.start(bus.Renderer, "r0", b, bus.WithConcurrency(1), bus.WithFairKey(tc.key))
			<-b.started
			var evs []*eventsv1.Event
			for i := 1; i < backlog; i++ {
				ev := nsEvent("a", uid(i), 1)
				ev.Urgent = tc.urgent
				evs = append(evs, ev)
			}
			publishAll(t, p, evs...)
			poll.True(t, time.Minute, "the backlog waiting", func() bool { u, n := r.w.Waiting(); return u+n == backlog-1 })
			late := uid(100_000)
			publishAll(t, p, nsEvent("b", late, 1))
			poll.True(t, time.Minute, "b's request waiting", func() bool { u, n := r.w.Waiting(); return u+n == backlog })
			close(b.release)
			poll.True(t, 60*time.Second, "every request handled", func() bool { return len(b.handled()) == backlog+1 })
			before := slices.Index(b.handled(), late)
			t.Logf("runs of tenant a's backlog of %d before tenant b's request: %d", backlog, before)
			if before > tc.maxBefore && tc.maxBefore > 0 || before < tc.minBefore {
				t.Errorf("%s\n%d runs before b's request; want between %d and %d", tc.reason, before, tc.minBefore, max(tc.maxBefore, tc.minBefore))
			}
		})
	}
}

// A tenant's backlog larger than a partition's look-ahead does not keep
// another tenant's event unread in the stream behind it: the full normal
// lane moves the backlog's events past its share to the overflow lane,
// once each, and reads on. All in one partition, with the only handler slot
// busy; runs and messages are counted, not timed.
func TestFairBeyondLookahead(t *testing.T) {
	const (
		backlog   = 100
		lookahead = 8
	)
	cases := map[string]struct {
		reason string
		key    func(bus.Request) string
		// urgent publishes every event in the urgent lane.
		urgent bool
		// waiting is how many requests wait in memory once b's event is
		// read; maxBefore and minBefore bound the runs of a's backlog
		// before b's.
		waiting              int
		maxBefore, minBefore int
	}{
		"Namespace": {
			reason:    "b's event must be read past a's backlog, take spare room, and wait at most one run of a's once the slot frees.",
			key:       bus.NamespaceKey,
			waiting:   2*lookahead + 1, // a's in the normal and overflow lanes, and b's
			maxBefore: 2,
		},
		"NamespaceUrgent": {
			reason:    "The urgent lane too: b's urgent event must be read past a's urgent backlog.",
			key:       bus.NamespaceKey,
			urgent:    true,
			waiting:   2*lookahead + 1,
			maxBefore: 2,
		},
		"None": {
			reason:    "One tenant for all: b's event goes to the overflow lane behind a's backlog (the contrast that shows the tenant is what lets it pass).",
			key:       bus.NoKey,
			waiting:   2 * lookahead,
			minBefore: backlog,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := resyncConfig()
			cfg.Partitions = 1
			h := newHarness(t, cfg)
			p := h.publisher()
			bl := newBlocker()
			ev := func(ns, id string) *eventsv1.Event { e := nsEvent(ns, id, 1); e.Urgent = tc.urgent; return e }
			publishAll(t, p, ev("a", uid(0)))
			r := h.start(bus.Renderer, "r0", bl, bus.WithConcurrency(1), bus.WithLookahead(lookahead), bus.WithFairKey(tc.key))
			<-bl.started
			var evs []*eventsv1.Event
			for i := 1; i < backlog; i++ {
				evs = append(evs, ev("a", uid(i)))
			}
			late := uid(100_000)
			evs = append(evs, ev("b", late))
			publishAll(t, p, evs...)
			// a's events past its share (all of them but the running one
			// and the lane's look-ahead) are moved once each, and the
			// lane reads on to its end. Without a way past a's backlog,
			// the lane stays unread while the slot is busy, and this
			// fails.
			moved := backlog - 1 - lookahead
			if tc.waiting == 2*lookahead {
				moved++ // b's too
			}
			lane := bus.ConsumerName(bus.Renderer, 0)
			if tc.urgent {
				lane = bus.UrgentConsumerName(bus.Renderer, 0)
			}
			overflow := bus.OverflowConsumerName(bus.Renderer, 0)
			poll.True(t, arrival, fmt.Sprintf("%s: lane %s read to its end and %d events moved to the overflow lane", tc.reason, lane, moved), func() bool {
				return h.laneUnread(t, lane) == 0 && h.laneBacklog(t, overflow) == moved
			})
			poll.True(t, arrival, fmt.Sprintf("%s: %d requests waiting", tc.reason, tc.waiting), func() bool {
				u, n := r.w.Waiting()
				return u+n == tc.waiting
			})
			if got := h.laneBacklog(t, overflow); got != moved {
				t.Errorf("%s\nthe overflow lane holds %d events; want %d (each moved once)", tc.reason, got, moved)
			}
			close(bl.release)
			poll.True(t, arrival, "every request handled", func() bool { return len(bl.handled()) >= backlog+1 })
			poll.True(t, arrival, "every message acknowledged", func() bool { return h.workPending(bus.Renderer) == 0 })
			got := bl.handled()
			if n := len(got); n != backlog+1 || len(slices.Compact(slices.Sorted(slices.Values(got)))) != n {
				t.Errorf("%d handler runs for %d distinct targets; want each of the %d once", n, len(slices.Compact(slices.Sorted(slices.Values(got)))), backlog+1)
			}
			before := slices.Index(got, late) - 1 // the run that held the slot does not count
			t.Logf("runs of tenant a's backlog of %d before tenant b's request: %d", backlog, before)
			lo := max(0, tc.minBefore-1) // all of a's but the run that held the slot
			if before > tc.maxBefore && tc.maxBefore > 0 || before < lo {
				t.Errorf("%s\n%d runs before b's request; want between %d and %d", tc.reason, before, lo, max(tc.maxBefore, lo))
			}
		})
	}
}

// laneBacklog is how many messages a consumer holds: unread, or delivered
// and not yet acknowledged.
func (h *harness) laneBacklog(t *testing.T, consumer string) int {
	t.Helper()
	info := h.consumerInfo(t, consumer)
	return int(info.NumPending) + info.NumAckPending //nolint:gosec // Small test counts.
}

// laneUnread is how many messages a consumer has not delivered yet.
func (h *harness) laneUnread(t *testing.T, consumer string) int {
	t.Helper()
	return int(h.consumerInfo(t, consumer).NumPending) //nolint:gosec // Small test counts.
}

func (h *harness) consumerInfo(t *testing.T, consumer string) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := h.js.Consumer(t.Context(), bus.StreamName(bus.Renderer), consumer)
	if err != nil {
		t.Fatalf("cannot find consumer %s: %v", consumer, err)
	}
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatalf("cannot read consumer %s: %v", consumer, err)
	}
	return info
}

// poisoned is a handler whose calls for one target (poison) fail and, like
// an XR whose failure is written to its status, bring the target back with
// a new event each time; other targets succeed.
type poisoned struct {
	poison string
	pub    *bus.Publisher
	block  bool // a failing call waits for its context (a timeout)

	mu     sync.Mutex
	starts []time.Time // of the poison's calls
	others map[string]int
	rv     int
	active atomic.Int32 // poison calls running
}

func (h *poisoned) Handle(ctx context.Context, r bus.Request) (bus.Result, error) {
	if r.Target.GetUid() != h.poison {
		h.mu.Lock()
		h.others[r.Target.GetUid()]++
		h.mu.Unlock()
		return bus.Result{}, nil
	}
	h.active.Add(1)
	defer h.active.Add(-1)
	h.mu.Lock()
	h.starts = append(h.starts, time.Now())
	h.rv++
	rv := h.rv
	h.mu.Unlock()
	ev := event(h.poison, rv+1)
	ev.Object.Kind = "XMetric"
	if err := h.pub.Publish(context.WithoutCancel(ctx), bus.Binder, ev); err != nil {
		return bus.Result{}, err
	}
	if h.block {
		<-ctx.Done()
		return bus.Result{}, fmt.Errorf("poisoned: %w", ctx.Err())
	}
	return bus.Result{}, errBoom
}

func (h *poisoned) runs() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.starts)
}

func (h *poisoned) handled(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.others[id]
}

// A target that keeps failing backs off exponentially across the new events
// it brings itself back with (each of which starts again at delivery 1),
// rather than running again at once.
func TestBackoffAcrossEvents(t *testing.T) {
	h := newHarness(t, testConfig())
	hd := &poisoned{poison: uid(7), pub: h.publisher(), others: map[string]int{}}
	const initial = 100 * time.Millisecond
	h.start(bus.Binder, "b0", hd, bus.WithBackoff(func() backoff.BackOff {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval = initial
		b.Multiplier = 2
		b.RandomizationFactor = 0
		b.MaxInterval = time.Minute
		b.MaxElapsedTime = 0
		b.Reset()
		return b
	}))
	ev := event(hd.poison, 1)
	ev.Object.Kind = "XMetric"
	if err := hd.pub.Publish(t.Context(), bus.Binder, ev); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 30*time.Second, "five runs of the failing target", func() bool { return len(hd.runs()) >= 5 })
	runs := hd.runs()
	for i := 1; i < 5; i++ {
		gap, want := runs[i].Sub(runs[i-1]), initial<<(i-1)
		t.Logf("gap before run %d: %s (backoff %s)", i+1, gap.Round(time.Millisecond), want)
		if gap < want {
			t.Errorf("run %d started %s after run %d; want at least the backoff of %d failures, %s", i+1, gap, i, i, want)
		}
	}
}

// A target may run at most its budget of times in a minute: a target that
// never settles (it requeues itself at once) stops at the budget, its next
// event held without a slot, while others are handled.
func TestTargetBudget(t *testing.T) {
	const budget = 5
	h := newHarness(t, testConfig())
	p := h.publisher()
	hot := uid(1)
	var runs atomic.Int32
	var others atomic.Int32
	r := h.start(bus.Renderer, "r0", bus.HandlerFunc(func(_ context.Context, req bus.Request) (bus.Result, error) {
		if req.Target.GetUid() != hot {
			others.Add(1)
			return bus.Result{}, nil
		}
		runs.Add(1)
		return bus.Result{RequeueAfter: time.Millisecond}, nil
	}), bus.WithTargetBudget(budget))
	publishAll(t, p, event(hot, 1))
	poll.True(t, 20*time.Second, "the budget spent", func() bool { return runs.Load() == budget })
	// Its requeued request reaches the worker and is held back, without a
	// slot: it is delivered and does not wait in the scheduler.
	poll.True(t, 20*time.Second, "the next request held", func() bool {
		u, n := r.w.Waiting()
		return h.delivered(t, bus.Renderer, hot, false) && u+n == 0
	})
	var evs []*eventsv1.Event
	for i := 2; i < 50; i++ {
		evs = append(evs, event(uid(i), 1))
	}
	publishAll(t, p, evs...)
	poll.True(t, 20*time.Second, "the other targets handled", func() bool { return others.Load() == int32(len(evs)) })
	if got := runs.Load(); got != budget {
		t.Errorf("runs of the target within the minute: got %d, want its budget %d", got, budget)
	}
}

// A target whose handler times out runs in the quarantine pool after its
// first failure: it never again holds one of the main pool's slots, and
// healthy targets are handled in the main pool meanwhile. Counted from the
// worker's metrics, by pool.
func TestQuarantine(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	otel.SetMeterProvider(mp)
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })

	h := newHarness(t, testConfig())
	hd := &poisoned{poison: uid(9), pub: h.publisher(), block: true, others: map[string]int{}}
	h.start(bus.Binder, "b0", hd, bus.WithConcurrency(1), bus.WithQuarantine(1),
		bus.WithHandlerTimeout(200*time.Millisecond),
		bus.WithBackoff(func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }))
	ev := event(hd.poison, 1)
	ev.Object.Kind = "XMetric"
	if err := hd.pub.Publish(t.Context(), bus.Binder, ev); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 20*time.Second, "the poisoned target failed once", func() bool { return len(hd.runs()) >= 2 })
	var ids []string
	for i := 100; i < 130; i++ {
		ids = append(ids, uid(i))
		e := event(uid(i), 1)
		e.Object.Kind = "XMetric"
		if err := hd.pub.Publish(t.Context(), bus.Binder, e); err != nil {
			t.Fatal(err)
		}
	}
	poll.True(t, 30*time.Second, "the healthy targets handled", func() bool {
		for _, id := range ids {
			if hd.handled(id) == 0 {
				return false
			}
		}
		return true
	})
	poll.True(t, 20*time.Second, "the poison's runs counted", func() bool {
		got := collect(t, reader)
		return got["loom.bus.handler.runs{failed=true,kind=XMetric,pool=quarantine,service=binder}"] >= 1
	})
	got := collect(t, reader)
	mainFailed := got["loom.bus.handler.runs{failed=true,kind=XMetric,pool=main,service=binder}"]
	quarantined := got["loom.bus.handler.runs{failed=true,kind=XMetric,pool=quarantine,service=binder}"]
	mainOK := got["loom.bus.handler.runs{failed=false,kind=XMetric,pool=main,service=binder}"]
	t.Logf("failed runs in the main pool %d, in quarantine %d; healthy runs in the main pool %d", mainFailed, quarantined, mainOK)
	if mainFailed != 1 {
		t.Errorf("failed runs in the main pool: got %d, want 1 (the first, before the target was known to fail)", mainFailed)
	}
	if mainOK < int64(len(ids)) {
		t.Errorf("healthy runs in the main pool: got %d, want at least %d", mainOK, len(ids))
	}
}
