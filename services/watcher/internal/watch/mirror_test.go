package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/loomxr/loom/pkg/bus/bustest"
	"github.com/loomxr/loom/pkg/mirror"
	"github.com/loomxr/loom/pkg/objjson"
	"github.com/loomxr/loom/pkg/testing/poll"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/object"
	"github.com/loomxr/loom/services/watcher/internal/route"
)

// mirrorChecker is a Publisher that reads the mirror as each event is
// published, as a worker would on receiving it, and records what it found:
// the mirror must hold the object an event names, at least at the event's
// resourceVersion, by the time the event is published (for a deletion: no
// longer hold it).
type mirrorChecker struct {
	recorder
	r *mirror.Reader

	mu    sync.Mutex
	found map[string]mirror.State // by "<type> <name>@<rv>"
}

func (c *mirrorChecker) Publish(ctx context.Context, service string, ev *eventsv1.Event) error {
	o := ev.GetObject()
	gvk := schema.GroupVersionKind{Group: o.GetGroup(), Version: o.GetVersion(), Kind: o.GetKind()}
	_, state, err := c.r.Get(ctx, gvk, o.GetNamespace(), o.GetName(), ev.GetResourceVersion())
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.found == nil {
		c.found = map[string]mirror.State{}
	}
	c.found[fmt.Sprintf("%s %s@%s", ev.GetType(), o.GetName(), ev.GetResourceVersion())] = state
	c.mu.Unlock()
	return c.recorder.Publish(ctx, service, ev)
}

// states returns what the mirror held as each event was published.
func (c *mirrorChecker) states() map[string]mirror.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.found)
}

// checkMirrored fails the test unless the mirror held the object each
// published event names (and no longer held a deleted one) as it was
// published.
func (c *mirrorChecker) checkMirrored(t *testing.T) {
	t.Helper()
	for k, state := range c.states() {
		want := mirror.Fresh
		if strings.HasPrefix(k, eventsv1.EventType_EVENT_TYPE_DELETED.String()) {
			want = mirror.Unknown
		}
		if state != want {
			t.Errorf("event %s was published while the mirror held the object as %s, want %s", k, state, want)
		}
	}
}

// flakyMirror is the real mirror writer that fails every Put while fail is
// set, as it would while JetStream is unreachable.
type flakyMirror struct {
	*mirror.Writer
	fail atomic.Bool
}

var errUnreachable = errors.New("JetStream is unreachable")

func (f *flakyMirror) Put(ctx context.Context, u *unstructured.Unstructured) error {
	if f.fail.Load() {
		return errUnreachable
	}
	return f.Writer.Put(ctx, u)
}

func (f *flakyMirror) PutJSON(ctx context.Context, gk schema.GroupKind, namespace, name string, data []byte) error {
	if f.fail.Load() {
		return errUnreachable
	}
	return f.Writer.PutJSON(ctx, gk, namespace, name, data)
}

func (f *flakyMirror) Send(gk schema.GroupKind, namespace, name string, data []byte) mirror.Pending {
	if f.fail.Load() {
		return mirror.Done(errUnreachable)
	}
	return f.Writer.Send(gk, namespace, name, data)
}

// withheld returns the sum of the watcher's withheld-events counter.
func withheld(t *testing.T, r *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(t.Context(), &rm); err != nil {
		t.Fatalf("cannot collect metrics: %v", err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "loom.watcher.mirror.withheld" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				n += dp.Value
			}
		}
	}
	return n
}

// composedNop is a composed NopResource, the one of its XR (whose UID is
// <name>-xr), so that a resync names each NopResource.
func composedNop(name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvkNop)
	u.SetName(name)
	u.SetUID(types.UID(name + "-uid"))
	u.SetResourceVersion(rv)
	u.SetLabels(map[string]string{"crossplane.io/composite": name + "-xr"})
	controller := true
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.org/v1", Kind: "XR", Name: name + "-xr", UID: types.UID(name + "-xr"), Controller: &controller}})
	_ = unstructured.SetNestedField(u.Object, "a value the watcher does not cache", "spec", "forProvider", "note")
	return u
}

// TestMirrorBeforePublish checks the order of a mirrored change: the watcher
// writes the object to the mirror and only then publishes the events that
// name it (deletions: purges, then publishes), so that a worker that hears
// of a change finds it in the mirror. A write that fails withholds the
// change's events and counts them; the next resync writes the object and
// publishes it. The API server is faked (the order is the watcher's alone;
// TestWatcherMirror runs it against a real one), NATS is real.
func TestMirrorBeforePublish(t *testing.T) {
	ctx := t.Context()
	var flaky *flakyMirror
	mw := runNopMirroring(t, func(w *mirror.Writer) Mirror {
		flaky = &flakyMirror{Writer: w}
		return flaky
	}, composedNop("a", "1"))
	pub, kv, metrics, client := mw.pub, mw.kv, mw.metrics, mw.client
	w := mw.w

	nops := client.Resource(gvrNop)
	pub.expect(t, 0, want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: "a-uid"})
	pub.checkMirrored(t)

	// The mirror holds the full object, not the watcher's trimmed copy.
	got, state, err := mirror.NewReader(kv).Get(ctx, gvkNop, "", "a", "1")
	if err != nil || state != mirror.Fresh {
		t.Fatalf("Get(a) = %s, %v; want Fresh", state, err)
	}
	if note, _, _ := unstructured.NestedString(got.Object, "spec", "forProvider", "note"); note == "" {
		t.Errorf("the mirror holds a trimmed object: %v", got.Object)
	}

	// A write that fails withholds the change's events.
	flaky.fail.Store(true)
	if _, err := nops.Create(ctx, composedNop("b", "2"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("cannot create b: %v", err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if n := withheld(t, metrics); n != 1 {
			return fmt.Errorf("withheld %d changes, want 1", n)
		}
		return nil
	})
	for _, p := range pub.since(0) {
		if p.ev.GetObject().GetName() == "b" {
			t.Errorf("published an event for an object the mirror could not hold: %s", dump([]published{p}))
		}
	}

	// The resync writes it, then publishes it.
	flaky.fail.Store(false)
	from := pub.len()
	if err := w.resync(ctx); err != nil {
		t.Fatalf("resync(): %v", err)
	}
	pub.expect(t, from, want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_RESYNC, object: "b-uid", rv: "2"})
	pub.checkMirrored(t)

	// A deletion purges, then publishes.
	if err := nops.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("cannot delete a: %v", err)
	}
	pub.expect(t, from, want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_DELETED, object: "a-uid"})
	pub.checkMirrored(t)
	if diff := cmp.Diff([]string{"nop_crossplane_io.NopResource._.b"}, mirrorKeys(t, kv)); diff != "" {
		t.Errorf("mirror keys: -want, +got:\n%s", diff)
	}
}

// nopMirroring is a watcher that mirrors NopResources, watched as composed
// resources, from a fake API server to a real JetStream bucket, and
// publishes to a mirrorChecker.
type nopMirroring struct {
	w       *Watcher
	pub     *mirrorChecker
	kv      jetstream.KeyValue
	metrics *sdkmetric.ManualReader
	client  *dynamicfake.FakeDynamicClient
}

// runNopMirroring starts a nopMirroring whose mirror wrap makes of the real
// writer, with objs on the API server, until the test ends.
func runNopMirroring(t *testing.T, wrap func(*mirror.Writer) Mirror, objs ...runtime.Object) nopMirroring {
	t.Helper()
	ctx := t.Context()
	_, js := bustest.Connect(t, bustest.Run(t).URL())
	kv, err := mirror.EnsureBucket(ctx, js, 1)
	if err != nil {
		t.Fatalf("EnsureBucket(): %v", err)
	}
	m := wrap(mirror.NewWriter(js, kv))
	pub := &mirrorChecker{r: mirror.NewReader(kv)}
	metrics := sdkmetric.NewManualReader()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvrNop: "NopResourceList"}, objs...)
	w := New(client, nil, nil, pub,
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		WithMirror(m),
		WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))))
	w.ctx = ctx
	w.live.Store(true)
	w.mu.Lock()
	w.start(gvkNop, route.RoleComposed, spec{gvr: gvrNop, full: true}, nil)
	w.mu.Unlock()
	t.Cleanup(w.stopAll)
	return nopMirroring{w: w, pub: pub, kv: kv, metrics: metrics, client: client}
}

// mirrorKeys returns the mirror's keys.
func mirrorKeys(t *testing.T, kv jetstream.KeyValue) []string {
	t.Helper()
	kl, err := kv.ListKeys(t.Context())
	if err != nil {
		t.Fatalf("ListKeys(): %v", err)
	}
	var out []string
	for k := range kl.Keys() {
		out = append(out, k)
	}
	return out
}

// TestKeepFull checks which object a mirrored source writes for a change:
// the one the API server sent, whatever the informer does with it before
// the handler sees the change.
func TestKeepFull(t *testing.T) {
	full := func(rv string) *unstructured.Unstructured { return composedNop("n", rv) }
	cases := map[string]struct {
		reason string
		// seen are the objects handed to the transform, in order: a
		// string is a resourceVersion the API server sent whole, "trim"
		// the transform's own last output handed back to it.
		seen []string
		rv   string
		want *unstructured.Unstructured
	}{
		"Once": {
			reason: "An object the transform sees once is written as it came.",
			seen:   []string{"5"},
			rv:     "5",
			want:   full("5"),
		},
		"WatchListTransformsTwice": {
			reason: "A watch-list reflector transforms each listed object, then its queue's Replace transforms the output again: the object written is the full one, not the trimmed copy.",
			seen:   []string{"5", "trim"},
			rv:     "5",
			want:   full("5"),
		},
		"NewerVersionReplaces": {
			reason: "A newer version seen before the older change is handled is kept for its own change; the older change has nothing to write.",
			seen:   []string{"5", "trim", "6"},
			rv:     "5",
			want:   full("6"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &source{spec: spec{full: true}}
			transform := s.keepFull(object.Transform(object.ShapeComposition))
			var last any
			for _, v := range tc.seen {
				in := last
				if v != "trim" {
					in = full(v)
				}
				out, err := transform(in)
				if err != nil {
					t.Fatalf("transform(): %v", err)
				}
				last = out
			}
			got, _ := s.takeFull(types.UID("n-uid"), tc.rv)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ntakeFull(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestKeepFullEncoded checks that a source holds at most maxDecodedFull
// full objects decoded and the rest encoded, so that a list's objects, all
// transformed before the handler takes the first, cost their JSON's memory;
// and that an object held encoded is taken as the one the API server sent,
// with the JSON the mirror is written.
func TestKeepFullEncoded(t *testing.T) {
	const n = maxDecodedFull + 10
	s := &source{gvk: gvkNop, spec: spec{full: true}}
	transform := s.keepFull(object.Transform(object.ShapeComposition))
	var sent []*unstructured.Unstructured
	for i := range n {
		u := composedNop(fmt.Sprintf("n%03d", i), "7")
		sent = append(sent, u.DeepCopy())
		if _, err := transform(u); err != nil {
			t.Fatalf("transform(): %v", err)
		}
	}
	encoded := 0
	for _, e := range s.mirror.full {
		if e.obj == nil && e.data != nil {
			encoded++
		}
	}
	if s.mirror.decoded != maxDecodedFull || encoded != n-maxDecodedFull {
		t.Errorf("held %d decoded and %d encoded; want %d and %d", s.mirror.decoded, encoded, maxDecodedFull, n-maxDecodedFull)
	}
	for i, want := range sent {
		got, data := s.takeFull(want.GetUID(), "7")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("takeFull(%s): -sent, +got:\n%s", want.GetName(), diff)
		}
		if i < maxDecodedFull != (data == nil) {
			t.Errorf("takeFull(%s): JSON %q; want it only for the objects held encoded (from the %dth on)", want.GetName(), data, maxDecodedFull+1)
		}
		if data != nil {
			dec, err := objjson.DecodeObject(data)
			if err != nil {
				t.Fatalf("takeFull(%s): JSON that does not decode: %v", want.GetName(), err)
			}
			if diff := cmp.Diff(want, dec); diff != "" {
				t.Errorf("takeFull(%s): JSON of another object: -sent, +decoded:\n%s", want.GetName(), diff)
			}
		}
	}
	if len(s.mirror.full) != 0 || s.mirror.decoded != 0 {
		t.Errorf("after taking every object, %d are held (%d decoded); want none", len(s.mirror.full), s.mirror.decoded)
	}
}
