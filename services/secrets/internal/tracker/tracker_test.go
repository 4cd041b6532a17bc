package tracker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/loomxr/loom/pkg/testing/poll"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/secrets/internal/secret"
	"github.com/loomxr/loom/services/secrets/internal/staging"
)

// published is an event and the service it was published to.
type published struct {
	Service string
	Event   *eventsv1.Event
}

// recorder is a Publisher that records what it publishes.
type recorder struct {
	mu     sync.Mutex
	events []published
}

func (r *recorder) Publish(_ context.Context, service string, ev *eventsv1.Event) error {
	if service != "secrets" && service != "renderer" {
		return fmt.Errorf("published to %q", service)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, published{Service: service, Event: ev})
	return nil
}

// wait returns the events once there are n, failing t after a deadline.
func (r *recorder) wait(t *testing.T, n int) []published {
	t.Helper()
	var got []published
	poll.Until(t, 10*time.Second, func() error {
		r.mu.Lock()
		got = append([]published(nil), r.events...)
		r.mu.Unlock()
		if len(got) < n {
			return fmt.Errorf("published %d events, want %d", len(got), n)
		}
		return nil
	})
	if len(got) != n {
		t.Fatalf("published %d events, want %d", len(got), n)
	}
	return got
}

// owners is an OwnerReader over a fixed map of controllers.
type owners map[types.UID]*metav1.OwnerReference

func (o owners) Controller(_ context.Context, ref metav1.OwnerReference, _ string) (*metav1.OwnerReference, error) {
	return o[ref.UID], nil
}

func (o owners) Namespaced(gvk schema.GroupVersionKind) (bool, error) {
	return gvk.Kind != "XDB", nil
}

var xrGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "XDB"}

func secretMeta(ns, name, rv string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("s-" + name), ResourceVersion: rv, OwnerReferences: owners},
	}
}

// requeue is the event that requeues xr on the secrets stream.
func requeue(secretNS, secretName, rv string, xr Target) published {
	return published{Service: "secrets", Event: &eventsv1.Event{
		Object:          &eventsv1.ObjectRef{Version: "v1", Kind: "Secret", Namespace: secretNS, Name: secretName, Uid: "s-" + secretName},
		ResourceVersion: rv,
		Type:            eventsv1.EventType_EVENT_TYPE_REQUEUE,
		Target:          &eventsv1.ObjectRef{Group: xr.GVK.Group, Version: xr.GVK.Version, Kind: xr.GVK.Kind, Name: xr.Name, Uid: string(xr.UID)},
		Reason:          "connection secret changed",
		Source:          "secrets/0",
	}}
}

// render is the event that asks the renderer to render xr.
func render(secretNS, secretName, rv string, xr Target) published {
	p := requeue(secretNS, secretName, rv, xr)
	p.Service = "renderer"
	p.Event.Reason = "connection secret observed by composition functions changed"
	return p
}

// stagingMeta is the metadata of the staging Secret of xr.
func stagingMeta(rv string, xr Target) *metav1.PartialObjectMetadata {
	yes := true
	m := secretMeta("loom-system", "loom-fn-"+string(xr.UID), rv,
		metav1.OwnerReference{APIVersion: xr.GVK.GroupVersion().String(), Kind: xr.GVK.Kind, Name: xr.Name, UID: xr.UID, Controller: &yes})
	m.Labels = map[string]string{staging.LabelComposite: string(xr.UID), secret.LabelManagedBy: secret.ManagedBy}
	return m
}

// start runs a Tracker over a fake source until t ends.
func start(t *testing.T, src *fcache.FakeControllerSource, o ...Option) (*Tracker, *recorder) {
	t.Helper()
	inf := cache.NewSharedIndexInformer(src, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
	rec := &recorder{}
	tr := NewForInformer(inf, rec, Services{Secrets: "secrets", Renderer: "renderer"}, append([]Option{WithSource("secrets/0")}, o...)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	if !cache.WaitForCacheSync(t.Context().Done(), tr.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return tr, rec
}

// The fake source numbers resourceVersions itself.
var ignoreTime = protocmp.IgnoreFields(&eventsv1.Event{}, "observed_time", "resource_version")

func TestTracker(t *testing.T) {
	xr := Target{GVK: xrGVK, Name: "db", UID: "xr-1"}
	other := Target{GVK: xrGVK, Name: "cache", UID: "xr-2"}
	yes := true
	composed := metav1.OwnerReference{APIVersion: "nop.example.org/v1", Kind: "Nop", Name: "server", UID: "nop-1", Controller: &yes}
	unknownOwner := metav1.OwnerReference{APIVersion: "nop.example.org/v1", Kind: "Nop", Name: "lost", UID: "nop-9", Controller: &yes}

	cases := map[string]struct {
		reason string
		// initial Secrets, listed before the Tracker starts.
		initial []*metav1.PartialObjectMetadata
		options []Option
		// run tracks and changes Secrets.
		run  func(tr *Tracker, src *fcache.FakeControllerSource)
		want []published
	}{
		"NamedSecretChanged": {
			reason:  "A change of a Secret a composed resource names requeues its XR.",
			initial: []*metav1.PartialObjectMetadata{secretMeta("sys", "server-conn", "1")},
			run: func(tr *Tracker, src *fcache.FakeControllerSource) {
				tr.Track(xr, Deps{Secrets: []secret.Key{{Namespace: "sys", Name: "server-conn"}}})
				src.Modify(secretMeta("sys", "server-conn", "2"))
			},
			want: []published{requeue("sys", "server-conn", "2", xr)},
		},
		"OwnedSecretCreated": {
			reason:  "A new Secret controlled by a composed resource requeues the XR; the initial list requeues nothing.",
			initial: []*metav1.PartialObjectMetadata{secretMeta("sys", "listed", "1", composed)},
			run: func(tr *Tracker, src *fcache.FakeControllerSource) {
				tr.Track(xr, Deps{Composed: []types.UID{"nop-1"}})
				src.Add(secretMeta("sys", "fresh", "2", composed))
			},
			want: []published{requeue("sys", "fresh", "2", xr)},
		},
		"Deleted": {
			reason:  "A deleted Secret requeues the XRs that depend on it, each once, sorted by UID.",
			initial: []*metav1.PartialObjectMetadata{secretMeta("sys", "shared", "1")},
			run: func(tr *Tracker, src *fcache.FakeControllerSource) {
				tr.Track(other, Deps{Secrets: []secret.Key{{Namespace: "sys", Name: "shared"}}})
				tr.Track(xr, Deps{Secrets: []secret.Key{{Namespace: "sys", Name: "shared"}, {Namespace: "sys", Name: "shared"}}})
				src.Delete(secretMeta("sys", "shared", "3"))
			},
			want: []published{requeue("sys", "shared", "3", xr), requeue("sys", "shared", "3", other)},
		},
		"OwnWrite": {
			reason:  "A change the service made itself requeues nothing.",
			initial: []*metav1.PartialObjectMetadata{secretMeta("sys", "xr-conn", "1"), secretMeta("sys", "server-conn", "1")},
			options: []Option{WithOwnWrites(func(k secret.Key, rv string) bool { return k.Name == "xr-conn" && rv != "" })},
			run: func(tr *Tracker, src *fcache.FakeControllerSource) {
				tr.Track(xr, Deps{Secrets: []secret.Key{{Namespace: "sys", Name: "xr-conn"}, {Namespace: "sys", Name: "server-conn"}}})
				src.Modify(secretMeta("sys", "xr-conn", "2"))
				src.Modify(secretMeta("sys", "server-conn", "3"))
			},
			want: []published{requeue("sys", "server-conn", "3", xr)},
		},
		"Retracked": {
			reason:  "Tracking an XR again replaces what it depended on; a forgotten XR is not requeued.",
			initial: []*metav1.PartialObjectMetadata{secretMeta("sys", "a", "1"), secretMeta("sys", "b", "1"), secretMeta("sys", "c", "1")},
			run: func(tr *Tracker, src *fcache.FakeControllerSource) {
				tr.Track(xr, Deps{Secrets: []secret.Key{{Namespace: "sys", Name: "a"}}})
				tr.Track(xr, Deps{Secrets: []secret.Key{{Namespace: "sys", Name: "b"}}})
				tr.Track(other, Deps{Secrets: []secret.Key{{Namespace: "sys", Name: "c"}}})
				tr.Forget(other.UID)
				src.Modify(secretMeta("sys", "a", "2"))
				src.Modify(secretMeta("sys", "c", "3"))
				src.Modify(secretMeta("sys", "b", "4"))
			},
			want: []published{requeue("sys", "b", "4", xr)},
		},
		"TracedThroughOwner": {
			reason:  "A Secret nobody tracks is traced through its controlling owner to a cluster-scoped controller, by the replica that owns the owner's partition.",
			initial: []*metav1.PartialObjectMetadata{secretMeta("sys", "lost-conn", "1", unknownOwner), secretMeta("sys", "foreign", "1", composed)},
			options: []Option{WithOwnerTracing(
				owners{
					"nop-9": {APIVersion: "example.org/v1", Kind: "XDB", Name: "db", UID: "xr-1", Controller: &yes},
					"nop-1": {APIVersion: "example.org/v1", Kind: "XDB", Name: "cache", UID: "xr-2", Controller: &yes},
				},
				func(uid types.UID) bool { return uid == "nop-9" },
			)},
			run: func(_ *Tracker, src *fcache.FakeControllerSource) {
				src.Modify(secretMeta("sys", "foreign", "2", composed))
				src.Modify(secretMeta("sys", "lost-conn", "3", unknownOwner))
			},
			want: []published{requeue("sys", "lost-conn", "3", xr), render("sys", "lost-conn", "3", xr)},
		},
		"PipelineComposedSecretChanged": {
			reason: "A change of a Pipeline XR's composed connection Secret (named or controlled) asks the renderer to render it; a change of its own Secret requeues it.",
			initial: []*metav1.PartialObjectMetadata{
				secretMeta("sys", "server-conn", "1"), secretMeta("sys", "owned", "1", composed), secretMeta("sys", "xr-conn", "1"),
			},
			run: func(tr *Tracker, src *fcache.FakeControllerSource) {
				tr.Track(xr, Deps{
					Secrets:  []secret.Key{{Namespace: "sys", Name: "xr-conn"}},
					Observed: []secret.Key{{Namespace: "sys", Name: "server-conn"}},
					Composed: []types.UID{"nop-1"},
					Pipeline: true,
				})
				src.Modify(secretMeta("sys", "server-conn", "2"))
				src.Modify(secretMeta("sys", "owned", "3", composed))
				src.Modify(secretMeta("sys", "xr-conn", "4"))
			},
			want: []published{render("sys", "server-conn", "2", xr), render("sys", "owned", "3", xr), requeue("sys", "xr-conn", "4", xr)},
		},
		"ResourcesObservedSecretChanged": {
			reason:  "Outside a pipeline, a change of a composed connection Secret requeues the XR here.",
			initial: []*metav1.PartialObjectMetadata{secretMeta("sys", "server-conn", "1")},
			run: func(tr *Tracker, src *fcache.FakeControllerSource) {
				tr.Track(xr, Deps{Observed: []secret.Key{{Namespace: "sys", Name: "server-conn"}}})
				src.Modify(secretMeta("sys", "server-conn", "2"))
			},
			want: []published{requeue("sys", "server-conn", "2", xr)},
		},
		"StagingChanged": {
			reason:  "A change of a tracked staging Secret requeues its XR here, and asks the renderer nothing.",
			initial: []*metav1.PartialObjectMetadata{stagingMeta("1", xr)},
			run: func(tr *Tracker, src *fcache.FakeControllerSource) {
				tr.Track(xr, Deps{Secrets: []secret.Key{staging.Key("loom-system", xr.UID)}, Pipeline: true})
				src.Modify(stagingMeta("2", xr))
			},
			want: []published{requeue("loom-system", "loom-fn-xr-1", "2", xr)},
		},
		"StagingUntracked": {
			reason:  "A staging Secret nobody tracks requeues the XR its label and controller name, from the replica that owns the XR's partition only.",
			initial: []*metav1.PartialObjectMetadata{stagingMeta("1", xr), stagingMeta("1", other)},
			options: []Option{WithOwnerTracing(owners{}, func(uid types.UID) bool { return uid == xr.UID })},
			run: func(_ *Tracker, src *fcache.FakeControllerSource) {
				src.Modify(stagingMeta("2", other))
				src.Modify(stagingMeta("3", xr))
			},
			want: []published{requeue("loom-system", "loom-fn-xr-1", "3", xr)},
		},
		"StagingDeleted": {
			reason:  "A deleted staging Secret requeues its XR and asks the renderer to hand its details over again.",
			initial: []*metav1.PartialObjectMetadata{stagingMeta("1", xr)},
			run: func(tr *Tracker, src *fcache.FakeControllerSource) {
				tr.Track(xr, Deps{Secrets: []secret.Key{staging.Key("loom-system", xr.UID)}, Pipeline: true})
				src.Delete(stagingMeta("2", xr))
			},
			want: []published{requeue("loom-system", "loom-fn-xr-1", "2", xr), render("loom-system", "loom-fn-xr-1", "2", xr)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := fcache.NewFakeControllerSource()
			for _, m := range tc.initial {
				src.Add(m)
			}
			tr, rec := start(t, src, tc.options...)
			tc.run(tr, src)
			got := rec.wait(t, len(tc.want))
			if diff := cmp.Diff(tc.want, got, protocmp.Transform(), ignoreTime, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\npublished: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	src := fcache.NewFakeControllerSource()
	src.Add(secretMeta("sys", "a", "7"))
	tr, _ := start(t, src)
	m, ok := tr.Metadata(secret.Key{Namespace: "sys", Name: "a"})
	if !ok || m.Name != "a" || m.UID != "s-a" {
		t.Errorf("Metadata(sys/a): %v, %t; want Secret sys/a", m, ok)
	}
	if _, ok := tr.Metadata(secret.Key{Namespace: "sys", Name: "b"}); ok {
		t.Errorf("Metadata(sys/b): found a Secret that does not exist")
	}
}
