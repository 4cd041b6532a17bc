package bus_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/testing/poll"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// blocker is a handler that records the targets it handles, in order, and
// holds its first call until released.
type blocker struct {
	mu      sync.Mutex
	order   []string
	urgent  map[string]bool
	types   map[string]eventsv1.EventType
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlocker() *blocker {
	return &blocker{urgent: map[string]bool{}, types: map[string]eventsv1.EventType{}, started: make(chan struct{}), release: make(chan struct{})}
}

func (b *blocker) Handle(ctx context.Context, r bus.Request) (bus.Result, error) {
	first := false
	b.once.Do(func() { first = true; close(b.started) })
	if first {
		select {
		case <-b.release:
		case <-ctx.Done():
			return bus.Result{}, ctx.Err()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.order = append(b.order, r.Target.GetUid())
	b.urgent[r.Target.GetUid()] = r.Event.GetUrgent()
	b.types[r.Target.GetUid()] = r.Event.GetType()
	return bus.Result{}, nil
}

func (b *blocker) handled() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.order)
}

// delivered reports whether the consumer of uid's partition (urgent lane
// or not) has a message delivered to its worker and not yet acknowledged.
func (h *harness) delivered(t *testing.T, service, id string, urgent bool) bool {
	t.Helper()
	p := bus.Partition(id, h.cfg.Partitions)
	name := bus.ConsumerName(service, p)
	if urgent {
		name = bus.UrgentConsumerName(service, p)
	}
	c, err := h.js.Consumer(t.Context(), bus.StreamName(service), name)
	if err != nil {
		return false
	}
	info, err := c.Info(t.Context())
	return err == nil && info.NumAckPending > 0
}

// publishAll publishes events and waits for the server's acknowledgements.
func publishAll(t *testing.T, p *bus.Publisher, evs ...*eventsv1.Event) {
	t.Helper()
	for _, ev := range evs {
		if err := p.Publish(t.Context(), bus.Renderer, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func urgent(ev *eventsv1.Event) *eventsv1.Event { ev.Urgent = true; return ev }

// An urgent request is handled before the backlog of its own and every other
// partition: with one handler slot busy and a request of every partition
// waiting for it, the urgent one that arrives last is handled next.
func TestUrgentLaneFirst(t *testing.T) {
	h := newHarness(t, heldConfig())
	p := h.publisher()
	b := newBlocker()
	// The first request occupies the only slot; then one request per
	// partition waits, each delivered before the urgent one is published.
	var backlog []*eventsv1.Event
	for i := range 40 {
		backlog = append(backlog, event(uid(i), 1))
	}
	publishAll(t, p, backlog[0])
	r := h.start(bus.Renderer, "r0", b, bus.WithConcurrency(1))
	<-b.started
	publishAll(t, p, backlog[1:]...)
	poll.True(t, arrival, "a request of every partition delivered", func() bool {
		n := 0
		for pt := range h.cfg.Partitions {
			if h.delivered(t, bus.Renderer, firstOf(h, pt), false) {
				n++
			}
		}
		return n >= h.cfg.Partitions-1 // the busy target's partition holds its next request back too
	})
	hot := uid(1000)
	publishAll(t, p, urgent(event(hot, 1)))
	poll.True(t, arrival, "the urgent request waiting", func() bool { u, _ := r.w.Waiting(); return u == 1 })
	close(b.release)
	poll.True(t, arrival, "every request handled", func() bool { return len(b.handled()) == 41 })
	got := b.handled()
	if got[0] != uid(0) || got[1] != hot {
		t.Errorf("handled %v...; want %s (busy) then the urgent %s before any of the %d waiting", got[:3], uid(0), hot, len(got)-2)
	}
}

// firstOf returns a target UID of the backlog in partition pt.
func firstOf(h *harness, pt int) string {
	for i := range 40 {
		if bus.Partition(uid(i), h.cfg.Partitions) == pt {
			return uid(i)
		}
	}
	return uid(0)
}

// An urgent event for a target whose request already waits for a handler
// slot makes that wait urgent: the target is handled next, with the urgent
// event.
func TestUrgentLaneUpgradesWaitingTarget(t *testing.T) {
	h := newHarness(t, heldConfig())
	p := h.publisher()
	b := newBlocker()
	busy := uid(0)
	publishAll(t, p, event(busy, 1))
	r := h.start(bus.Renderer, "r0", b, bus.WithConcurrency(1))
	<-b.started
	// Others wait first, in other partitions than the busy one and the
	// late one's.
	late := ""
	var others []string
	for i := 1; len(others) < 8 || late == ""; i++ {
		id := uid(i)
		pt := bus.Partition(id, h.cfg.Partitions)
		switch {
		case pt == bus.Partition(busy, h.cfg.Partitions):
		case late == "":
			late = id
		case pt != bus.Partition(late, h.cfg.Partitions) && !slices.ContainsFunc(others, func(o string) bool { return bus.Partition(o, h.cfg.Partitions) == pt }):
			others = append(others, id)
		}
	}
	for _, id := range others {
		publishAll(t, p, event(id, 1))
	}
	poll.True(t, arrival, "the others waiting", func() bool {
		for _, id := range others {
			if !h.delivered(t, bus.Renderer, id, false) {
				return false
			}
		}
		return true
	})
	publishAll(t, p, event(late, 1))
	// Waiting in the worker's scheduler, not only delivered to it: the
	// lanes' consumers hand their messages over concurrently, so a request
	// only delivered may still reach the scheduler after the urgent one
	// published next, as a target of its own.
	poll.True(t, arrival, "the late request waiting", func() bool {
		_, other := r.w.Waiting()
		return h.delivered(t, bus.Renderer, late, false) && other == len(others)+1
	})
	publishAll(t, p, urgent(event(late, 2)))
	poll.True(t, arrival, "the late request's wait made urgent", func() bool { u, _ := r.w.Waiting(); return u == 1 })
	close(b.release)
	poll.True(t, arrival, "every request handled", func() bool { return len(b.handled()) == len(others)+2 })
	got := b.handled()
	if got[1] != late {
		t.Errorf("handled %v; want %s handled right after the busy %s, before the %d that waited longer", got, late, busy, len(others))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.urgent[late] {
		t.Errorf("%s was handled with its earlier event; want the urgent one that arrived while it waited", late)
	}
}
