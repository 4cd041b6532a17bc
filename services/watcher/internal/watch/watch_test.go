package watch

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/yaml"

	"github.com/loomxr/loom/pkg/stack"
	"github.com/loomxr/loom/pkg/stack/stacktest"
	"github.com/loomxr/loom/pkg/testing/poll"
	"github.com/loomxr/loom/pkg/watchreq"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/object"
	"github.com/loomxr/loom/services/watcher/internal/route"
)

// recorder is a Publisher that keeps what it is given. The bus is a true
// seam: what the watcher publishes, and to whom, is exactly what is tested.
type recorder struct {
	mu     sync.Mutex
	events []published
}

type published struct {
	service string
	ev      *eventsv1.Event
}

func (r *recorder) Publish(_ context.Context, service string, ev *eventsv1.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, published{service: service, ev: ev})
	return nil
}

func (r *recorder) Flush(context.Context) error { return nil }

// since returns the events published from index i on.
func (r *recorder) since(i int) []published {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]published(nil), r.events[i:]...)
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// want describes a published event; empty fields match anything.
type want struct {
	service string
	typ     eventsv1.EventType
	object  types.UID
	target  types.UID
	rv      string
	reason  string
}

func (w want) String() string {
	return fmt.Sprintf("%s %s object=%s target=%s rv=%s %q", w.service, w.typ, w.object, w.target, w.rv, w.reason)
}

func (w want) matches(p published) bool {
	ev := p.ev
	return (w.service == "" || w.service == p.service) &&
		(w.typ == 0 || w.typ == ev.GetType()) &&
		(w.object == "" || string(w.object) == ev.GetObject().GetUid()) &&
		(w.target == "" || string(w.target) == ev.GetTarget().GetUid()) &&
		(w.rv == "" || w.rv == ev.GetResourceVersion()) &&
		(w.reason == "" || w.reason == ev.GetReason())
}

// expect waits until every wanted event was published at or after index
// from.
func (r *recorder) expect(t *testing.T, from int, wants ...want) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() error {
		var missing []string
		got := r.since(from)
		for _, w := range wants {
			found := false
			for _, p := range got {
				if w.matches(p) {
					found = true
					break
				}
			}
			if !found {
				missing = append(missing, w.String())
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("events not published:\n  %s\npublished:\n%s", strings.Join(missing, "\n  "), dump(got))
		}
		return nil
	})
}

func dump(ps []published) string {
	var sb strings.Builder
	for _, p := range ps {
		ev := p.ev
		fmt.Fprintf(&sb, "  %s %s %s/%s(%s) -> %s/%s(%s) rv=%s %q\n", p.service, ev.GetType(),
			ev.GetObject().GetKind(), ev.GetObject().GetName(), ev.GetObject().GetUid(),
			ev.GetTarget().GetKind(), ev.GetTarget().GetName(), ev.GetTarget().GetUid(), ev.GetResourceVersion(), ev.GetReason())
	}
	return sb.String()
}

// startControlPlane runs the local stack without any Loom service: a real
// kube-apiserver with Loom's CRDs and the test provider's, and NATS.
func startControlPlane(t *testing.T) *stack.Stack {
	t.Helper()
	bins := stacktest.K8sBinDir(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var progress io.Writer
	if testing.Verbose() {
		progress = os.Stderr
	}
	// Schema-less stand-ins for Loom's CRDs keep this test independent of
	// their schemas; the end-to-end tests use the real ones.
	crds, err := filepath.Abs(filepath.Join("testdata", "crds"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := stack.Start(ctx, stack.Options{StateDir: t.TempDir(), K8sBinDir: bins, Services: []string{}, CRDDirs: []string{crds}, Log: progress})
	if err != nil {
		t.Fatalf("cannot start the control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("cannot stop the control plane: %v", err)
		}
	})
	return s
}

// cluster creates and changes objects as the admin.
type cluster struct {
	dyn dynamic.Interface
}

var (
	gvrXRD    = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1", Resource: "compositeresourcedefinitions"}
	gvrComp   = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1", Resource: "compositions"}
	gvrEnv    = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1beta1", Resource: "environmentconfigs"}
	gvrCRD    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gvrXR     = schema.GroupVersionResource{Group: "watch.test.loom.dev", Version: "v1", Resource: "xwidgets"}
	gvrClaim  = schema.GroupVersionResource{Group: "watch.test.loom.dev", Version: "v1", Resource: "widgets"}
	gvrNop    = schema.GroupVersionResource{Group: "nop.crossplane.io", Version: "v1alpha1", Resource: "nopresources"}
	gvrCM     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrNS     = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	gvrRule   = schema.GroupVersionResource{Group: "loom.dev", Version: "v1alpha1", Resource: "referencerules"}
	gvkXR     = schema.GroupVersionKind{Group: "watch.test.loom.dev", Version: "v1", Kind: "XWidget"}
	gvkClaim  = schema.GroupVersionKind{Group: "watch.test.loom.dev", Version: "v1", Kind: "Widget"}
	gvkNop    = schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}
	gvkCM     = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	gvkEnvCfg = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1beta1", Kind: "EnvironmentConfig"}
)

func (c cluster) resource(gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	if ns == "" {
		return c.dyn.Resource(gvr)
	}
	return c.dyn.Resource(gvr).Namespace(ns)
}

func (c cluster) create(t *testing.T, gvr schema.GroupVersionResource, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatalf("cannot parse object: %v", err)
	}
	out, err := c.resource(gvr, u.GetNamespace()).Create(t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("cannot create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// label sets a label on an object and returns it as stored.
func (c cluster) label(t *testing.T, gvr schema.GroupVersionResource, ns, name, k, v string) *unstructured.Unstructured {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, k, v)
	out, err := c.resource(gvr, ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("cannot label %s %s: %v", gvr.Resource, name, err)
	}
	return out
}

func (c cluster) patch(t *testing.T, gvr schema.GroupVersionResource, ns, name, patch string) *unstructured.Unstructured {
	t.Helper()
	out, err := c.resource(gvr, ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("cannot patch %s %s: %v", gvr.Resource, name, err)
	}
	return out
}

func (c cluster) delete(t *testing.T, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	if err := c.resource(gvr, ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("cannot delete %s %s: %v", gvr.Resource, name, err)
	}
}

// watching reports the roles of a kind the watcher runs an informer for,
// and whether it runs one.
func (w *Watcher) watching(gvk schema.GroupVersionKind) (route.Role, spec, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	s, ok := w.sources[gvk]
	if !ok {
		return 0, spec{}, false
	}
	return s.roles, s.spec, s.synced()
}

func (w *Watcher) expectWatching(t *testing.T, gvk schema.GroupVersionKind, roles route.Role) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() error {
		got, _, synced := w.watching(gvk)
		if got != roles || !synced {
			return fmt.Errorf("kind %s: want roles %q synced, got roles %q synced %v", gvk, roles, got, synced)
		}
		return nil
	})
}

const crdTemplate = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[1]s.watch.test.loom.dev}
spec:
  group: watch.test.loom.dev
  names: {kind: %[2]s, plural: %[1]s, listKind: %[2]sList, singular: %[3]s}
  scope: %[4]s
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

func TestWatcher(t *testing.T) {
	s := startControlPlane(t)
	ctx := t.Context()
	rc := s.RESTConfig()
	dyn := dynamic.NewForConfigOrDie(rc)
	md := metadata.NewForConfigOrDie(rc)
	disc := discovery.NewDiscoveryClientForConfigOrDie(rc)
	c := cluster{dyn: dyn}

	nc, err := nats.Connect(s.NATSURL())
	if err != nil {
		t.Fatalf("cannot connect to NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := watchreq.EnsureBucket(ctx, js, 1)
	if err != nil {
		t.Fatalf("EnsureBucket(): %v", err)
	}

	// An XRD exists before the watcher starts; its CRDs do not yet.
	xrd := c.create(t, gvrXRD, `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xwidgets.watch.test.loom.dev}
spec:
  group: watch.test.loom.dev
  names: {kind: XWidget, plural: xwidgets}
  claimNames: {kind: Widget, plural: widgets}
  versions:
  - name: v1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: string}}}
`)
	c.create(t, gvrNS, `{apiVersion: v1, kind: Namespace, metadata: {name: team-a}}`)
	// The binder hears of composed resources only of kinds a ReferenceRule
	// names (subtest WithoutReferenceRules deletes this one).
	rule := c.create(t, gvrRule, `
apiVersion: loom.dev/v1alpha1
kind: ReferenceRule
metadata: {name: nops}
spec:
  for: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
  references:
  - valueField: spec.forProvider.fields.network
    referenceField: spec.forProvider.fields.networkRef
    target: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    fromFieldPath: metadata.name
`)

	rec := &recorder{}
	logs := io.Writer(io.Discard)
	if testing.Verbose() {
		logs = os.Stderr
	}
	w := New(dyn, md, disc, rec,
		WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		WithWatchRequests(kv),
		WithResyncPeriod(0),
		WithSyncTimeout(20*time.Second),
	)
	done := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	go func() { done <- w.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run(): %v", err)
		}
	})

	t.Run("InitialResync", func(t *testing.T) {
		poll.Until(t, time.Minute, func() error { return w.Ready(ctx) })
		rec.expect(t, 0, want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_RESYNC, object: xrd.GetUID(), target: xrd.GetUID()})
		if _, _, ok := w.watching(gvkXR); ok {
			t.Errorf("watching %s before its CRD exists", gvkXR)
		}
	})

	t.Run("WaitsForCRDs", func(t *testing.T) {
		c.create(t, gvrCRD, fmt.Sprintf(crdTemplate, "xwidgets", "XWidget", "xwidget", "Cluster"))
		c.create(t, gvrCRD, fmt.Sprintf(crdTemplate, "widgets", "Widget", "widget", "Namespaced"))
		w.expectWatching(t, gvkXR, route.RoleXR)
		w.expectWatching(t, gvkClaim, route.RoleClaim)
	})

	var claim, xr, nop *unstructured.Unstructured
	t.Run("ClaimXRAndComposed", func(t *testing.T) {
		from := rec.len()
		start := from
		claim = c.create(t, gvrClaim, `
apiVersion: watch.test.loom.dev/v1
kind: Widget
metadata: {name: w1, namespace: team-a}
spec: {size: small, resourceRef: {apiVersion: watch.test.loom.dev/v1, kind: XWidget, name: w1-abcde}}
`)
		xr = c.create(t, gvrXR, `
apiVersion: watch.test.loom.dev/v1
kind: XWidget
metadata: {name: w1-abcde}
spec:
  size: small
  claimRef: {apiVersion: watch.test.loom.dev/v1, kind: Widget, namespace: team-a, name: w1}
  resourceRefs: [{apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: w1-abcde-nop}]
`)
		rec.expect(t, from,
			want{service: route.Binder, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: claim.GetUID(), target: claim.GetUID()},
			want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: xr.GetUID(), target: xr.GetUID()},
			want{service: route.Secrets, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: xr.GetUID(), target: xr.GetUID()},
			want{service: route.Binder, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: xr.GetUID(), target: xr.GetUID()},
			want{service: route.Binder, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: xr.GetUID(), target: claim.GetUID()},
		)
		// A claim's creation is no news to the secrets service: its XR,
		// which names the claim, is (published after it, by then).
		for _, p := range rec.since(from) {
			if p.service == route.Secrets && p.ev.GetObject().GetUid() == string(claim.GetUID()) {
				t.Errorf("a claim's creation reached the secrets service:\n%s", dump([]published{p}))
			}
		}
		// The XR's resourceRefs name NopResources: they are watched now,
		// metadata-only and only those labelled as composed.
		w.expectWatching(t, gvkNop, route.RoleComposed)
		if _, sp, _ := w.watching(gvkNop); sp.shape != 0 || sp.selector != object.LabelComposite {
			t.Errorf("NopResources: want a metadata-only watch of %q, got %+v", object.LabelComposite, sp)
		}

		from = rec.len()
		unlabelled := c.create(t, gvrNop, `{apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, metadata: {name: w1-unrelated}, spec: {forProvider: {}}}`)
		nop = c.create(t, gvrNop, fmt.Sprintf(`
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: w1-abcde-nop
  labels: {crossplane.io/composite: w1-abcde}
  ownerReferences: [{apiVersion: watch.test.loom.dev/v1, kind: XWidget, name: w1-abcde, uid: %s, controller: true}]
spec: {forProvider: {}}
`, xr.GetUID()))
		// (Not to the secrets service: the XR is not Ready; see
		// OwnCreationsInResourcesMode.)
		rec.expect(t, from,
			want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: nop.GetUID(), target: xr.GetUID()},
			want{service: route.Binder, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: nop.GetUID(), target: xr.GetUID()},
		)
		for _, p := range rec.since(from) {
			if p.ev.GetObject().GetUid() == string(unlabelled.GetUID()) {
				t.Errorf("published an event for a NopResource that is not composed: %s", dump([]published{p}))
			}
		}
		// The bus serves requests round-robin across tenants: events for
		// the XR, cluster scoped, name its claim's namespace as their
		// tenant, whichever object changed (the XR or its composed
		// resource); events for the namespaced claim need none.
		for _, p := range rec.since(start) {
			want := ""
			if p.ev.GetTarget().GetUid() == string(xr.GetUID()) {
				want = "team-a"
			}
			if got := p.ev.GetTenant(); got != want {
				t.Errorf("tenant %q, want %q, in:\n%s", got, want, dump([]published{p}))
			}
		}
		c.delete(t, gvrNop, "", unlabelled.GetName())
	})

	t.Run("UpdatesAndDeletes", func(t *testing.T) {
		from := rec.len()
		claim = c.label(t, gvrClaim, "team-a", "w1", "step", "update")
		xr = c.label(t, gvrXR, "", xr.GetName(), "step", "update")
		nop = c.label(t, gvrNop, "", nop.GetName(), "step", "update")
		rec.expect(t, from,
			want{service: route.Binder, typ: eventsv1.EventType_EVENT_TYPE_MODIFIED, object: claim.GetUID(), target: claim.GetUID(), rv: claim.GetResourceVersion()},
			want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_MODIFIED, object: xr.GetUID(), target: xr.GetUID(), rv: xr.GetResourceVersion()},
			want{service: route.Binder, typ: eventsv1.EventType_EVENT_TYPE_MODIFIED, object: xr.GetUID(), target: claim.GetUID(), rv: xr.GetResourceVersion()},
			want{service: route.Secrets, typ: eventsv1.EventType_EVENT_TYPE_MODIFIED, object: nop.GetUID(), target: xr.GetUID(), rv: nop.GetResourceVersion()},
		)
	})

	t.Run("OwnWrites", func(t *testing.T) {
		// A change a service's field manager made alone does not go back
		// to it; the next change by anyone else does (and, made through
		// the same informer after it, marks the point by which the first
		// would have been published).
		from := rec.len()
		as := func(gvr schema.GroupVersionResource, ns, name, manager, patch string) *unstructured.Unstructured {
			t.Helper()
			out, err := c.resource(gvr, ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: manager})
			if err != nil {
				t.Fatalf("cannot patch %s %s as %s: %v", gvr.Resource, name, manager, err)
			}
			return out
		}
		byRenderer := as(gvrNop, "", nop.GetName(), "loom-renderer", `{"metadata":{"labels":{"loom.test/size":"large"}}}`)
		nop = c.label(t, gvrNop, "", nop.GetName(), "step", "own-writes")
		byBinder := as(gvrClaim, "team-a", "w1", "loom-binder", `{"metadata":{"annotations":{"loom.test/bound":"yes"}}}`)
		claim = c.label(t, gvrClaim, "team-a", "w1", "step", "own-writes")
		rec.expect(t, from,
			want{service: route.Binder, object: nop.GetUID(), target: xr.GetUID(), rv: byRenderer.GetResourceVersion()},
			want{service: route.Secrets, object: nop.GetUID(), target: xr.GetUID(), rv: byRenderer.GetResourceVersion()},
			want{service: route.Renderer, object: nop.GetUID(), target: xr.GetUID(), rv: nop.GetResourceVersion()},
			want{service: route.Binder, object: claim.GetUID(), target: claim.GetUID(), rv: claim.GetResourceVersion()},
		)
		for _, p := range rec.since(from) {
			rv, svc := p.ev.GetResourceVersion(), p.service
			if rv == byRenderer.GetResourceVersion() && svc == route.Renderer || rv == byBinder.GetResourceVersion() {
				t.Errorf("A write of the renderer came back to it, or the binder's write of a claim went anywhere:\n%s", dump([]published{p}))
			}
		}
	})

	t.Run("OwnCreationsInResourcesMode", func(t *testing.T) {
		// The renderer's creation of a composed resource comes back to it
		// only when the XR is not known to compose in mode Resources.
		gvrRev := schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1", Resource: "compositionrevisions"}
		c.create(t, gvrRev, `{apiVersion: apiextensions.crossplane.io/v1, kind: CompositionRevision, metadata: {name: widgets-pt-1}, spec: {mode: Resources, revision: 1, compositeTypeRef: {apiVersion: watch.test.loom.dev/v1, kind: XWidget}}}`)
		c.create(t, gvrRev, `{apiVersion: apiextensions.crossplane.io/v1, kind: CompositionRevision, metadata: {name: widgets-fn-1}, spec: {mode: Pipeline, revision: 1, compositeTypeRef: {apiVersion: watch.test.loom.dev/v1, kind: XWidget}}}`)
		createAs := func(name, owner string, ownerUID types.UID) *unstructured.Unstructured {
			t.Helper()
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(fmt.Sprintf(`
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: %s
  labels: {crossplane.io/composite: %s}
  ownerReferences: [{apiVersion: watch.test.loom.dev/v1, kind: XWidget, name: %s, uid: %s, controller: true}]
spec: {forProvider: {}}
`, name, owner, owner, ownerUID)), &u.Object); err != nil {
				t.Fatal(err)
			}
			out, err := c.resource(gvrNop, "").Create(t.Context(), u, metav1.CreateOptions{FieldManager: "loom-renderer"})
			if err != nil {
				t.Fatalf("cannot create NopResource %s as the renderer: %v", name, err)
			}
			return out
		}
		// An XR whose revision the watcher has not seen named yet (the
		// renderer's creations can overtake its patch of the XR) is known
		// by the Composition the binder chose.
		for _, comp := range []string{"widgets-pt", "widgets-fn"} {
			mode := map[string]string{"widgets-pt": "Resources", "widgets-fn": "Pipeline"}[comp]
			steps := "resources: [{name: nop, base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}}]"
			if mode == "Pipeline" {
				steps = "pipeline: [{step: s, functionRef: {name: f}}]"
			}
			from := rec.len()
			cu := c.create(t, gvrComp, fmt.Sprintf(`{apiVersion: apiextensions.crossplane.io/v1, kind: Composition, metadata: {name: %s}, spec: {compositeTypeRef: {apiVersion: watch.test.loom.dev/v1, kind: XWidget}, mode: %s, %s}}`, comp, mode, steps))
			rec.expect(t, from, want{service: route.Renderer, object: cu.GetUID(), target: cu.GetUID()})
		}
		defer func() {
			for _, comp := range []string{"widgets-pt", "widgets-fn"} {
				c.delete(t, gvrComp, "", comp)
			}
		}()
		t.Run("ReadyXR", func(t *testing.T) {
			// A composed resource created once its XR is Ready (a new
			// template, say) is news to the secrets service.
			x := c.create(t, gvrXR, `{apiVersion: watch.test.loom.dev/v1, kind: XWidget, metadata: {name: w-ready}, spec: {compositionRevisionRef: {name: widgets-pt-1}}}`)
			from := rec.len()
			rx, err := c.resource(gvrXR, "").Patch(t.Context(), x.GetName(), types.MergePatchType, []byte(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Available","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`), metav1.PatchOptions{FieldManager: "loom-renderer"}, "status")
			if err != nil {
				t.Fatalf("cannot make %s Ready: %v", x.GetName(), err)
			}
			rec.expect(t, from, want{service: route.Secrets, object: x.GetUID(), target: x.GetUID(), rv: rx.GetResourceVersion(), reason: "composite resource readiness changed"})
			from = rec.len()
			n := createAs("w-ready-nop", x.GetName(), x.GetUID())
			rec.expect(t, from,
				want{service: route.Binder, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: n.GetUID(), target: x.GetUID()},
				want{service: route.Secrets, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: n.GetUID(), target: x.GetUID()},
			)
		})
		for _, tc := range []struct {
			name, mode, ref string
			renderer        bool
		}{
			{name: "w-resources", mode: "Resources", ref: "compositionRevisionRef: {name: widgets-pt-1}", renderer: false},
			{name: "w-pipeline", mode: "Pipeline", ref: "compositionRevisionRef: {name: widgets-fn-1}", renderer: true},
			{name: "w-resources-comp", mode: "Resources", ref: "compositionRef: {name: widgets-pt}", renderer: false},
			{name: "w-pipeline-comp", mode: "Pipeline", ref: "compositionRef: {name: widgets-fn}", renderer: true},
		} {
			name := tc.name
			x := c.create(t, gvrXR, fmt.Sprintf(`{apiVersion: watch.test.loom.dev/v1, kind: XWidget, metadata: {name: %s}, spec: {%s}}`, name, tc.ref))
			from := rec.len()
			n := createAs(name+"-nop", name, x.GetUID())
			// The XR is not Ready (it has no status): the creation is no
			// news to the secrets service, which reads every composed
			// resource when the XR turns Ready.
			wants := []want{
				{service: route.Binder, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: n.GetUID(), target: x.GetUID()},
			}
			if tc.renderer {
				wants = append(wants, want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: n.GetUID(), target: x.GetUID()})
			}
			// The deliveries of one change are published together.
			rec.expect(t, from, wants...)
			for _, p := range rec.since(from) {
				if !tc.renderer && p.service == route.Renderer && p.ev.GetObject().GetUid() == string(n.GetUID()) {
					t.Errorf("mode %s: the renderer's own creation of a composed resource came back to it:\n%s", tc.mode, dump([]published{p}))
				}
				if p.service == route.Secrets && p.ev.GetObject().GetUid() == string(n.GetUID()) {
					t.Errorf("the creation of a composed resource of an XR that is not Ready reached the secrets service:\n%s", dump([]published{p}))
				}
			}

			// The renderer's own write of a status field (a
			// ToCompositeFieldPath patch's result) comes back to it only
			// when its render may read the XR's status: these
			// Compositions in mode Resources have no patch that does,
			// functions may. An annotation afterwards marks the point by
			// which it would have been published.
			from = rec.len()
			st, err := c.resource(gvrXR, "").Patch(t.Context(), name, types.MergePatchType, []byte(`{"status":{"phase":"`+rand.Text()+`"}}`), metav1.PatchOptions{FieldManager: "loom-renderer"}, "status")
			if err != nil {
				t.Fatalf("cannot patch the status of %s as the renderer: %v", name, err)
			}
			mark := c.patch(t, gvrXR, "", name, `{"metadata":{"annotations":{"step":"renderer-status"}}}`)
			wants = []want{{service: route.Renderer, object: x.GetUID(), target: x.GetUID(), rv: mark.GetResourceVersion(), reason: "composite resource changed"}}
			if tc.renderer {
				wants = append(wants, want{service: route.Renderer, object: x.GetUID(), target: x.GetUID(), rv: st.GetResourceVersion(), reason: "composite resource status changed"})
			}
			rec.expect(t, from, wants...)
			for _, p := range rec.since(from) {
				if !tc.renderer && p.service == route.Renderer && p.ev.GetResourceVersion() == st.GetResourceVersion() {
					t.Errorf("mode %s: the renderer's own write of a status field came back to it, whose render reads no status:\n%s", tc.mode, dump([]published{p}))
				}
			}
		}
	})

	t.Run("StatusOnly", func(t *testing.T) {
		from := rec.len()
		setStatus := func(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
			t.Helper()
			out, err := c.resource(gvr, ns).Patch(t.Context(), name, types.MergePatchType, []byte(`{"status":{"phase":"`+rand.Text()+`"}}`), metav1.PatchOptions{}, "status")
			if err != nil {
				t.Fatalf("cannot patch the status of %s %s: %v", gvr.Resource, name, err)
			}
			return out
		}
		cs := setStatus(gvrClaim, "team-a", "w1")
		xs := setStatus(gvrXR, "", xr.GetName())
		// An annotation is no status change; published after the claim's
		// status change (one informer, in order), it marks the point by
		// which that change would have been published.
		claim = c.patch(t, gvrClaim, "team-a", "w1", `{"metadata":{"annotations":{"step":"status-only"}}}`)
		rec.expect(t, from,
			want{service: route.Renderer, object: xr.GetUID(), target: xr.GetUID(), rv: xs.GetResourceVersion(), reason: "composite resource status changed"},
			want{service: route.Binder, object: xr.GetUID(), target: claim.GetUID(), rv: xs.GetResourceVersion()},
			want{service: route.Binder, object: claim.GetUID(), target: claim.GetUID(), rv: claim.GetResourceVersion()},
			want{service: route.Secrets, object: claim.GetUID(), target: claim.GetUID(), rv: claim.GetResourceVersion()},
		)

		// Conditions alone: one no service reads, then a first Ready
		// condition that says "not Ready", which the claim's mirror reads
		// and the secrets service (waiting for True) does not, then Ready,
		// which both read. An annotation of the XR afterwards marks the
		// point by which all are published.
		setConditions := func(conds string) *unstructured.Unstructured {
			t.Helper()
			out, err := c.resource(gvrXR, "").Patch(t.Context(), xr.GetName(), types.MergePatchType, []byte(`{"status":{"conditions":`+conds+`}}`), metav1.PatchOptions{}, "status")
			if err != nil {
				t.Fatalf("cannot patch the conditions of %s: %v", xr.GetName(), err)
			}
			return out
		}
		other := `{"type":"ConnectionDetailsReady","status":"True","reason":"Published","lastTransitionTime":"2026-01-01T00:00:00Z"}`
		xo := setConditions(`[` + other + `]`)
		xcreating := setConditions(`[` + other + `,{"type":"Ready","status":"False","reason":"Creating","lastTransitionTime":"2026-01-01T00:00:00Z"}]`)
		xready := setConditions(`[` + other + `,{"type":"Ready","status":"True","reason":"Available","lastTransitionTime":"2026-01-01T00:00:00Z"}]`)
		xm := c.patch(t, gvrXR, "", xr.GetName(), `{"metadata":{"annotations":{"step":"conditions-only"}}}`)
		rec.expect(t, from,
			want{service: route.Secrets, object: xr.GetUID(), target: xr.GetUID(), rv: xready.GetResourceVersion(), reason: "composite resource readiness changed"},
			want{service: route.Binder, object: xr.GetUID(), target: claim.GetUID(), rv: xcreating.GetResourceVersion()},
			want{service: route.Binder, object: xr.GetUID(), target: claim.GetUID(), rv: xready.GetResourceVersion()},
			want{service: route.Renderer, object: xr.GetUID(), target: xr.GetUID(), rv: xm.GetResourceVersion(), reason: "composite resource changed"},
		)
		for _, p := range rec.since(from) {
			rv, obj, svc := p.ev.GetResourceVersion(), types.UID(p.ev.GetObject().GetUid()), p.service
			claimStatus := obj == claim.GetUID() && rv == cs.GetResourceVersion()
			xrStatus := obj == xr.GetUID() && rv == xs.GetResourceVersion() && (svc == route.Secrets ||
				svc == route.Binder && p.ev.GetTarget().GetUid() == string(xr.GetUID()))
			otherCondition := obj == xr.GetUID() && rv == xo.GetResourceVersion()
			readyToRenderer := obj == xr.GetUID() && (rv == xready.GetResourceVersion() || rv == xcreating.GetResourceVersion()) && svc == route.Renderer
			creatingToSecrets := obj == xr.GetUID() && rv == xcreating.GetResourceVersion() && svc == route.Secrets
			if claimStatus || xrStatus || otherCondition || readyToRenderer || creatingToSecrets {
				t.Errorf("A change of the status alone reached a service that does not read it:\n%s", dump([]published{p}))
			}
		}
	})

	t.Run("RendererSpecAndBinderConditions", func(t *testing.T) {
		// The renderer's write of a bound XR's resourceRefs and of the
		// Composition and revision its claim names already (the binder
		// chose them when it bound the claim) is no news to the claim;
		// its write of another revision is. The binder's own
		// ReferencesResolved turning False comes back to it for the XR;
		// turning True does not. An annotation of the XR by someone else
		// marks the point by which all are published.
		from := rec.len()
		as := func(gvr schema.GroupVersionResource, ns, name, manager, patch string, subresources ...string) *unstructured.Unstructured {
			t.Helper()
			out, err := c.resource(gvr, ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: manager}, subresources...)
			if err != nil {
				t.Fatalf("cannot patch %s as %s: %v", name, manager, err)
			}
			return out
		}
		choice := `"compositionRef":{"name":"widgets"},"compositionRevisionRef":{"name":"widgets-pt-1"}`
		as(gvrClaim, "team-a", "w1", "loom-binder", `{"spec":{`+choice+`}}`)
		// The binder's write goes nowhere; a label after it, once
		// published, says that the watcher has seen it.
		claim = c.label(t, gvrClaim, "team-a", "w1", "step", "renderer-spec")
		rec.expect(t, from, want{service: route.Binder, object: claim.GetUID(), target: claim.GetUID(), rv: claim.GetResourceVersion()})
		refs := as(gvrXR, "", xr.GetName(), "loom-renderer", `{"spec":{`+choice+`,"resourceRefs":[{"apiVersion":"nop.crossplane.io/v1alpha1","kind":"NopResource","name":"`+nop.GetName()+`"}],"writeConnectionSecretToRef":{"namespace":"loom-system","name":"`+string(xr.GetUID())+`"}}}`)
		rev := as(gvrXR, "", xr.GetName(), "loom-renderer", `{"spec":{"compositionRevisionRef":{"name":"widgets-pt-2"}}}`)
		cond := func(status string) string {
			return `{"status":{"conditions":[{"type":"ReferencesResolved","status":"` + status + `","reason":"R","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
		}
		unresolved := as(gvrXR, "", xr.GetName(), "loom-binder", cond("False"), "status")
		resolved := as(gvrXR, "", xr.GetName(), "loom-binder", cond("True"), "status")
		xm := c.patch(t, gvrXR, "", xr.GetName(), `{"metadata":{"annotations":{"step":"renderer-spec"}}}`)
		rec.expect(t, from,
			want{service: route.Secrets, object: xr.GetUID(), target: xr.GetUID(), rv: refs.GetResourceVersion()},
			want{service: route.Binder, object: xr.GetUID(), target: claim.GetUID(), rv: rev.GetResourceVersion()},
			want{service: route.Binder, object: xr.GetUID(), target: xr.GetUID(), rv: unresolved.GetResourceVersion(), reason: "composite resource references unresolved"},
			want{service: route.Renderer, object: xr.GetUID(), target: xr.GetUID(), rv: xm.GetResourceVersion()},
		)
		for _, p := range rec.since(from) {
			rv, target := p.ev.GetResourceVersion(), p.ev.GetTarget().GetUid()
			if rv == refs.GetResourceVersion() && target == string(claim.GetUID()) {
				t.Errorf("The renderer's write of the XR's resourceRefs reached the claim:\n%s", dump([]published{p}))
			}
			if rv == resolved.GetResourceVersion() {
				t.Errorf("The binder's ReferencesResolved turning True went somewhere:\n%s", dump([]published{p}))
			}
		}
	})

	t.Run("CompositionTemplates", func(t *testing.T) {
		from := rec.len()
		comp := c.create(t, gvrComp, `
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: widgets-cm}
spec:
  compositeTypeRef: {apiVersion: watch.test.loom.dev/v1, kind: XWidget}
  mode: Resources
  resources:
  - name: cm
    base: {apiVersion: v1, kind: ConfigMap}
`)
		// ConfigMaps are no CRD: the watcher maps them through discovery.
		w.expectWatching(t, gvkCM, route.RoleComposed)
		cm := c.create(t, gvrCM, fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata:
  name: w1-abcde-cm
  namespace: team-a
  labels: {crossplane.io/composite: w1-abcde}
  ownerReferences: [{apiVersion: watch.test.loom.dev/v1, kind: XWidget, name: w1-abcde, uid: %s, controller: true}]
`, xr.GetUID()))
		rec.expect(t, from,
			want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: cm.GetUID(), target: xr.GetUID(), reason: "composed resource changed"},
			want{service: route.Renderer, object: comp.GetUID(), target: comp.GetUID()},
		)

		// Nothing names ConfigMaps once the Composition is gone.
		c.delete(t, gvrComp, "", comp.GetName())
		poll.Until(t, 30*time.Second, func() error {
			if _, _, ok := w.watching(gvkCM); ok {
				return fmt.Errorf("still watching %s", gvkCM)
			}
			return nil
		})
		c.delete(t, gvrCM, "team-a", cm.GetName())
	})

	t.Run("WatchRequests", func(t *testing.T) {
		env := c.create(t, gvrEnv, `{apiVersion: apiextensions.crossplane.io/v1beta1, kind: EnvironmentConfig, metadata: {name: gold}, data: {a: b}}`)
		if err := watchreq.Put(ctx, kv, string(xr.GetUID()), []watchreq.Request{
			{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", MatchLabels: map[string]string{"tier": "gold"}},
			{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "settings"},
		}); err != nil {
			t.Fatalf("Put(): %v", err)
		}
		w.expectWatching(t, gvkEnvCfg, route.RoleEnvironmentConfig|route.RoleRequested)
		w.expectWatching(t, gvkCM, route.RoleRequested)

		from := rec.len()
		env = c.label(t, gvrEnv, "", env.GetName(), "tier", "gold")
		cm := c.create(t, gvrCM, `{apiVersion: v1, kind: ConfigMap, metadata: {name: settings, namespace: team-a}}`)
		other := c.create(t, gvrCM, `{apiVersion: v1, kind: ConfigMap, metadata: {name: other, namespace: team-a}}`)
		rec.expect(t, from,
			want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_MODIFIED, object: env.GetUID(), target: env.GetUID(), reason: "environment config changed"},
			want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_MODIFIED, object: env.GetUID(), target: xr.GetUID(), reason: "watched resource changed"},
			want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: cm.GetUID(), target: xr.GetUID(), reason: "watched resource changed"},
		)
		for _, p := range rec.since(from) {
			if p.ev.GetObject().GetUid() == string(other.GetUID()) {
				t.Errorf("published an event for a ConfigMap nobody asked to watch: %s", dump([]published{p}))
			}
		}

		// Dropping the requests stops the ConfigMap watch.
		if err := watchreq.Delete(ctx, kv, string(xr.GetUID())); err != nil {
			t.Fatalf("Delete(): %v", err)
		}
		poll.Until(t, 30*time.Second, func() error {
			if _, _, ok := w.watching(gvkCM); ok {
				return fmt.Errorf("still watching %s", gvkCM)
			}
			return nil
		})
		w.expectWatching(t, gvkEnvCfg, route.RoleEnvironmentConfig)
	})

	t.Run("WideningKeepsQuiet", func(t *testing.T) {
		// A kind watched only as composed (labelled objects only) that is then
		// requested is watched again without a selector; objects already
		// published are not published again.
		// A second composed NopResource is deleted while the watch changes
		// over: its deletion is published either way.
		nop2 := c.create(t, gvrNop, fmt.Sprintf(`
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: w1-abcde-nop2
  labels: {crossplane.io/composite: w1-abcde}
  ownerReferences: [{apiVersion: watch.test.loom.dev/v1, kind: XWidget, name: w1-abcde, uid: %s, controller: true}]
spec: {forProvider: {}}
`, xr.GetUID()))
		rec.expect(t, 0, want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: nop2.GetUID()})
		before := rec.len()
		if err := watchreq.Put(ctx, kv, string(xr.GetUID()), []watchreq.Request{
			{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource", Name: "w1-abcde-nop"},
		}); err != nil {
			t.Fatalf("Put(): %v", err)
		}
		c.delete(t, gvrNop, "", nop2.GetName())
		w.expectWatching(t, gvkNop, route.RoleComposed|route.RoleRequested)
		rec.expect(t, before, want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_DELETED, object: nop2.GetUID(), target: xr.GetUID()})
		if _, sp, _ := w.watching(gvkNop); sp.selector != "" {
			t.Errorf("NopResources: want no selector once requested, got %q", sp.selector)
		}
		for _, p := range rec.since(before) {
			if p.ev.GetObject().GetUid() == string(nop.GetUID()) {
				t.Errorf("re-published an unchanged NopResource after widening its watch: %s", dump([]published{p}))
			}
		}
		if err := watchreq.Delete(ctx, kv, string(xr.GetUID())); err != nil {
			t.Fatalf("Delete(): %v", err)
		}
		w.expectWatching(t, gvkNop, route.RoleComposed)
	})

	t.Run("WithoutReferenceRules", func(t *testing.T) {
		// With no ReferenceRule naming NopResources, their changes and the
		// XR's do not go to the binder for the XR (its claim still hears
		// of the XR).
		c.delete(t, gvrRule, "", rule.GetName())
		poll.Until(t, 30*time.Second, func() error {
			if (lookup{w}).Referenced(gvkNop.GroupKind()) {
				return errors.New("the watcher still knows a rule naming NopResource")
			}
			return nil
		})
		from := rec.len()
		n := c.label(t, gvrNop, "", nop.GetName(), "step", "no-rules")
		x := c.label(t, gvrXR, "", xr.GetName(), "step", "no-rules")
		rec.expect(t, from,
			want{service: route.Renderer, object: n.GetUID(), target: xr.GetUID(), rv: n.GetResourceVersion()},
			want{service: route.Secrets, object: n.GetUID(), target: xr.GetUID(), rv: n.GetResourceVersion()},
			want{service: route.Renderer, object: x.GetUID(), target: x.GetUID(), rv: x.GetResourceVersion()},
			want{service: route.Binder, object: x.GetUID(), target: claim.GetUID(), rv: x.GetResourceVersion()},
		)
		for _, p := range rec.since(from) {
			if p.service == route.Binder && p.ev.GetTarget().GetUid() == string(xr.GetUID()) {
				t.Errorf("the binder heard of the XR without a ReferenceRule for its kinds:\n%s", dump([]published{p}))
			}
		}
		nop, xr = n, x
	})

	t.Run("Resync", func(t *testing.T) {
		from := rec.len()
		if err := w.resync(ctx); err != nil {
			t.Fatalf("resync(): %v", err)
		}
		got := rec.since(from)
		seen := map[string]int{}
		for _, p := range got {
			if p.ev.GetType() != eventsv1.EventType_EVENT_TYPE_RESYNC {
				continue
			}
			seen[p.service+"/"+p.ev.GetTarget().GetUid()]++
		}
		for k, n := range seen {
			if n != 1 {
				t.Errorf("resync published %d events for %s; want one per service and target", n, k)
			}
		}
		rec.expect(t, from,
			// The XR names itself, not its NopResource, for every service.
			want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_RESYNC, object: xr.GetUID(), target: xr.GetUID()},
			want{service: route.Secrets, typ: eventsv1.EventType_EVENT_TYPE_RESYNC, object: xr.GetUID(), target: xr.GetUID()},
			want{service: route.Binder, typ: eventsv1.EventType_EVENT_TYPE_RESYNC, object: claim.GetUID(), target: claim.GetUID()},
			want{service: route.Secrets, typ: eventsv1.EventType_EVENT_TYPE_RESYNC, object: claim.GetUID(), target: claim.GetUID()},
		)
	})

	t.Run("Deletes", func(t *testing.T) {
		from := rec.len()
		c.delete(t, gvrNop, "", nop.GetName())
		c.delete(t, gvrClaim, "team-a", claim.GetName())
		c.delete(t, gvrXR, "", xr.GetName())
		rec.expect(t, from,
			want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_DELETED, object: nop.GetUID(), target: xr.GetUID()},
			want{service: route.Binder, typ: eventsv1.EventType_EVENT_TYPE_DELETED, object: claim.GetUID(), target: claim.GetUID()},
			want{service: route.Renderer, typ: eventsv1.EventType_EVENT_TYPE_DELETED, object: xr.GetUID(), target: xr.GetUID()},
		)
		// No XR names NopResources any more.
		poll.Until(t, 30*time.Second, func() error {
			if _, _, ok := w.watching(gvkNop); ok {
				return fmt.Errorf("still watching %s", gvkNop)
			}
			return nil
		})
	})

	t.Run("XRDGoes", func(t *testing.T) {
		c.patch(t, gvrXRD, "", xrd.GetName(), `{"metadata":{"labels":{"step":"delete"}}}`)
		c.delete(t, gvrXRD, "", xrd.GetName())
		poll.Until(t, 30*time.Second, func() error {
			for _, gvk := range []schema.GroupVersionKind{gvkXR, gvkClaim} {
				if _, _, ok := w.watching(gvk); ok {
					return fmt.Errorf("still watching %s", gvk)
				}
			}
			return nil
		})
	})
}
