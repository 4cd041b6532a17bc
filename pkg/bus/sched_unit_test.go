package bus

import (
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/go-cmp/cmp"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

func TestFairQueue(t *testing.T) {
	cases := map[string]struct {
		reason string
		ops    []string // keys to push, "key" (normal lane) or "key!" (urgent lane); "-" pops
		want   []string // the entries popped, in order
	}{
		"OneKeyFIFO": {
			reason: "Entries of one key and lane come out in the order they went in.",
			ops:    []string{"a", "a", "a", "-", "-", "-", "-"},
			want:   []string{"a", "a", "a", ""},
		},
		"LateKeyWaitsOneTurn": {
			reason: "A key that joins behind a backlog of another is served after at most one entry of it.",
			ops:    []string{"a", "a", "a", "a", "b", "-", "-", "-", "-", "-"},
			want:   []string{"a", "b", "a", "a", "a"},
		},
		"RoundRobin": {
			reason: "Keys take turns, each in the order it joined.",
			ops:    []string{"a", "a", "b", "b", "c", "-", "-", "-", "-", "-"},
			want:   []string{"a", "b", "c", "a", "b"},
		},
		"JoinMidRound": {
			reason: "A key joining during a round is served after one turn of every other key, counted from the next.",
			ops:    []string{"a", "a", "b", "b", "-", "c", "-", "-", "-", "-"},
			want:   []string{"a", "b", "a", "c", "b"},
		},
		"UrgentFirstWithinKey": {
			reason: "A key's urgent entries pass its normal ones, whenever they came.",
			ops:    []string{"a", "a", "a!", "-", "-", "-"},
			want:   []string{"a!", "a", "a"},
		},
		"KeyBeforeLane": {
			reason: "Keys take turns whatever their lanes: a backlog of urgent entries of one key does not hold back another key's normal entry.",
			ops:    []string{"a!", "a!", "a!", "b", "-", "-", "-", "-"},
			want:   []string{"a!", "b", "a!", "a!"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := fairQueue{}
			var got []string
			for _, o := range tc.ops {
				if o != "-" {
					e := &entry{key: strings.TrimSuffix(o, "!"), lane: laneNormal}
					if strings.HasSuffix(o, "!") {
						e.lane = laneUrgent
					}
					q.push(e)
					continue
				}
				e := q.pop()
				switch {
				case e == nil:
					got = append(got, "")
				case e.lane == laneUrgent:
					got = append(got, e.key+"!")
				default:
					got = append(got, e.key)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\npop order: -want, +got:\n%s", tc.reason, diff)
			}
			if n := q.byLane[laneUrgent] + q.byLane[laneNormal]; (n == 0) != (len(q.ring) == 0) {
				t.Errorf("%d entries counted (%v by lane), ring %v", n, q.byLane, q.ring)
			}
		})
	}
}

func TestFairQueueRemove(t *testing.T) {
	q := fairQueue{}
	a1, a2, b1 := &entry{key: "a"}, &entry{key: "a"}, &entry{key: "b"}
	for _, e := range []*entry{a1, a2, b1} {
		q.push(e)
	}
	q.remove(b1)
	q.remove(a1)
	if got := q.pop(); got != a2 {
		t.Errorf("pop after removing a1 and b1: got %+v, want a2", got)
	}
	if got := q.pop(); got != nil || q.byLane != [4]int{} || len(q.ring) != 0 {
		t.Errorf("queue after removing and popping all: pop %+v, %v by lane, ring %v; want empty", got, q.byLane, q.ring)
	}
}

func TestNamespaceKey(t *testing.T) {
	ref := func(ns, name string) *eventsv1.ObjectRef {
		return &eventsv1.ObjectRef{Namespace: ns, Name: name, Uid: "u"}
	}
	cases := map[string]struct {
		reason string
		req    Request
		want   string
	}{
		"NamespacedTarget": {
			reason: "A namespaced target's tenant is its namespace.",
			req:    Request{Target: ref("team-a", "db"), Event: &eventsv1.Event{Object: ref("team-a", "db")}},
			want:   "ns/team-a",
		},
		"ClusterScopedTargetTenant": {
			reason: "A cluster-scoped target (an XR) takes the tenant its event names (its claim's namespace), whatever changed.",
			req:    Request{Target: ref("", "db-x7k2p"), Event: &eventsv1.Event{Object: ref("", "db-x7k2p-bucket"), Target: ref("", "db-x7k2p"), Tenant: "team-c"}},
			want:   "ns/team-c",
		},
		"ClusterScopedTargetNamespacedObject": {
			reason: "A cluster-scoped target changed through a namespaced object (its claim) takes that object's namespace.",
			req:    Request{Target: ref("", "db-x7k2p"), Event: &eventsv1.Event{Object: ref("team-b", "db"), Target: ref("", "db-x7k2p")}},
			want:   "ns/team-b",
		},
		"ClusterScopedGeneratedName": {
			reason: "A cluster-scoped target with nothing namespaced around it falls under its name without the generated suffix and bulk index.",
			req:    Request{Target: ref("", "import-0042-x7k2p"), Event: &eventsv1.Event{Object: ref("", "import-0042-x7k2p")}},
			want:   "name/import",
		},
		"ClusterScopedPlainName": {
			reason: "A name without dashes is its own key.",
			req:    Request{Target: ref("", "db"), Event: &eventsv1.Event{Object: ref("", "db")}},
			want:   "name/db",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NamespaceKey(tc.req)); diff != "" {
				t.Errorf("%s\nNamespaceKey: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestParseFairKey(t *testing.T) {
	req := Request{Target: &eventsv1.ObjectRef{Namespace: "a"}, Event: &eventsv1.Event{}}
	for s, want := range map[string]string{"namespace": "ns/a", "": "ns/a", "none": ""} {
		f, err := ParseFairKey(s)
		if err != nil {
			t.Fatalf("ParseFairKey(%q): %v", s, err)
		}
		if got := f(req); got != want {
			t.Errorf("ParseFairKey(%q) key: got %q, want %q", s, got, want)
		}
	}
	if _, err := ParseFairKey("tenant"); err == nil {
		t.Error("ParseFairKey(\"tenant\"): got no error, want one")
	}
}

// fakeClock is a settable clock for the guard.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

func testGuard(budget int) (*guard, *fakeClock) {
	c := &fakeClock{now: time.Unix(1_000_000, 0)}
	g := newGuard(func() backoff.BackOff {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval = time.Second
		b.Multiplier = 2
		b.RandomizationFactor = 0
		b.MaxInterval = 8 * time.Second
		b.MaxElapsedTime = 0
		b.Reset()
		return b
	}, budget)
	g.clock = c.Now
	return g, c
}

// The backoff of a failing target grows with its consecutive failures,
// whatever events bring it back, up to the cap, and a success resets it.
func TestGuardBackoffGrows(t *testing.T) {
	g, c := testGuard(0)
	var got []time.Duration
	for range 6 {
		g.begin("p")
		g.end("p", true)
		d, reason := g.delay("p")
		if reason != ThrottleBackoff {
			t.Fatalf("after a failure: reason %q, want %q", reason, ThrottleBackoff)
		}
		got = append(got, d)
		c.Advance(d)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delays after consecutive failures: -want, +got:\n%s", diff)
	}
	if !g.suspect("p") {
		t.Error("a failing target is not suspect")
	}
	g.begin("p")
	g.end("p", false)
	if d, _ := g.delay("p"); d != 0 {
		t.Errorf("delay after a success: got %s, want 0", d)
	}
	if !g.suspect("p") {
		t.Error("a target that failed less than a minute ago is no longer suspect")
	}
	c.Advance(suspectFor)
	if g.suspect("p") {
		t.Error("a target whose last failure is a minute old is still suspect")
	}
	if d, _ := g.delay("healthy"); d != 0 || g.suspect("healthy") {
		t.Errorf("a target never seen: delay %s, suspect %t; want 0, false", d, g.suspect("healthy"))
	}
}

// A target runs at most its budget in any minute, whatever the outcome; the
// next run may start when the oldest of the window is a minute old.
func TestGuardBudget(t *testing.T) {
	const budget = 5
	g, c := testGuard(budget)
	for range budget {
		if d, _ := g.delay("p"); d != 0 {
			t.Fatalf("delay within the budget: got %s, want 0", d)
		}
		g.begin("p")
		g.end("p", false)
		c.Advance(time.Second)
	}
	d, reason := g.delay("p")
	if want := budgetWindow - budget*time.Second; d != want || reason != ThrottleBudget {
		t.Errorf("delay beyond the budget: got %s (%s), want %s (%s)", d, reason, want, ThrottleBudget)
	}
	if !g.suspect("p") {
		t.Error("a throttled target is not suspect")
	}
	if got := g.peakRuns(); got != budget {
		t.Errorf("peak runs per minute: got %d, want %d", got, budget)
	}
	c.Advance(d)
	if d, _ := g.delay("p"); d != 0 {
		t.Errorf("delay once the oldest run left the window: got %s, want 0", d)
	}
}

// The resync lane takes main-pool slots only when no urgent or normal
// request waits, and never the last quarter of the pool; a resync request
// upgraded by a real change is served as one.
func TestSchedulerResyncLane(t *testing.T) {
	var got []string
	s := newScheduler(4, 1, nil)
	add := func(name string, ln lane) *entry {
		e := &entry{key: "ns/a", lane: ln, start: func(p pool) { got = append(got, name+"@"+p.String()) }}
		s.add(e)
		return e
	}
	step := func(what string, want ...string) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: grants -want, +got:\n%s", what, diff)
		}
		got = nil
	}

	for _, n := range []string{"r1", "r2", "r3", "r4"} {
		add(n, laneResync)
	}
	step("four resyncs with four free slots", "r1@resync", "r2@resync", "r3@resync")
	add("n1", laneNormal)
	step("a change with one slot left", "n1@main")
	add("n2", laneNormal)
	r5 := add("r5", laneResync)
	step("a change and a resync with no slot left")
	s.release(poolResync)
	step("a resync slot freed while a change waits", "n2@main")
	s.upgrade(r5, laneNormal)
	s.upgrade(r5, laneResync) // never downwards
	s.release(poolMain)
	step("a slot freed while an upgraded resync and an older resync wait", "r5@main")
	s.release(poolMain)
	step("a slot freed while only a resync waits", "r4@resync")
	if n := s.waiting(); n != [4]int{} {
		t.Errorf("waiting %v; want none", n)
	}
}
