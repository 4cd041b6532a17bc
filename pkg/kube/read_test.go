package kube

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	ktesting "k8s.io/client-go/testing"

	"github.com/loomxr/loom/pkg/bus/bustest"
	"github.com/loomxr/loom/pkg/mirror"
	"github.com/loomxr/loom/pkg/reconcile"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

var (
	gvkWidget = schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Widget"}
	gvrWidget = schema.GroupVersionResource{Group: "example.org", Version: "v1", Resource: "widgets"}
	gvkSecret = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	gvrSecret = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// resettable makes a static mapper a ResettableRESTMapper.
type resettable struct{ *meta.DefaultRESTMapper }

func (resettable) Reset() {}

func widget(name, rv, size string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvkWidget)
	u.SetNamespace("team-a")
	u.SetName(name)
	u.SetResourceVersion(rv)
	_ = unstructured.SetNestedField(u.Object, size, "spec", "size")
	return u
}

func secret(name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvkSecret)
	u.SetNamespace("team-a")
	u.SetName(name)
	u.SetResourceVersion(rv)
	return u
}

// handling returns a context whose handled event names obj at rv, as the
// worker runtime makes it.
func handling(ctx context.Context, obj *unstructured.Unstructured, rv string) context.Context {
	gvk := obj.GroupVersionKind()
	ref := &eventsv1.ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	return reconcile.WithRequest(ctx, reconcile.Request{Event: &eventsv1.Event{Object: ref, ResourceVersion: rv}, Target: ref})
}

func TestReadPath(t *testing.T) {
	_, js := bustest.Connect(t, bustest.Run(t).URL())
	kv, err := mirror.EnsureBucket(t.Context(), js, 1)
	if err != nil {
		t.Fatalf("EnsureBucket(): %v", err)
	}
	mw := mirror.NewWriter(js, kv)

	// api is what the API server holds; the mirror holds an older version
	// of "behind", the current version of "current", and nothing of
	// "unseen".
	type step struct {
		// ctx makes the read's context; nil is a bare one.
		ctx  func(context.Context) context.Context
		gvk  schema.GroupVersionKind
		name string
	}
	type want struct {
		gets     int
		size     string
		notFound bool
	}
	cases := map[string]struct {
		reason  string
		noCache bool // no WithMirror
		before  func(*Resources)
		read    step
		want    want
	}{
		"NoMirror": {
			reason:  "Without WithMirror every read is a GET, even of the handled event's object.",
			noCache: true,
			read:    step{ctx: func(ctx context.Context) context.Context { return handling(ctx, widget("current", "", ""), "10") }, gvk: gvkWidget, name: "current"},
			want:    want{gets: 1, size: "api"},
		},
		"EventFresh": {
			reason: "The handled event's object comes from the mirror when its entry is at least as new as the event.",
			read:   step{ctx: func(ctx context.Context) context.Context { return handling(ctx, widget("current", "", ""), "10") }, gvk: gvkWidget, name: "current"},
			want:   want{size: "mirror"},
		},
		"EventStale": {
			reason: "An entry older than the event is read from the API server.",
			read:   step{ctx: func(ctx context.Context) context.Context { return handling(ctx, widget("behind", "", ""), "10") }, gvk: gvkWidget, name: "behind"},
			want:   want{gets: 1, size: "api"},
		},
		"EventUnknown": {
			reason: "A key the mirror never saw is not NotFound: it is read from the API server.",
			read:   step{ctx: func(ctx context.Context) context.Context { return handling(ctx, widget("unseen", "", ""), "10") }, gvk: gvkWidget, name: "unseen"},
			want:   want{gets: 1, size: "api"},
		},
		"Gone": {
			reason: "An object neither the mirror nor the API server has is NotFound, from the API server.",
			read:   step{ctx: Guarded, gvk: gvkWidget, name: "gone"},
			want:   want{gets: 1, notFound: true},
		},
		"OtherObject": {
			reason: "An object the handled event does not name is read from the API server outside Guarded.",
			read:   step{ctx: func(ctx context.Context) context.Context { return handling(ctx, widget("other", "", ""), "10") }, gvk: gvkWidget, name: "current"},
			want:   want{gets: 1, size: "api"},
		},
		"NoEvent": {
			reason: "A read outside a handler and outside Guarded is a GET.",
			read:   step{gvk: gvkWidget, name: "current"},
			want:   want{gets: 1, size: "api"},
		},
		"GuardedAnyEntry": {
			reason: "Under Guarded any mirrored entry will do, however old.",
			read:   step{ctx: Guarded, gvk: gvkWidget, name: "behind"},
			want:   want{size: "mirror-old"},
		},
		"Latest": {
			reason: "Under Latest a read is a GET even where Guarded and the handled event would take the mirror's entry.",
			read: step{ctx: func(ctx context.Context) context.Context {
				return Latest(Guarded(handling(ctx, widget("current", "", ""), "10")))
			}, gvk: gvkWidget, name: "current"},
			want: want{gets: 1, size: "api"},
		},
		"GuardedUnknown": {
			reason: "Under Guarded a key the mirror never saw is still read from the API server.",
			read:   step{ctx: Guarded, gvk: gvkWidget, name: "unseen"},
			want:   want{gets: 1, size: "api"},
		},
		"OwnWrite": {
			reason: "The response to this replica's own write answers for the event it causes, without the mirror.",
			before: func(r *Resources) {
				_, _ = r.Written(gvkWidget, "team-a", "unseen", widget("unseen", "11", "own"), nil)
			},
			read: step{ctx: func(ctx context.Context) context.Context { return handling(ctx, widget("unseen", "", ""), "11") }, gvk: gvkWidget, name: "unseen"},
			want: want{size: "own"},
		},
		"MirrorNewerThanOwnWrite": {
			reason: "An own write as new as the event does not answer when the mirror holds a newer version: a handler reads the newest version known, so that it does not write an older state back.",
			before: func(r *Resources) {
				_, _ = r.Written(gvkWidget, "team-a", "current", widget("current", "8", "own"), nil)
			},
			read: step{ctx: func(ctx context.Context) context.Context { return handling(ctx, widget("current", "", ""), "8") }, gvk: gvkWidget, name: "current"},
			want: want{size: "mirror"},
		},
		"OwnWriteNewerThanStaleMirror": {
			reason: "An own write as new as the event answers when the mirror's entry is older than the event.",
			before: func(r *Resources) {
				_, _ = r.Written(gvkWidget, "team-a", "behind", widget("behind", "9", "own"), nil)
			},
			read: step{ctx: func(ctx context.Context) context.Context { return handling(ctx, widget("behind", "", ""), "9") }, gvk: gvkWidget, name: "behind"},
			want: want{size: "own"},
		},
		"OwnWriteOlderThanEvent": {
			reason: "An own write older than the event does not answer; the mirror's fresh entry does.",
			before: func(r *Resources) {
				_, _ = r.Written(gvkWidget, "team-a", "current", widget("current", "3", "own"), nil)
			},
			read: step{ctx: func(ctx context.Context) context.Context { return handling(ctx, widget("current", "", ""), "10") }, gvk: gvkWidget, name: "current"},
			want: want{size: "mirror"},
		},
		"GuardedNewerOwnWrite": {
			reason: "Under Guarded the newer of the own write and the mirror's entry answers.",
			before: func(r *Resources) {
				_, _ = r.Written(gvkWidget, "team-a", "behind", widget("behind", "20", "own"), nil)
			},
			read: step{ctx: Guarded, gvk: gvkWidget, name: "behind"},
			want: want{size: "own"},
		},
		"GuardedOwnWriteUnknownToMirror": {
			reason: "Under Guarded an own write of an object the mirror does not know (it may be gone) does not answer.",
			before: func(r *Resources) {
				_, _ = r.Written(gvkWidget, "team-a", "unseen", widget("unseen", "20", "own"), nil)
			},
			read: step{ctx: Guarded, gvk: gvkWidget, name: "unseen"},
			want: want{gets: 1, size: "api"},
		},
		"ConflictForcesGET": {
			reason: "After a write of the object failed with a conflict, the next read is a GET even where the mirror would do.",
			before: func(r *Resources) {
				_, _ = r.Written(gvkWidget, "team-a", "current", nil, kerrors.NewConflict(gvrWidget.GroupResource(), "current", nil))
			},
			read: step{ctx: Guarded, gvk: gvkWidget, name: "current"},
			want: want{gets: 1, size: "api"},
		},
		"ForgetForcesGET": {
			reason: "After Forget (a delete), the next read is a GET.",
			before: func(r *Resources) { r.Forget(gvkWidget, "team-a", "current") },
			read:   step{ctx: func(ctx context.Context) context.Context { return handling(ctx, widget("current", "", ""), "10") }, gvk: gvkWidget, name: "current"},
			want:   want{gets: 1, size: "api"},
		},
		"NotFoundThenMirrored": {
			reason: "After a GET found nothing the mirror had no entry of either, an entry the mirror gets later answers the next read.",
			before: func(r *Resources) {
				if _, err := r.Get(Guarded(t.Context()), gvkWidget, "team-a", "late"); !kerrors.IsNotFound(err) {
					t.Fatalf("first read of late: %v; want NotFound", err)
				}
				if err := mw.Put(t.Context(), widget("late", "20", "mirror-late")); err != nil {
					t.Fatal(err)
				}
			},
			read: step{ctx: Guarded, gvk: gvkWidget, name: "late"},
			want: want{size: "mirror-late"},
		},
		"NotFoundWhileMirrored": {
			reason: "After a GET found nothing where the mirror holds the object, the mirror's entry is what is left of a deleted object: the next read is a GET.",
			before: func(r *Resources) {
				ctx := handling(t.Context(), widget("ghost", "", ""), "10")
				if _, err := r.Get(ctx, gvkWidget, "team-a", "ghost"); !kerrors.IsNotFound(err) {
					t.Fatalf("first read of ghost: %v; want NotFound", err)
				}
			},
			read: step{ctx: Guarded, gvk: gvkWidget, name: "ghost"},
			want: want{gets: 1, notFound: true},
		},
		"GETIsRemembered": {
			reason: "A GET's answer is remembered like a write's: it answers the next read of an event at its version.",
			before: func(r *Resources) { _, _ = r.Get(t.Context(), gvkWidget, "team-a", "unseen") },
			read:   step{ctx: func(ctx context.Context) context.Context { return handling(ctx, widget("unseen", "", ""), "12") }, gvk: gvkWidget, name: "unseen"},
			want:   want{size: "api"},
		},
		"SecretNeverCached": {
			reason: "Secrets are never taken from the read path: not even this replica's own write of one.",
			before: func(r *Resources) { _, _ = r.Written(gvkSecret, "team-a", "creds", secret("creds", "30"), nil) },
			read:   step{ctx: func(ctx context.Context) context.Context { return handling(ctx, secret("creds", ""), "30") }, gvk: gvkSecret, name: "creds"},
			want:   want{gets: 1},
		},
	}

	for _, o := range []*unstructured.Unstructured{widget("behind", "5", "mirror-old"), widget("current", "10", "mirror"), widget("ghost", "5", "mirror-ghost")} {
		if err := mw.Put(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(gvkWidget, meta.RESTScopeNamespace)
	mapper.Add(gvkSecret, meta.RESTScopeNamespace)

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{gvrWidget: "WidgetList", gvrSecret: "SecretList"},
				widget("behind", "12", "api"), widget("current", "12", "api"), widget("unseen", "12", "api"), widget("other", "12", "api"), secret("creds", "30"))
			gets := 0
			dyn.PrependReactor("get", "*", func(ktesting.Action) (bool, runtime.Object, error) {
				gets++
				return false, nil, nil
			})
			var opts []Option
			if !tc.noCache {
				opts = append(opts, WithMirror(mirror.NewReader(kv)))
			}
			r := NewResources(dyn, resettable{mapper}, opts...)
			if tc.before != nil {
				tc.before(r)
			}
			gets = 0
			ctx := t.Context()
			if tc.read.ctx != nil {
				ctx = tc.read.ctx(ctx)
			}
			u, err := r.Get(ctx, tc.read.gvk, "team-a", tc.read.name)
			if err != nil && !kerrors.IsNotFound(err) {
				t.Fatalf("Get(...): %v", err)
			}
			got := want{gets: gets, notFound: kerrors.IsNotFound(err)}
			if u != nil {
				got.size, _, _ = unstructured.NestedString(u.Object, "spec", "size")
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nGet(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestReadPathCopies(t *testing.T) {
	_, js := bustest.Connect(t, bustest.Run(t).URL())
	kv, err := mirror.EnsureBucket(t.Context(), js, 1)
	if err != nil {
		t.Fatalf("EnsureBucket(): %v", err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(gvkWidget, meta.RESTScopeNamespace)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvrWidget: "WidgetList"})
	r := NewResources(dyn, resettable{mapper}, WithMirror(mirror.NewReader(kv)))

	w := widget("w", "7", "own")
	_, _ = r.Written(gvkWidget, "team-a", "w", w, nil)
	w.Object["spec"] = "changed by the writer"
	ctx := handling(t.Context(), w, "7")
	u, err := r.Get(ctx, gvkWidget, "team-a", "w")
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"] = "changed by the reader"
	u, err = r.Get(ctx, gvkWidget, "team-a", "w")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(widget("w", "7", "own").Object, u.Object); diff != "" {
		t.Errorf("Get(...) after callers changed what Written and Get handed them: -want, +got:\n%s", diff)
	}
}

func TestReadPathList(t *testing.T) {
	_, js := bustest.Connect(t, bustest.Run(t).URL())
	kv, err := mirror.EnsureBucket(t.Context(), js, 1)
	if err != nil {
		t.Fatalf("EnsureBucket(): %v", err)
	}
	mw := mirror.NewWriter(js, kv)
	for _, o := range []*unstructured.Unstructured{widget("a", "5", "mirror"), widget("b", "6", "mirror")} {
		if err := mw.Put(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(gvkWidget, meta.RESTScopeNamespace)

	type want struct {
		lists int
		names []string
	}
	cases := map[string]struct {
		reason  string
		noCache bool
		ctx     func(context.Context) context.Context
		want    want
	}{
		"WholeKind": {
			reason: "Under WholeKind a List of a mirrored kind is a scan of the mirror, not a LIST.",
			ctx:    WholeKind,
			want:   want{names: []string{"a", "b"}},
		},
		"NotWholeKind": {
			reason: "Without WholeKind a List is a LIST.",
			want:   want{lists: 1, names: []string{"a", "b", "c"}},
		},
		"NoMirror": {
			reason:  "Without WithMirror a List is a LIST even under WholeKind.",
			noCache: true,
			ctx:     WholeKind,
			want:    want{lists: 1, names: []string{"a", "b", "c"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{gvrWidget: "WidgetList"},
				widget("a", "12", "api"), widget("b", "12", "api"), widget("c", "12", "api"))
			lists := 0
			dyn.PrependReactor("list", "*", func(ktesting.Action) (bool, runtime.Object, error) {
				lists++
				return false, nil, nil
			})
			var opts []Option
			if !tc.noCache {
				opts = append(opts, WithMirror(mirror.NewReader(kv)))
			}
			r := NewResources(dyn, resettable{mapper}, opts...)
			ctx := t.Context()
			if tc.ctx != nil {
				ctx = tc.ctx(ctx)
			}
			items, err := r.List(ctx, gvkWidget, "team-a", nil)
			if err != nil {
				t.Fatalf("List(...): %v", err)
			}
			got := want{lists: lists}
			for _, u := range items {
				got.names = append(got.names, u.GetName())
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nList(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
