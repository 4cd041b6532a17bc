package watch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/loomxr/loom/pkg/mirror"
	"github.com/loomxr/loom/pkg/testing/poll"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/route"
)

// gatedMirror is the real mirror writer whose answers to sent writes wait
// until the gate of their send is opened, and which loses the sends it is
// told to (answering them with a failure, as a broken connection would).
type gatedMirror struct {
	*mirror.Writer
	retries atomic.Int32 // PutJSON calls: writes sent again at once

	mu    sync.Mutex
	sends int
	lose  map[int]bool // by send, counted from 1
	gate  chan struct{}
}

func (g *gatedMirror) Send(gk schema.GroupKind, namespace, name string, data []byte) mirror.Pending {
	g.mu.Lock()
	g.sends++
	lose, gate := g.lose[g.sends], g.gate
	g.mu.Unlock()
	p := mirror.Done(errUnreachable)
	if !lose {
		p = g.Writer.Send(gk, namespace, name, data)
	}
	return gated{p: p, gate: gate}
}

func (g *gatedMirror) PutJSON(ctx context.Context, gk schema.GroupKind, namespace, name string, data []byte) error {
	g.retries.Add(1)
	return g.Writer.PutJSON(ctx, gk, namespace, name, data)
}

// hold makes the answers of the next sends wait for open, and loses the
// sends numbered lose.
func (g *gatedMirror) hold(lose ...int) (open func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gate := make(chan struct{})
	g.gate = gate
	g.lose = map[int]bool{}
	for _, n := range lose {
		g.lose[n] = true
	}
	return func() { close(gate) }
}

func (g *gatedMirror) sent() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sends
}

type gated struct {
	p    mirror.Pending
	gate <-chan struct{}
}

func (x gated) Wait(ctx context.Context) error {
	select {
	case <-x.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return x.p.Wait(ctx)
}

// nopAt is composedNop at a resourceVersion, its spec naming the version.
func nopAt(name, rv string) *unstructured.Unstructured {
	u := composedNop(name, rv)
	_ = unstructured.SetNestedField(u.Object, "version "+rv, "spec", "forProvider", "note")
	return u
}

// TestMirrorPipeline checks that the handler sends a source's mirror writes
// without waiting for their answers, and that the source's changes are
// still published in order, each only once its own write is stored: a
// source with many changes no longer waits a round trip to JetStream per
// change. A lost write is sent again at once when it is the object's last,
// and is superseded (its change withheld, no write sent again) when a
// newer write of the object was sent after it; the mirror never holds an
// older version over a newer one. NATS is real; the API server is faked.
func TestMirrorPipeline(t *testing.T) {
	ctx := t.Context()
	var gm *gatedMirror
	var open func()
	const listed = 3
	var initial []runtime.Object
	for i := range listed {
		initial = append(initial, nopAt(fmt.Sprintf("l%d", i), "1"))
	}
	mw := runNopMirroring(t, func(w *mirror.Writer) Mirror {
		gm = &gatedMirror{Writer: w}
		open = gm.hold()
		return gm
	}, initial...)
	pub, kv, metrics, client := mw.pub, mw.kv, mw.metrics, mw.client
	mw.w.mu.RLock()
	s := mw.w.sources[gvkNop]
	mw.w.mu.RUnlock()

	// The source is not synced until the initial list's writes are
	// answered and its changes finished.
	poll.Until(t, 10*time.Second, func() error {
		if got := gm.sent(); got != listed {
			return fmt.Errorf("%d writes sent while none was answered, want %d", got, listed)
		}
		return nil
	})
	if s.synced() {
		t.Errorf("source reports synced while the %d listed objects' writes wait for their answers", listed)
	}
	open()
	poll.Until(t, 10*time.Second, func() error {
		if !s.synced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})

	// Twenty creations are all sent while no answer has come, and none is
	// published before its answer.
	const n = 20
	from := pub.len()
	open = gm.hold()
	nops := client.Resource(gvrNop)
	for i := range n {
		if _, err := nops.Create(ctx, nopAt(fmt.Sprintf("n%02d", i), "1"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("cannot create n%02d: %v", i, err)
		}
	}
	poll.Until(t, 10*time.Second, func() error {
		if got := gm.sent(); got != listed+n {
			return fmt.Errorf("%d writes sent while none was answered, want %d", got-listed, n)
		}
		return nil
	})
	if got := pub.len() - from; got != 0 {
		t.Fatalf("%d events published before any mirror write was answered:\n%s", got, dump(pub.since(from)))
	}
	open()
	var wants []want
	for i := range n {
		wants = append(wants, want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: types.UID(fmt.Sprintf("n%02d-uid", i))})
	}
	pub.expect(t, from, wants...)
	pub.checkMirrored(t)
	var order []string
	for _, p := range pub.since(from) {
		if name := p.ev.GetObject().GetName(); len(order) == 0 || order[len(order)-1] != name {
			order = append(order, name)
		}
	}
	if len(order) != n {
		t.Fatalf("events name the objects in the order %v; want each object's events together, in the order the objects were created", order)
	}
	for i, name := range order {
		if want := fmt.Sprintf("n%02d", i); name != want {
			t.Fatalf("events name the objects in the order %v; want n00 to n%02d: a source's changes are published in the order they came", order, n-1)
		}
	}

	// Two changes of one object: the first write is lost, the second is
	// stored. The first is not sent again (it would put version 2 over
	// version 3); its change is withheld.
	from = pub.len()
	open = gm.hold(listed + n + 1)
	if _, err := nops.Update(ctx, nopAt("n00", "2"), metav1.UpdateOptions{}); err != nil {
		t.Fatalf("cannot update n00: %v", err)
	}
	if _, err := nops.Update(ctx, nopAt("n00", "3"), metav1.UpdateOptions{}); err != nil {
		t.Fatalf("cannot update n00: %v", err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if got := gm.sent(); got != listed+n+2 {
			return fmt.Errorf("%d writes sent, want %d", got, listed+n+2)
		}
		return nil
	})
	open()
	pub.expect(t, from, want{service: route.Renderer, object: "n00-uid", rv: "3"})
	poll.Until(t, 10*time.Second, func() error {
		if got := withheld(t, metrics); got != 1 {
			return fmt.Errorf("withheld %d changes, want 1 (the lost write's)", got)
		}
		return nil
	})
	if got := gm.retries.Load(); got != 0 {
		t.Errorf("sent %d writes again; want none: a newer write of the object was sent after the lost one", got)
	}
	for _, p := range pub.since(from) {
		if p.ev.GetResourceVersion() == "2" {
			t.Errorf("published a change whose write was lost: %s", dump([]published{p}))
		}
	}
	assertMirrored(t, kv, "n00", "3")
	if s.failing("n00-uid") {
		t.Errorf("n00 counts as failing; its last write was stored")
	}

	// A lost write that is the object's last is sent again at once, and its
	// change is published.
	from = pub.len()
	open = gm.hold(listed + n + 3)
	open()
	if _, err := nops.Update(ctx, nopAt("n00", "4"), metav1.UpdateOptions{}); err != nil {
		t.Fatalf("cannot update n00: %v", err)
	}
	pub.expect(t, from, want{service: route.Renderer, object: "n00-uid", rv: "4"})
	pub.checkMirrored(t)
	if got := gm.retries.Load(); got != 1 {
		t.Errorf("sent %d writes again, want 1", got)
	}
	if got := withheld(t, metrics); got != 1 {
		t.Errorf("withheld %d changes, want still 1", got)
	}
	assertMirrored(t, kv, "n00", "4")
}

// assertMirrored fails the test unless the mirror holds the NopResource
// name at exactly resourceVersion rv.
func assertMirrored(t *testing.T, kv jetstream.KeyValue, name, rv string) {
	t.Helper()
	got, state, err := mirror.NewReader(kv).Get(t.Context(), gvkNop, "", name, rv)
	if err != nil || state != mirror.Fresh || got.GetResourceVersion() != rv {
		t.Fatalf("mirror holds %s as %s (%v); want it Fresh at resourceVersion %s", name, state, err, rv)
	}
}
