package bus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/testing/poll"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// resync is a RESYNC event for an XR of tenant-a.
func resync(uid string) *eventsv1.Event {
	ev := inTenantA(event(uid, 1))
	ev.Type = eventsv1.EventType_EVENT_TYPE_RESYNC
	return ev
}

func inTenantA(ev *eventsv1.Event) *eventsv1.Event { ev.Object.Namespace = "tenant-a"; return ev }

// resyncConfig is testConfig with an ack wait longer than a test: a
// message the worker pulled but cannot take in yet (its lane's look-ahead
// is full, or the lane waits for the others) is not redelivered meanwhile,
// so that every target is handled exactly once.
func resyncConfig() bus.Config {
	cfg := heldConfig()
	cfg.AckWait = time.Minute
	return cfg
}

// resyncBacklog picks targets for a resync test: one that keeps the slot
// busy, and in another partition one that changes and n that are resynced.
func resyncBacklog(h *harness, n int) (busy, change string, backlog []*eventsv1.Event) {
	busy = uid(0)
	for i := 1; len(backlog) < n; i++ {
		id := uid(i)
		switch pt := bus.Partition(id, h.cfg.Partitions); {
		case pt == bus.Partition(busy, h.cfg.Partitions):
		case change == "":
			change = id
		case pt == bus.Partition(change, h.cfg.Partitions):
			backlog = append(backlog, resync(id))
		}
	}
	return busy, change, backlog
}

// startBusy starts a renderer with slots handler slots and the given
// look-ahead, and returns once b holds one of them with a change of busy.
func startBusy(t *testing.T, h *harness, p *bus.Publisher, b *blocker, busy string, slots, lookahead int) *replica {
	t.Helper()
	publishAll(t, p, inTenantA(event(busy, 1)))
	r := h.start(bus.Renderer, "r0", b, bus.WithConcurrency(slots), bus.WithLookahead(lookahead))
	<-b.started
	return r
}

// A resync never delays a real change: with the only handler slot busy and
// a backlog of resync events of one tenant waiting in one partition, a
// change of another target of that tenant and partition is handled as soon
// as a slot frees, before the backlog.
func TestResyncYieldsToChanges(t *testing.T) {
	cases := map[string]struct {
		reason    string
		lookahead int
		resyncs   int
	}{
		"LookaheadFull": {
			reason:    "More resyncs than the partition's look-ahead holds: the change must not wait behind them in the stream.",
			lookahead: 16,
			resyncs:   100,
		},
		"LookaheadRoom": {
			reason:    "Fewer resyncs than the look-ahead holds: the change must not wait behind them in its tenant's queue.",
			lookahead: 128,
			resyncs:   100,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			const slots = 1
			h := newHarness(t, resyncConfig())
			p := h.publisher()
			b := newBlocker()
			busy, change, backlog := resyncBacklog(h, tc.resyncs)
			r := startBusy(t, h, p, b, busy, slots, tc.lookahead)
			publishAll(t, p, backlog...)
			held := min(tc.resyncs, tc.lookahead)
			poll.True(t, arrival, "the resyncs the look-ahead holds waiting", func() bool { u, o := r.w.Waiting(); return u+o == held })

			publishAll(t, p, inTenantA(event(change, 1)))
			// The change should be received at once. Where resyncs fill
			// its lane's look-ahead it never is while the slot stays
			// busy: the handling order below then says so.
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_ = poll.Wait(ctx, func(context.Context) error {
				if u, o := r.w.Waiting(); u+o <= held {
					return errors.New("the change is not waiting")
				}
				return nil
			})
			close(b.release)
			poll.True(t, arrival, "every request handled", func() bool { return len(b.handled()) == tc.resyncs+2 })
			got := b.handled()
			if before := slices.Index(got, change) - 1; before > slots {
				t.Errorf("%s\nthe change was handled after %d of the %d resyncs; want at most %d (one per handler slot)", tc.reason, before, tc.resyncs, slots)
			}
		})
	}
}

// A change of a target whose resync waits for a slot replaces the resync
// and moves the target to the normal lane: it is handled next, once, with
// the change. A resync of a target whose change waits is acknowledged
// without a run of its own.
func TestResyncReplacedByChange(t *testing.T) {
	h := newHarness(t, resyncConfig())
	p := h.publisher()
	b := newBlocker()
	busy, _, backlog := resyncBacklog(h, 20)
	r := startBusy(t, h, p, b, busy, 1, bus.DefaultLookahead)
	publishAll(t, p, backlog...)
	poll.True(t, arrival, "the resyncs waiting", func() bool { _, o := r.w.Waiting(); return o == len(backlog) })

	last := backlog[len(backlog)-1].GetObject().GetUid()
	publishAll(t, p, inTenantA(event(last, 2)))
	poll.True(t, arrival, "the change received", func() bool { return h.delivered(t, bus.Renderer, last, false) })
	publishAll(t, p, resync(busy))
	poll.True(t, arrival, "the busy target's resync received and acknowledged", func() bool {
		c, err := h.js.Consumer(t.Context(), bus.StreamName(bus.Renderer), bus.ResyncConsumerName(bus.Renderer, bus.Partition(busy, h.cfg.Partitions)))
		if err != nil {
			return false
		}
		info, err := c.Info(t.Context())
		return err == nil && info.Delivered.Consumer == 1 && info.NumAckPending == 0
	})
	close(b.release)
	poll.Until(t, arrival, func() error {
		if n := len(b.handled()); n != len(backlog)+1 {
			return fmt.Errorf("%d of %d targets handled: %v", n, len(backlog)+1, b.handled())
		}
		return nil
	})
	got := b.handled()
	if got[1] != last {
		t.Errorf("handled %v; want %s right after the busy %s, before the %d resyncs that waited longer", got, last, busy, len(backlog)-1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if typ := b.types[last]; typ != eventsv1.EventType_EVENT_TYPE_MODIFIED {
		t.Errorf("%s was handled with a %s event; want the change that replaced its resync", last, typ)
	}
	if n := slices.Index(got[1:], busy); n >= 0 {
		t.Errorf("%s handled again (run %d) for a resync that came while its change ran; want the resync folded into that run", busy, n+2)
	}
}
