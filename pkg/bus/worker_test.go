package bus_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/bus/bustest"
	"github.com/loomxr/loom/pkg/reconcile"
	"github.com/loomxr/loom/pkg/testing/poll"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// A handler learns, through reconcile.Superseded, that a newer event for its
// target arrived while it ran (and the run that event brings follows); an
// event for another target does not count.
func TestSupersededWhileHandling(t *testing.T) {
	h := newHarness(t, heldConfig())
	started, otherDone, checked := make(chan struct{}), make(chan struct{}), make(chan struct{})
	seen := make(chan [3]bool, 1) // Superseded at start, after another target's event, after a newer one
	var runs atomic.Int32
	r0 := h.start(bus.Renderer, "r0", bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
		if r.Target.GetUid() != uid(1) {
			close(otherDone)
			return bus.Result{}, nil
		}
		if runs.Add(1) > 1 {
			return bus.Result{}, nil
		}
		var got [3]bool
		got[0] = reconcile.Superseded(ctx)
		close(started)
		select {
		case <-otherDone:
		case <-time.After(arrival):
			t.Error("the other target's event was not handled")
		}
		got[1] = reconcile.Superseded(ctx)
		close(checked)
		wctx, cancel := context.WithTimeout(ctx, arrival)
		defer cancel()
		got[2] = poll.Wait(wctx, func(context.Context) error {
			if !reconcile.Superseded(ctx) {
				return errors.New("no newer event yet")
			}
			return nil
		}) == nil
		seen <- got
		return bus.Result{}, nil
	}))
	poll.True(t, 5*time.Second, "the replica to own every partition", func() bool {
		return len(r0.w.Owned()) == h.cfg.Partitions
	})
	pub := h.publisher()
	publish := func(ev *eventsv1.Event) {
		t.Helper()
		if err := pub.Publish(t.Context(), bus.Renderer, ev); err != nil {
			t.Fatal(err)
		}
	}
	publish(event(uid(1), 1))
	<-started
	publish(event(uid(2), 1))
	<-checked
	publish(event(uid(1), 2))
	if got := <-seen; got != [3]bool{false, false, true} {
		t.Errorf("Superseded() at start, after another target's event, after a newer event for the target = %v, want [false false true]", got)
	}
	poll.True(t, arrival, "the newer event's run", func() bool { return runs.Load() == 2 })
}

// 1,000 events for one object are handled far fewer times, and the last
// handling sees the latest resourceVersion.
func TestCoalescesEventsForOneObject(t *testing.T) {
	h := newHarness(t, heldConfig())
	const n = 1000
	release := make(chan struct{})
	var (
		mu        sync.Mutex
		handled   []int
		coalesced int
	)
	r0 := h.start(bus.Renderer, "r0", bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
		rv, _ := strconv.Atoi(r.Event.GetResourceVersion())
		mu.Lock()
		handled = append(handled, rv)
		coalesced += r.Coalesced
		first := len(handled) == 1
		mu.Unlock()
		if first {
			// Hold the first handling until every event is published, so
			// that the rest pile up behind it.
			return bus.Result{}, awaitRelease(ctx, release)
		}
		return bus.Result{}, nil
	}))
	poll.True(t, 5*time.Second, "the replica to own every partition", func() bool {
		return len(r0.w.Owned()) == h.cfg.Partitions
	})
	pub := h.publisher()
	for i := 1; i <= n; i++ {
		if err := pub.Publish(t.Context(), bus.Renderer, event(uid(1), i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(release)
	last := func() int {
		mu.Lock()
		defer mu.Unlock()
		if len(handled) == 0 {
			return 0
		}
		return handled[len(handled)-1]
	}
	poll.True(t, 10*time.Second, "the latest version to be handled", func() bool {
		return last() == n && h.workPending(bus.Renderer) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(handled) > n/50 {
		t.Errorf("handled %d times for %d events; want far fewer (at most %d)", len(handled), n, n/50)
	}
	for i := 1; i < len(handled); i++ {
		if handled[i] <= handled[i-1] {
			t.Errorf("handled versions out of order: %v", handled)
			break
		}
	}
	if len(handled)+coalesced > n {
		t.Errorf("%d handlings and %d coalesced events for %d events", len(handled), coalesced, n)
	}
	t.Logf("%d events handled %d times (%v), %d coalesced in the replica", n, len(handled), handled, coalesced)
}

// With three replicas and 10,000 events over 500 objects, no object is ever
// handled by two replicas at once, and every object's latest version is
// handled. The replicas join while events flow, so partitions move.
func TestThreeReplicasNeverOverlap(t *testing.T) {
	cfg := testConfig()
	cfg.Partitions = 32
	h := newHarness(t, cfg)
	const objects, versions = 500, 20
	var (
		overlaps atomic.Int64
		calls    atomic.Int64
		active   [objects]atomic.Int32
		latest   [objects]atomic.Int64
	)
	handler := func(replica string) bus.Handler {
		return bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
			i, err := strconv.Atoi(r.Target.GetUid()[len(r.Target.GetUid())-12:])
			if err != nil {
				return bus.Result{}, reconcile.Terminal(err)
			}
			if active[i].Add(1) > 1 {
				overlaps.Add(1)
			}
			defer active[i].Add(-1)
			calls.Add(1)
			rv, _ := strconv.Atoi(r.Event.GetResourceVersion())
			latest[i].Store(int64(rv))
			// Simulated work (not synchronization), long enough for a
			// second handling of the object to meet this one if exclusivity
			// were broken.
			time.Sleep(500 * time.Microsecond)
			return bus.Result{}, nil
		})
	}
	own := newOwnership()
	pub := h.publisher()
	h.start(bus.Renderer, "r0", handler("r0"), own.hook("r0"))
	for v := 1; v <= versions; v++ {
		if v == 5 {
			h.start(bus.Renderer, "r1", handler("r1"), own.hook("r1"))
		}
		if v == 10 {
			h.start(bus.Renderer, "r2", handler("r2"), own.hook("r2"))
		}
		for o := range objects {
			if err := pub.Publish(t.Context(), bus.Renderer, event(uid(o), v)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pub.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 30*time.Second, "every object's latest version to be handled", func() bool {
		for i := range objects {
			if latest[i].Load() != versions {
				return false
			}
		}
		return h.workPending(bus.Renderer) == 0
	})
	if n := overlaps.Load(); n != 0 {
		t.Errorf("recorded %d overlapping handlings; want 0", n)
	}
	if _, v := own.state(); len(v) > 0 {
		t.Errorf("partitions with two owners: %v", v)
	}
	t.Logf("%d events over %d objects handled in %d calls", objects*versions, objects, calls.Load())
}

// A replica killed mid-message has the message redelivered to another
// replica, and the two handlings never overlap.
func TestKilledReplicaMessageRedelivered(t *testing.T) {
	h := newHarness(t, testConfig())
	own := newOwnership()
	type call struct {
		replica  string
		delivery int
		start    time.Time
	}
	var (
		mu      sync.Mutex
		calls   []call
		doomed  string
		deadEnd time.Time
		started = make(chan struct{})
	)
	handler := func(id string) bus.Handler {
		return bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
			mu.Lock()
			calls = append(calls, call{replica: id, delivery: r.Delivery, start: time.Now()})
			first := doomed == ""
			if first {
				doomed = id
			}
			mu.Unlock()
			if !first {
				return bus.Result{}, nil
			}
			// Whoever gets the message first works on it until it is
			// killed.
			close(started)
			<-ctx.Done()
			mu.Lock()
			deadEnd = time.Now()
			mu.Unlock()
			return bus.Result{}, ctx.Err()
		})
	}
	replicas := map[string]*replica{
		"a": h.start(bus.Binder, "a", handler("a"), own.hook("a")),
		"b": h.start(bus.Binder, "b", handler("b"), own.hook("b")),
	}
	poll.True(t, 10*time.Second, "both replicas to own partitions", func() bool {
		return len(replicas["a"].w.Owned()) > 0 && len(replicas["b"].w.Owned()) > 0
	})
	pub := h.publisher()
	if err := pub.Publish(t.Context(), bus.Binder, event(uid(1), 1)); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("nobody started handling")
	}
	mu.Lock()
	victim := doomed
	mu.Unlock()
	replicas[victim].kill()
	poll.True(t, 15*time.Second, "the other replica to handle the message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) == 2 && h.workPending(bus.Binder) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if calls[1].replica == victim || calls[1].delivery < 2 {
		t.Errorf("second handling: got %+v, want the replica other than %s, with delivery >= 2", calls[1], victim)
	}
	if !calls[1].start.After(deadEnd) {
		t.Errorf("second handling started at %s, before the killed replica's handler returned at %s", calls[1].start, deadEnd)
	}
	if _, v := own.state(); len(v) > 0 {
		t.Errorf("partitions with two owners: %v", v)
	}
}

// A message that keeps failing ends in the dead-letter stream with its
// reason, and replaying it re-drives it. Permanent errors and undecodable
// messages are dead-lettered at once.
func TestDeadLetterAndReplay(t *testing.T) {
	h := newHarness(t, testConfig())
	var (
		fixed    atomic.Bool
		attempts sync.Map // uid -> *atomic.Int32
		okCalls  atomic.Int32
	)
	failing, permanent := uid(1), uid(2)
	h.start(bus.Secrets, "s0", bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
		n, _ := attempts.LoadOrStore(r.Target.GetUid(), new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		switch {
		case r.Target.GetUid() == permanent:
			return bus.Result{}, reconcile.Terminal(fmt.Errorf("composition %q not found", "missing"))
		case !fixed.Load():
			return bus.Result{}, fmt.Errorf("cannot reach function: %w", errBoom)
		}
		okCalls.Add(1)
		return bus.Result{}, nil
	}), bus.WithBackoff(func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }))

	pub := h.publisher()
	for _, u := range []string{failing, permanent} {
		if err := pub.Publish(t.Context(), bus.Secrets, event(u, 7)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A message that is not an event at all.
	garbage := bus.WorkSubject(bus.Secrets, h.cfg.Partitions, uid(3))
	if _, err := h.js.Publish(t.Context(), garbage, []byte("\xff\xffnot a protobuf")); err != nil {
		t.Fatal(err)
	}

	var dls []bus.DeadLetter
	poll.True(t, 10*time.Second, "three dead letters", func() bool {
		var err error
		dls, err = bus.ListDeadLetters(t.Context(), h.js, bus.Secrets)
		return err == nil && len(dls) == 3 && h.workPending(bus.Secrets) == 0
	})
	byUID := map[string]bus.DeadLetter{}
	for _, d := range dls {
		if d.Service != bus.Secrets || d.FailedAt.IsZero() {
			t.Errorf("dead letter %d: service %q, failed at %s", d.Seq, d.Service, d.FailedAt)
		}
		u := uid(3)
		if d.Target != nil {
			u = d.Target.GetUid()
		}
		byUID[u] = d
	}
	cases := map[string]struct {
		reason     string
		uid        string
		wantReason string
		wantDeliv  int
	}{
		"Exhausted": {reason: "a transient error retried MaxDeliver times", uid: failing,
			wantReason: "failed 3 deliveries; last error: cannot reach function: boom", wantDeliv: 3},
		"Permanent": {reason: "a permanent error is not retried", uid: permanent,
			wantReason: `permanent error: composition "missing" not found`, wantDeliv: 1},
		"Undecodable": {reason: "a message that is not an event is never retried", uid: uid(3),
			wantReason: "undecodable: cannot decode event", wantDeliv: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, ok := byUID[tc.uid]
			if !ok {
				t.Fatalf("%s: no dead letter for %s", tc.reason, tc.uid)
			}
			if !strings.HasPrefix(d.Reason, tc.wantReason) || d.Deliveries != tc.wantDeliv {
				t.Errorf("%s: got reason %q after %d deliveries, want %q after %d", tc.reason, d.Reason, d.Deliveries, tc.wantReason, tc.wantDeliv)
			}
			if d.Subject != bus.WorkSubject(bus.Secrets, h.cfg.Partitions, tc.uid) {
				t.Errorf("%s: subject %q", tc.reason, d.Subject)
			}
		})
	}
	if n, _ := attempts.Load(failing); n.(*atomic.Int32).Load() != 3 {
		t.Errorf("failing event handled %d times, want 3", n.(*atomic.Int32).Load())
	}

	fixed.Store(true)
	if _, err := bus.ReplayDeadLetter(t.Context(), h.js, byUID[failing].Seq); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "the replayed event to be handled", func() bool {
		return okCalls.Load() == 1 && h.workPending(bus.Secrets) == 0
	})
	left, err := bus.ListDeadLetters(t.Context(), h.js, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 {
		t.Errorf("dead letters after replay: %d, want 2", len(left))
	}
}

// Publishing the same change twice stores it once.
func TestDuplicatePublishDropped(t *testing.T) {
	h := newHarness(t, testConfig())
	// Two publishers, as two active-active watchers.
	a, b := h.publisher(), h.publisher()
	for _, p := range []*bus.Publisher{a, b, a} {
		if err := p.Publish(t.Context(), bus.Renderer, event(uid(1), 42)); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	s, err := h.js.Stream(t.Context(), bus.StreamName(bus.Renderer))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().State.LastSeq; got != 1 {
		t.Errorf("stored %d messages for one change published three times; want 1", got)
	}
	// A new version is a new message.
	if err := a.Publish(t.Context(), bus.Renderer, event(uid(1), 43)); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	s, _ = h.js.Stream(t.Context(), bus.StreamName(bus.Renderer))
	if got := s.CachedInfo().State.LastSeq; got != 2 {
		t.Errorf("stored %d messages after a new version; want 2", got)
	}
}

// When replicas join and leave (gracefully or by crashing), every partition
// has an owner again within seconds, and never two.
func TestMembershipRebalances(t *testing.T) {
	h := newHarness(t, testConfig())
	own := newOwnership()
	nop := bus.HandlerFunc(func(context.Context, bus.Request) (bus.Result, error) { return bus.Result{}, nil })
	all := func(rs ...*replica) func() bool {
		return func() bool {
			n, _ := own.state()
			total := 0
			for _, r := range rs {
				if len(r.w.Owned()) == 0 {
					return false
				}
				total += len(r.w.Owned())
			}
			return n == h.cfg.Partitions && total == h.cfg.Partitions
		}
	}
	step := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		start := time.Now()
		poll.True(t, within, what, cond)
		t.Logf("%s: %s", what, time.Since(start).Round(time.Millisecond))
	}
	r0 := h.start(bus.Renderer, "r0", nop, own.hook("r0"))
	step("one replica owns every partition", 5*time.Second, all(r0))
	r1 := h.start(bus.Renderer, "r1", nop, own.hook("r1"))
	r2 := h.start(bus.Renderer, "r2", nop, own.hook("r2"))
	step("three replicas share the partitions", 5*time.Second, all(r0, r1, r2))
	if !r0.w.Ready() || !r1.w.Ready() || !r2.w.Ready() {
		t.Errorf("replicas not ready")
	}
	r1.stop()
	step("a graceful leaver's partitions are taken over", 3*time.Second, all(r0, r2))
	r2.kill()
	step("a crashed replica's partitions are taken over", 3*h.cfg.LeaseTTL+time.Second, all(r0))
	r3 := h.start(bus.Renderer, "r3", nop, own.hook("r3"))
	step("a new replica gets its share", 5*time.Second, all(r0, r3))
	if _, v := own.state(); len(v) > 0 {
		t.Errorf("partitions with two owners: %v", v)
	}
}

// A requeue comes back after its delay as a fresh delivery, and requeues do
// not count towards MaxDeliver.
func TestRequeue(t *testing.T) {
	h := newHarness(t, testConfig())
	const requeues = 5 // more than MaxDeliver
	var (
		mu    sync.Mutex
		calls []time.Time
		deliv []int
	)
	h.start(bus.Renderer, "r0", bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, time.Now())
		deliv = append(deliv, r.Delivery)
		switch {
		case len(calls) > requeues:
		case len(calls)%2 == 0:
			// A requeue without a delay comes back, not counted as a
			// delivery, after the shortest retry delay.
			return bus.Result{Requeue: true}, nil
		default:
			return bus.Result{RequeueAfter: 50 * time.Millisecond}, nil
		}
		return bus.Result{}, nil
	}))
	pub := h.publisher()
	if err := pub.Publish(t.Context(), bus.Renderer, event(uid(9), 1)); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "all requeues to be handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) == requeues+1 && h.workPending(bus.Renderer) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(calls); i += 2 { // after the RequeueAfter handlings
		if gap := calls[i].Sub(calls[i-1]); gap < 50*time.Millisecond {
			t.Errorf("handling %d came %s after the previous one; want at least the 50ms requeue delay", i, gap)
		}
	}
	for i, d := range deliv {
		if d != 1 {
			t.Errorf("handling %d saw delivery %d; want 1 (requeues are fresh)", i, d)
		}
	}
	if dls, _ := bus.ListDeadLetters(t.Context(), h.js, ""); len(dls) != 0 {
		t.Errorf("requeues dead-lettered: %+v", dls)
	}
}

// A handler that waits for the same deadline whichever lane's event it
// handles needs one timer: a requeue from the urgent lane, while the copy
// a run of the normal lane requeued is still in the stream and comes back
// no later, publishes no second copy; the one copy brings the target back.
func TestRequeueOneTimerPerTarget(t *testing.T) {
	h := newHarness(t, testConfig())
	const wait = 1500 * time.Millisecond
	var (
		mu       sync.Mutex
		deadline time.Time
		calls    int
		urgents  int
	)
	h.start(bus.Renderer, "r0", bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if r.Event.GetUrgent() {
			urgents++
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(wait)
		}
		if d := time.Until(deadline); d > 0 {
			return bus.Result{RequeueAfter: d}, nil
		}
		return bus.Result{}, nil
	}))
	pub := h.publisher()
	counts := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return calls, urgents
	}
	if err := pub.Publish(t.Context(), bus.Renderer, event(uid(3), 1)); err != nil {
		t.Fatal(err)
	}
	// The first run's copy replaced its event in the stream.
	waitForCopy(t, h, uid(3))
	if err := pub.Publish(t.Context(), bus.Renderer, urgent(event(uid(3), 2))); err != nil {
		t.Fatal(err)
	}
	// The urgent event is acked after its run, leaving the normal lane's
	// copy alone in the stream (with a copy per lane there would be two).
	poll.True(t, 10*time.Second, "the urgent run to leave one copy in the stream", func() bool {
		c, u := counts()
		return c == 2 && u == 1 && h.workPending(bus.Renderer) == 1
	})
	poll.True(t, 10*time.Second, "the copy to bring the target back past its deadline", func() bool {
		c, _ := counts()
		return c == 3 && h.workPending(bus.Renderer) == 0
	})
	// Nothing else comes back: the urgent lane has no copy of its own.
	time.Sleep(wait)
	if c, _ := counts(); c != 3 {
		t.Errorf("%d runs; want 3 (the event, the urgent event, the one copy)", c)
	}
}

// waitForCopy waits until a requeue copy of the renderer's event for
// target u is the last message of its normal lane.
func waitForCopy(t *testing.T, h *harness, u string) {
	t.Helper()
	poll.True(t, 10*time.Second, "the first run's copy", func() bool {
		s, err := h.js.Stream(t.Context(), bus.StreamName(bus.Renderer))
		if err != nil {
			t.Fatalf("cannot read stream: %v", err)
		}
		m, err := s.GetLastMsgForSubject(t.Context(), bus.WorkSubject(bus.Renderer, h.cfg.Partitions, u))
		return err == nil && m.Header.Get(bus.HeaderNotBefore) != ""
	})
}

// A run that succeeds asking for no requeue makes moot the copy an earlier
// run of the target requeued: the copy is acked when it comes, without a
// run, for the newer run saw newer state.
func TestRequeueMadeMootByLaterRun(t *testing.T) {
	h := newHarness(t, testConfig())
	var (
		mu  sync.Mutex
		rvs []string
	)
	h.start(bus.Renderer, "r0", bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		rvs = append(rvs, r.Event.GetResourceVersion())
		if n := len(rvs); n == 1 || n == 3 {
			// The first run of each of the two events below.
			return bus.Result{RequeueAfter: time.Second}, nil
		}
		return bus.Result{}, nil
	}))
	runs := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(rvs)
	}
	pub := h.publisher()
	if err := pub.Publish(t.Context(), bus.Renderer, event(uid(4), 1)); err != nil {
		t.Fatal(err)
	}
	waitForCopy(t, h, uid(4))
	if err := pub.Publish(t.Context(), bus.Renderer, urgent(event(uid(4), 2))); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "the urgent run, with the copy still in the stream", func() bool {
		return len(runs()) == 2 && h.workPending(bus.Renderer) == 1
	})
	poll.True(t, 10*time.Second, "the copy to come back and be acked", func() bool {
		return h.workPending(bus.Renderer) == 0
	})
	if got := runs(); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("runs of resourceVersions %v; want [1 2] (the moot copy is not run)", got)
	}
	// A copy requeued after the later run is not moot: it runs.
	if err := pub.Publish(t.Context(), bus.Renderer, event(uid(4), 3)); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "the new event and its copy to run", func() bool {
		return len(runs()) == 4 && h.workPending(bus.Renderer) == 0
	})
	if got := runs(); !slices.Equal(got, []string{"1", "2", "3", "3"}) {
		t.Errorf("runs of resourceVersions %v; want [1 2 3 3]", got)
	}
}

// A handler that runs longer than AckWait is kept alive with InProgress and
// handled once.
func TestLongHandlerNotRedelivered(t *testing.T) {
	cfg := testConfig()
	cfg.AckWait = 300 * time.Millisecond
	h := newHarness(t, cfg)
	var calls atomic.Int32
	h.start(bus.Renderer, "r0", bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
		calls.Add(1)
		// Work for three AckWaits.
		select {
		case <-time.After(3 * cfg.AckWait):
		case <-ctx.Done():
		}
		return bus.Result{}, nil
	}))
	pub := h.publisher()
	if err := pub.Publish(t.Context(), bus.Renderer, event(uid(1), 1)); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "the event to be handled", func() bool {
		return calls.Load() >= 1 && h.workPending(bus.Renderer) == 0
	})
	if n := calls.Load(); n != 1 {
		t.Errorf("handled %d times; want 1", n)
	}
}

// The trace context of the publisher reaches the handler.
func TestTracePropagates(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })

	h := newHarness(t, testConfig())
	got := make(chan trace.SpanContext, 1)
	h.start(bus.Renderer, "r0", bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
		got <- trace.SpanContextFromContext(ctx)
		return bus.Result{}, nil
	}))
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(t.Context(), sc)
	pub := h.publisher()
	if err := pub.Publish(ctx, bus.Renderer, event(uid(1), 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s.TraceID() != sc.TraceID() {
			t.Errorf("handler trace ID %s; want %s", s.TraceID(), sc.TraceID())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("event not handled")
	}
}

// A graceful stop lets a running handler finish and acknowledges its
// message, so nobody handles it again.
func TestGracefulStopDrains(t *testing.T) {
	h := newHarness(t, testConfig())
	started, finish := make(chan struct{}), make(chan struct{})
	var calls, cancelled atomic.Int32
	r := h.start(bus.Renderer, "r0", bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
		if calls.Add(1) == 1 {
			close(started)
		}
		select {
		case <-finish:
		case <-ctx.Done():
			cancelled.Add(1)
		}
		return bus.Result{}, nil
	}))
	pub := h.publisher()
	if err := pub.Publish(t.Context(), bus.Renderer, event(uid(1), 1)); err != nil {
		t.Fatal(err)
	}
	<-started
	stopped := make(chan struct{})
	go func() { r.stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Run returned while a handler was still running")
	case <-time.After(100 * time.Millisecond):
	}
	close(finish)
	<-stopped
	if n := h.workPending(bus.Renderer); n != 0 || cancelled.Load() != 0 {
		t.Errorf("after a graceful stop: %d messages pending, %d handlers cancelled; want 0 and 0", n, cancelled.Load())
	}
}

// A Publisher refuses events it cannot route.
func TestPublishRejectsInvalidEvents(t *testing.T) {
	h := newHarness(t, testConfig())
	pub := h.publisher()
	cases := map[string]struct {
		reason  string
		service string
		ev      *eventsv1.Event
		want    string
	}{
		"UnknownService": {reason: "only the consuming services have streams", service: "nobody", ev: event(uid(1), 1), want: "unknown service"},
		"BadUID":         {reason: "a UID must be one subject token", service: bus.Renderer, ev: event("a.b", 1), want: "target UID"},
		"NoTarget":       {reason: "an event must name what to reconcile", service: bus.Renderer, ev: &eventsv1.Event{}, want: "neither a target nor an object"},
		"Nil":            {reason: "a nil event is a bug", service: bus.Renderer, ev: nil, want: "nil event"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := pub.Publish(t.Context(), tc.service, tc.ev)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got error %v, want one containing %q", tc.reason, err, tc.want)
			}
		})
	}
}

// A process configured with another partition count than the streams' is
// refused everywhere, instead of routing work to partitions nobody consumes.
func TestPartitionMismatchRefused(t *testing.T) {
	h := newHarness(t, testConfig())
	other := testConfig()
	other.Partitions = h.cfg.Partitions * 2
	want := fmt.Sprintf("has %d partitions", h.cfg.Partitions)

	if err := bus.EnsureStreams(t.Context(), h.js, other); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("EnsureStreams: got %v, want an error containing %q", err, want)
	}
	pub := bus.NewPublisher(h.js, bus.WithConfig(other))
	if err := pub.Publish(t.Context(), bus.Renderer, event(uid(1), 1)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Publish: got %v, want an error containing %q", err, want)
	}
	nc, js := bustest.Connect(t, h.srv.URL())
	nop := bus.HandlerFunc(func(context.Context, bus.Request) (bus.Result, error) { return bus.Result{}, nil })
	w, err := bus.NewWorker(nc, js, bus.Renderer, "r0", nop, bus.WithConfig(other), bus.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(t.Context()); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Run: got %v, want an error containing %q", err, want)
	}
}

// Restarting the NATS server (its store survives) loses no work: workers
// reconnect, take their partitions back and handle everything.
func TestServerRestart(t *testing.T) {
	h := newHarness(t, testConfig())
	var (
		mu     sync.Mutex
		latest = map[string]int{}
	)
	handler := bus.HandlerFunc(func(_ context.Context, r bus.Request) (bus.Result, error) {
		rv, _ := strconv.Atoi(r.Event.GetResourceVersion())
		mu.Lock()
		latest[r.Target.GetUid()] = max(latest[r.Target.GetUid()], rv)
		mu.Unlock()
		return bus.Result{}, nil
	})
	reconnect := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(20 * time.Millisecond)}
	for _, id := range []string{"r0", "r1"} {
		nc, js := bustest.Connect(t, h.srv.URL(), reconnect...)
		w, err := bus.NewWorker(nc, js, bus.Renderer, id, handler, bus.WithConfig(h.cfg), bus.WithLogger(testLogger().With("replica", id)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		t.Cleanup(func() { stop(); <-done })
	}
	_, pjs := bustest.Connect(t, h.srv.URL(), reconnect...)
	pub := bus.NewPublisher(pjs, bus.WithConfig(h.cfg), bus.WithLogger(testLogger()))
	const objects = 200
	publish := func(rv int) {
		t.Helper()
		for o := range objects {
			if err := pub.Publish(t.Context(), bus.Renderer, event(uid(o), rv)); err != nil {
				t.Fatal(err)
			}
		}
		if err := pub.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	handledAll := func(rv int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for o := range objects {
				if latest[uid(o)] != rv {
					return false
				}
			}
			return true
		}
	}
	publish(1)
	poll.True(t, 10*time.Second, "every object handled", handledAll(1))
	if err := h.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	publish(2)
	poll.True(t, 20*time.Second, "every object handled after the restart", handledAll(2))
	_, js := bustest.Connect(t, h.srv.URL())
	if dls, err := bus.ListDeadLetters(t.Context(), js, ""); err != nil || len(dls) != 0 {
		t.Errorf("dead letters: %v, %v", dls, err)
	}
}

// A graceful stop waits for running handlers only up to the drain timeout,
// then cancels them and gives their messages back.
func TestDrainIsBounded(t *testing.T) {
	h := newHarness(t, testConfig())
	started := make(chan struct{})
	var once sync.Once
	r := h.start(bus.Renderer, "r0", bus.HandlerFunc(func(ctx context.Context, _ bus.Request) (bus.Result, error) {
		once.Do(func() { close(started) })
		<-ctx.Done() // a handler that would run forever
		return bus.Result{}, ctx.Err()
	}), bus.WithDrainTimeout(100*time.Millisecond))
	pub := h.publisher()
	if err := pub.Publish(t.Context(), bus.Renderer, event(uid(1), 1)); err != nil {
		t.Fatal(err)
	}
	<-started
	begin := time.Now()
	r.stop()
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("graceful stop took %s with a 100ms drain timeout", took)
	}
	if n := h.workPending(bus.Renderer); n != 1 {
		t.Errorf("%d messages pending after the drain gave up; want the cancelled one back", n)
	}
	if dls, _ := bus.ListDeadLetters(t.Context(), h.js, ""); len(dls) != 0 {
		t.Errorf("a cancelled handling was dead-lettered: %+v", dls)
	}
}

// A handler that outlives its timeout fails like any error: retried, then
// dead-lettered with the cause.
func TestHandlerTimeout(t *testing.T) {
	h := newHarness(t, testConfig())
	var calls atomic.Int32
	h.start(bus.Renderer, "r0", bus.HandlerFunc(func(ctx context.Context, _ bus.Request) (bus.Result, error) {
		calls.Add(1)
		<-ctx.Done()
		return bus.Result{}, fmt.Errorf("cannot run function: %w", ctx.Err())
	}), bus.WithHandlerTimeout(50*time.Millisecond),
		bus.WithBackoff(func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }))
	pub := h.publisher()
	if err := pub.Publish(t.Context(), bus.Renderer, event(uid(1), 1)); err != nil {
		t.Fatal(err)
	}
	var dls []bus.DeadLetter
	poll.True(t, 10*time.Second, "the timed-out event to be dead-lettered", func() bool {
		dls, _ = bus.ListDeadLetters(t.Context(), h.js, bus.Renderer)
		return len(dls) == 1
	})
	if want := "failed 3 deliveries; last error: cannot run function: context deadline exceeded"; dls[0].Reason != want {
		t.Errorf("reason %q, want %q", dls[0].Reason, want)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("handled %d times, want MaxDeliver (3)", n)
	}
}

// A resync never displaces a queued request: it goes to its target's
// resync lane, where it is stored only if no resync of the target is
// queued there (replacing that one would move the target to the back of
// the lane, and a target resynced more often than a backlog drains would
// never be handled). A change still replaces a queued change.
func TestResyncKeepsQueuedRequest(t *testing.T) {
	h := newHarness(t, testConfig())
	p := h.publisher()
	resync := func(id string, rv int) *eventsv1.Event {
		ev := event(id, rv)
		ev.Type = eventsv1.EventType_EVENT_TYPE_RESYNC
		return ev
	}
	publish := func(ev *eventsv1.Event) {
		t.Helper()
		if err := p.Publish(t.Context(), bus.Renderer, ev); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(t.Context()); err != nil {
			t.Fatalf("publishing %s of %s: %v", ev.GetType(), ev.GetObject().GetUid(), err)
		}
	}
	state := func() (first, last, msgs uint64) {
		t.Helper()
		s, err := h.js.Stream(t.Context(), bus.StreamName(bus.Renderer))
		if err != nil {
			t.Fatal(err)
		}
		st := s.CachedInfo().State
		return st.FirstSeq, st.LastSeq, st.Msgs
	}

	publish(event(uid(1), 1))
	publish(resync(uid(1), 1))
	if first, last, msgs := state(); first != 1 || last != 2 || msgs != 2 {
		t.Errorf("after a resync of a target with a queued change: first=%d last=%d msgs=%d; want the change kept and the resync stored in its lane (1, 2, 2)", first, last, msgs)
	}
	publish(resync(uid(1), 2))
	if first, last, msgs := state(); first != 1 || last != 2 || msgs != 2 {
		t.Errorf("after a resync of a target with a queued resync: first=%d last=%d msgs=%d; want the queued resync kept (1, 2, 2)", first, last, msgs)
	}
	publish(event(uid(1), 2))
	if first, last, msgs := state(); first != 2 || last != 3 || msgs != 2 {
		t.Errorf("after a change of a target with a queued change: first=%d last=%d msgs=%d; want it replaced (2, 3, 2)", first, last, msgs)
	}
	publish(resync(uid(2), 7))
	if _, last, msgs := state(); last != 4 || msgs != 3 {
		t.Errorf("after a resync of a target with nothing queued: last=%d msgs=%d; want it stored (4, 3)", last, msgs)
	}
}

// A resync carries a publish expectation (no request queued for its target).
// It belongs to that publish only: a requeued or dead-lettered copy must not
// carry it, or the stream refuses the copy and the message is retried forever.
func TestResyncRequeuedAndDeadLettered(t *testing.T) {
	h := newHarness(t, testConfig())
	var calls sync.Map // uid -> *atomic.Int32
	h.start(bus.Secrets, "s0", bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
		n, _ := calls.LoadOrStore(r.Target.GetUid(), new(atomic.Int32))
		if n.(*atomic.Int32).Add(1) == 1 {
			return bus.Result{RequeueAfter: 10 * time.Millisecond}, nil
		}
		return bus.Result{}, reconcile.Terminal(fmt.Errorf("invalid composition"))
	}))
	pub := h.publisher()
	for i := 1; i <= 2; i++ {
		ev := event(uid(i), 1)
		ev.Type = eventsv1.EventType_EVENT_TYPE_RESYNC
		if err := pub.Publish(t.Context(), bus.Secrets, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "both resyncs requeued, then dead-lettered", func() bool {
		dls, err := bus.ListDeadLetters(t.Context(), h.js, bus.Secrets)
		return err == nil && len(dls) == 2 && h.workPending(bus.Secrets) == 0
	})
}

// Events published while the server is down are not lost: their
// acknowledgements fail or come late, the Publisher sends them again, and
// Flush reports success once each is stored, exactly once.
func TestPublishSurvivesServerOutage(t *testing.T) {
	h := newHarness(t, testConfig())
	pub := h.publisher()
	// The first event checks the stream's partitions, which needs the server.
	if err := pub.Publish(t.Context(), bus.Renderer, event(uid(0), 1)); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.srv.Stop()
	const n = 50
	for i := 1; i <= n; i++ {
		if err := pub.Publish(t.Context(), bus.Renderer, event(uid(i), 1)); err != nil {
			t.Fatalf("Publish while the server is down: %v", err)
		}
	}
	if err := h.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := pub.Flush(ctx); err != nil {
		t.Fatalf("Flush after the outage: %v", err)
	}
	_, js := bustest.Connect(t, h.srv.URL())
	s, err := js.Stream(t.Context(), bus.StreamName(bus.Renderer))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().State.Msgs; got != n+1 {
		t.Errorf("the stream holds %d events; want the %d published, each once", got, n+1)
	}
}

// A partition whose lease cannot be taken (here: the leases bucket refuses
// writes for a while) is tried again soon, not only at the next renewal
// tick, which with a long lease TTL would leave it unserved for a quarter of
// that TTL.
func TestLeaseRetriedSoonAfterFailure(t *testing.T) {
	cfg := testConfig()
	cfg.LeaseTTL = 4 * time.Minute // renewal tick: one minute
	h := newHarness(t, cfg)
	ctx := t.Context()
	leases, err := h.js.KeyValue(ctx, bus.LeasesBucket)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := h.js.Stream(ctx, "KV_"+bus.LeasesBucket)
	if err != nil {
		t.Fatal(err)
	}
	// A bucket full of one entry refuses every new key.
	if _, err := leases.Put(ctx, "blocker", nil); err != nil {
		t.Fatal(err)
	}
	open := stream.CachedInfo().Config
	full := open
	full.MaxMsgs = 1
	if _, err := h.js.UpdateStream(ctx, full); err != nil {
		t.Fatal(err)
	}

	failures := &logCounter{msg: "cannot take lease"}
	o := newOwnership()
	h.start(bus.Renderer, "r0", bus.HandlerFunc(func(context.Context, bus.Request) (bus.Result, error) { return bus.Result{}, nil }),
		bus.WithLogger(slog.New(failures)), o.hook("r0"))
	poll.True(t, 10*time.Second, "a lease refused", func() bool { return failures.n.Load() > 0 })

	if _, err := h.js.UpdateStream(ctx, open); err != nil {
		t.Fatal(err)
	}
	// Well before the next renewal tick.
	poll.True(t, 20*time.Second, "every partition owned", func() bool { n, _ := o.state(); return n == cfg.Partitions })
}

// logCounter is a slog.Handler that counts records with one message.
type logCounter struct {
	msg string
	n   atomic.Int64
}

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == c.msg {
		c.n.Add(1)
	}
	return nil
}
func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCounter) WithGroup(string) slog.Handler      { return c }

// A handler that asks to wait (Result.Wait) gives its slot up: another
// target runs meanwhile in a worker of one slot, a newer event for the held
// target is folded into it, and closing the channel runs it once more, with
// the newest event; a hold that nobody ends lasts RequeueAfter.
func TestHoldGivesSlotUp(t *testing.T) {
	h := newHarness(t, heldConfig())
	gate := make(chan struct{})
	var (
		mu   sync.Mutex
		runs = map[string][]string{} // resourceVersions handled, by target UID
	)
	h.start(bus.Renderer, "r0", bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		id := r.Target.GetUid()
		runs[id] = append(runs[id], r.Event.GetResourceVersion())
		switch {
		case id == uid(1) && len(runs[id]) == 1:
			return bus.Result{Wait: gate, RequeueAfter: time.Hour}, nil
		case id == uid(3) && len(runs[id]) == 1:
			return bus.Result{Wait: make(chan struct{}), RequeueAfter: 200 * time.Millisecond}, nil
		}
		return bus.Result{}, nil
	}), bus.WithConcurrency(1))
	count := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		return len(runs[id])
	}
	pub := h.publisher()
	if err := pub.Publish(t.Context(), bus.Renderer, event(uid(1), 1)); err != nil {
		t.Fatal(err)
	}
	poll.True(t, arrival, "the first run of the held target", func() bool { return count(uid(1)) == 1 })
	for _, ev := range []*eventsv1.Event{event(uid(2), 1), event(uid(3), 1), event(uid(1), 2)} {
		if err := pub.Publish(t.Context(), bus.Renderer, ev); err != nil {
			t.Fatal(err)
		}
	}
	poll.True(t, arrival, "another target to run in the only slot while the first is held", func() bool { return count(uid(2)) == 1 })
	poll.True(t, arrival, "a hold nobody ends to last its RequeueAfter", func() bool { return count(uid(3)) == 2 })
	if n := count(uid(1)); n != 1 {
		t.Fatalf("the held target ran %d times before its channel was closed; want 1", n)
	}
	close(gate)
	poll.True(t, arrival, "the held target to run again and every event to be settled", func() bool {
		return count(uid(1)) == 2 && h.workPending(bus.Renderer) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if got := runs[uid(1)]; got[1] != "2" {
		t.Errorf("the held target ran again with resourceVersions %v; want the newest event (2) second", got)
	}
	if dls, _ := bus.ListDeadLetters(t.Context(), h.js, ""); len(dls) != 0 {
		t.Errorf("held events dead-lettered: %+v", dls)
	}
}

// A hand-over (an event carrying a Publication) is never lost to the events
// of its target that follow it: neither in the stream, which keeps one
// message per subject, nor in the worker, which folds events that wait for
// the same target into the newest. The handler sees it with the newest
// version.
func TestHandOverKeptAcrossEvents(t *testing.T) {
	h := newHarness(t, heldConfig())
	release := make(chan struct{})
	var (
		mu   sync.Mutex
		runs []string // resourceVersion, and "+p" when the run saw the hand-over
	)
	r0 := h.start(bus.Renderer, "r0", bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
		run := r.Event.GetResourceVersion()
		if r.Event.GetPublication() != nil {
			run += "+p"
		}
		mu.Lock()
		runs = append(runs, run)
		first := len(runs) == 1
		mu.Unlock()
		if first {
			// Hold the first run so that what follows waits behind it.
			return bus.Result{}, awaitRelease(ctx, release)
		}
		return bus.Result{}, nil
	}))
	poll.True(t, 5*time.Second, "the replica to own every partition", func() bool {
		return len(r0.w.Owned()) == h.cfg.Partitions
	})
	pub := h.publisher()
	publish := func(ev *eventsv1.Event) {
		t.Helper()
		if err := pub.Publish(t.Context(), bus.Renderer, ev); err != nil {
			t.Fatal(err)
		}
		if err := pub.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	publish(event(uid(1), 1))
	poll.True(t, 5*time.Second, "the first run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) == 1
	})
	handOver := event(uid(1), 2)
	handOver.Type = eventsv1.EventType_EVENT_TYPE_REQUEUE
	handOver.Publication = &eventsv1.Publication{Status: "True", Reason: "Published"}
	publish(handOver)
	for rv := 3; rv <= 5; rv++ {
		publish(event(uid(1), rv))
	}
	close(release)
	poll.True(t, 10*time.Second, "the newest version's run and an empty stream", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) > 1 && strings.HasPrefix(runs[len(runs)-1], "5") && h.workPending(bus.Renderer) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	saw := false
	for _, r := range runs[1:] {
		saw = saw || strings.HasSuffix(r, "+p")
	}
	if !saw {
		t.Errorf("runs %v: no run after the first saw the hand-over", runs)
	}
}

// awaitRelease holds a handler run until release is closed, or fails it
// when its context ends first.
func awaitRelease(ctx context.Context, release <-chan struct{}) error {
	select {
	case <-release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestArrivalsSeeEveryEvent: WithArrivals sees each request as it arrives,
// while every handler slot is busy, not when a slot frees.
func TestArrivalsSeeEveryEvent(t *testing.T) {
	h := newHarness(t, heldConfig())
	const n = 40 // fewer than the lookahead, so that every one is pulled
	release := make(chan struct{})
	var (
		mu      sync.Mutex
		arrived = map[string]int{}
		handled int
	)
	r0 := h.start(bus.Renderer, "r0", bus.HandlerFunc(func(ctx context.Context, r bus.Request) (bus.Result, error) {
		mu.Lock()
		handled++
		first := handled == 1
		mu.Unlock()
		if first {
			return bus.Result{}, awaitRelease(ctx, release)
		}
		return bus.Result{}, nil
	}), bus.WithConcurrency(1), bus.WithArrivals(func(r bus.Request) {
		mu.Lock()
		arrived[r.Target.GetUid()]++
		mu.Unlock()
	}))
	poll.True(t, 5*time.Second, "the replica to own every partition", func() bool {
		return len(r0.w.Owned()) == h.cfg.Partitions
	})
	pub := h.publisher()
	for i := 1; i <= n; i++ {
		if err := pub.Publish(t.Context(), bus.Renderer, event(uid(i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "every request to arrive while the one handler slot is busy", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(arrived) == n
	})
	mu.Lock()
	if handled != 1 {
		t.Errorf("handled %d requests before the release; want 1", handled)
	}
	for u, c := range arrived {
		if c != 1 {
			t.Errorf("request for %s arrived %d times; want once", u, c)
		}
	}
	mu.Unlock()
	close(release)
	poll.True(t, 10*time.Second, "every request to be handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled == n
	})
}
