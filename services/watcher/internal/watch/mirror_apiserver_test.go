package watch

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/loomxr/loom/pkg/bus/bustest"
	"github.com/loomxr/loom/pkg/mirror"
	"github.com/loomxr/loom/pkg/testing/poll"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/route"
)

// TestWatcherMirror runs the watcher with a mirror against a real
// kube-apiserver and NATS: a claim is in the mirror, at the resourceVersion
// of its event, before the event is published; its deletion purges it before
// the deletion is published; and a claim deleted while no watcher ran is
// purged by the next watcher's initial resync, which mirrors whole the
// objects it lists.
func TestWatcherMirror(t *testing.T) {
	s := startControlPlane(t)
	ctx := t.Context()
	rc := s.RESTConfig()
	dyn := dynamic.NewForConfigOrDie(rc)
	md := metadata.NewForConfigOrDie(rc)
	disc := discovery.NewDiscoveryClientForConfigOrDie(rc)
	c := cluster{dyn: dyn}

	_, js := bustest.Connect(t, s.NATSURL())
	kv, err := mirror.EnsureBucket(ctx, js, 1)
	if err != nil {
		t.Fatalf("EnsureBucket(): %v", err)
	}
	r := mirror.NewReader(kv)

	c.create(t, gvrXRD, `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xwidgets.watch.test.loom.dev}
spec:
  group: watch.test.loom.dev
  names: {kind: XWidget, plural: xwidgets}
  claimNames: {kind: Widget, plural: widgets}
  versions: [{name: v1, served: true, referenceable: true}]
`)
	c.create(t, gvrCRD, fmt.Sprintf(crdTemplate, "xwidgets", "XWidget", "xwidget", "Cluster"))
	c.create(t, gvrCRD, fmt.Sprintf(crdTemplate, "widgets", "Widget", "widget", "Namespaced"))
	c.create(t, gvrNS, `{apiVersion: v1, kind: Namespace, metadata: {name: team-a}}`)

	pub := &mirrorChecker{r: r}
	stop := runMirroring(t, dyn, md, disc, pub, mirror.NewWriter(js, kv))

	const claimYAML = `{apiVersion: watch.test.loom.dev/v1, kind: Widget, metadata: {name: %s, namespace: team-a}, spec: {size: small}}`
	t.Run("PutBeforePublish", func(t *testing.T) {
		from := pub.len()
		claim := c.create(t, gvrClaim, fmt.Sprintf(claimYAML, "w1"))
		pub.expect(t, from, want{service: route.Binder, typ: eventsv1.EventType_EVENT_TYPE_ADDED, object: claim.GetUID(), rv: claim.GetResourceVersion()})
		pub.checkMirrored(t)
		got, state, err := r.Get(ctx, gvkClaim, "team-a", "w1", claim.GetResourceVersion())
		if err != nil || state != mirror.Fresh {
			t.Fatalf("Get(w1) = %s, %v; want Fresh", state, err)
		}
		if size, _, _ := unstructured.NestedString(got.Object, "spec", "size"); size != "small" || got.GetResourceVersion() != claim.GetResourceVersion() {
			t.Errorf("mirror holds spec.size %q at resourceVersion %s; want the full claim at %s", size, got.GetResourceVersion(), claim.GetResourceVersion())
		}
	})

	t.Run("DeletePurges", func(t *testing.T) {
		from := pub.len()
		c.delete(t, gvrClaim, "team-a", "w1")
		pub.expect(t, from, want{service: route.Binder, typ: eventsv1.EventType_EVENT_TYPE_DELETED})
		pub.checkMirrored(t)
		if _, state, err := r.Get(ctx, gvkClaim, "team-a", "w1", ""); err != nil || state != mirror.Unknown {
			t.Errorf("Get(w1) after delete = %s, %v; want Unknown", state, err)
		}
	})

	t.Run("ComposedTurnedReady", func(t *testing.T) {
		// Held in full for the mirror, a composed resource shows its
		// status: turning Ready is urgent for the renderer, any other
		// change of its status is not.
		xr := c.create(t, gvrXR, `{apiVersion: watch.test.loom.dev/v1, kind: XWidget, metadata: {name: w9-abcde}, spec: {resourceRefs: [{apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: w9-abcde-nop}]}}`)
		from := pub.len()
		nop := c.create(t, gvrNop, fmt.Sprintf(`
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: w9-abcde-nop
  labels: {crossplane.io/composite: w9-abcde}
  ownerReferences: [{apiVersion: watch.test.loom.dev/v1, kind: XWidget, name: w9-abcde, uid: %s, controller: true}]
spec: {forProvider: {}}
`, xr.GetUID()))
		// (The creation reaches the renderer; not the secrets service,
		// whose XR is not Ready.)
		pub.expect(t, from, want{service: route.Renderer, object: nop.GetUID(), target: xr.GetUID()})
		setReady := func(status string) *unstructured.Unstructured {
			t.Helper()
			patch := `{"status":{"conditions":[{"type":"Ready","status":"` + status + `","reason":"Test","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
			out, err := c.resource(gvrNop, "").Patch(t.Context(), nop.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
			if err != nil {
				t.Fatalf("cannot set the Ready condition of %s: %v", nop.GetName(), err)
			}
			return out
		}
		from = pub.len()
		unready := setReady("False")
		ready := setReady("True")
		pub.expect(t, from,
			want{service: route.Renderer, object: nop.GetUID(), target: xr.GetUID(), rv: unready.GetResourceVersion(), reason: "composed resource status changed"},
			want{service: route.Renderer, object: nop.GetUID(), target: xr.GetUID(), rv: ready.GetResourceVersion(), reason: "composed resource turned Ready"},
		)
		for _, p := range pub.since(from) {
			// Only the two status changes: the creation's deliveries may
			// still be coming in when the window opens (a change's
			// deliveries are published in service order, the renderer's
			// first).
			rv := p.ev.GetResourceVersion()
			if types.UID(p.ev.GetObject().GetUid()) != nop.GetUID() || (rv != unready.GetResourceVersion() && rv != ready.GetResourceVersion()) {
				continue
			}
			want := p.service == route.Renderer && rv == ready.GetResourceVersion()
			if p.ev.GetUrgent() != want {
				t.Errorf("urgent = %t, want %t (only the renderer's delivery of the turn to Ready is urgent):\n%s", p.ev.GetUrgent(), want, dump([]published{p}))
			}
			if p.service == route.Secrets {
				t.Errorf("a change of a composed resource's conditions alone reached the secrets service, which reads none:\n%s", dump([]published{p}))
			}
		}
		// A status field outside the conditions is what a connection
		// detail of type FromFieldPath may read: it reaches the secrets
		// service.
		from = pub.len()
		out, err := c.resource(gvrNop, "").Patch(t.Context(), nop.GetName(), types.MergePatchType, []byte(`{"status":{"atProvider":{"endpoint":"db.example.org"}}}`), metav1.PatchOptions{}, "status")
		if err != nil {
			t.Fatalf("cannot set status.atProvider of %s: %v", nop.GetName(), err)
		}
		pub.expect(t, from,
			want{service: route.Renderer, object: nop.GetUID(), target: xr.GetUID(), rv: out.GetResourceVersion(), reason: "composed resource status changed"},
			want{service: route.Secrets, object: nop.GetUID(), target: xr.GetUID(), rv: out.GetResourceVersion(), reason: "composed resource status changed"},
		)
	})

	t.Run("ReferenceTargetsWaitForReady", func(t *testing.T) {
		// A ReferenceRule whose references wait for their target to be
		// Ready: a target's creation and its status before it turns
		// Ready cannot resolve a reference, and do not reach the binder;
		// the creation of a resource holding a selector and the target's
		// turn to Ready do. A resource of the target kind that the
		// selector would not pick (no matching label) is no news to the
		// binder even when Ready.
		from := pub.len()
		rule := c.create(t, gvrRule, `
apiVersion: loom.dev/v1alpha1
kind: ReferenceRule
metadata: {name: nops-wait}
spec:
  for: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
  references:
  - valueField: spec.forProvider.fields.network
    referenceField: spec.forProvider.fields.networkRef
    selectorField: spec.forProvider.fields.networkSelector
    target: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    fromFieldPath: status.atProvider.fields.selfLink
    waitFor: {conditionType: Ready}
`)
		defer c.delete(t, gvrRule, "", rule.GetName())
		pub.expect(t, from, want{service: route.Binder, object: rule.GetUID(), target: rule.GetUID()})

		xr := c.create(t, gvrXR, `{apiVersion: watch.test.loom.dev/v1, kind: XWidget, metadata: {name: w8-abcde}, spec: {resourceRefs: [{apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: w8-abcde-network}, {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: w8-abcde-database}, {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: w8-abcde-cache}]}}`)
		composed := `
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: w8-abcde-%s
  labels: {crossplane.io/composite: w8-abcde, role: %[1]s}
  ownerReferences: [{apiVersion: watch.test.loom.dev/v1, kind: XWidget, name: w8-abcde, uid: %s, controller: true}]
spec: {forProvider: {fields: %s}}
`
		from = pub.len()
		network := c.create(t, gvrNop, fmt.Sprintf(composed, "network", xr.GetUID(), `{}`))
		cache := c.create(t, gvrNop, fmt.Sprintf(composed, "cache", xr.GetUID(), `{}`))
		database := c.create(t, gvrNop, fmt.Sprintf(composed, "database", xr.GetUID(), `{networkSelector: {matchControllerRef: true, matchLabels: {role: network}}}`))
		// One informer, in order: once the database's deliveries are
		// there, the network's are too.
		pub.expect(t, from,
			want{service: route.Renderer, object: network.GetUID(), target: xr.GetUID()},
			want{service: route.Renderer, object: database.GetUID(), target: xr.GetUID()},
			want{service: route.Binder, object: database.GetUID(), target: xr.GetUID(), rv: database.GetResourceVersion()},
		)
		setReady := func(o *unstructured.Unstructured, status string) *unstructured.Unstructured {
			t.Helper()
			patch := `{"status":{"atProvider":{"fields":{"selfLink":"networks/n1"}},"conditions":[{"type":"Ready","status":"` + status + `","reason":"Test","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
			out, err := c.resource(gvrNop, "").Patch(t.Context(), o.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
			if err != nil {
				t.Fatalf("cannot set the status of %s: %v", o.GetName(), err)
			}
			return out
		}
		cacheReady := setReady(cache, "True")
		unready := setReady(network, "False")
		ready := setReady(network, "True")
		pub.expect(t, from,
			want{service: route.Renderer, object: cache.GetUID(), target: xr.GetUID(), rv: cacheReady.GetResourceVersion()},
			want{service: route.Renderer, object: network.GetUID(), target: xr.GetUID(), rv: unready.GetResourceVersion()},
			want{service: route.Binder, object: network.GetUID(), target: xr.GetUID(), rv: ready.GetResourceVersion()},
		)
		for _, p := range pub.since(from) {
			if p.service == route.Binder && types.UID(p.ev.GetObject().GetUid()) == network.GetUID() && p.ev.GetResourceVersion() != ready.GetResourceVersion() {
				t.Errorf("a change of a reference target that does not show Ready reached the binder:\n%s", dump([]published{p}))
			}
			if p.service == route.Binder && types.UID(p.ev.GetObject().GetUid()) == cache.GetUID() {
				t.Errorf("a Ready resource of the target kind that the pending selector does not pick reached the binder:\n%s", dump([]published{p}))
			}
		}

		// The reference resolves (its value is written, as the binder
		// would): the database's spec change is news to the binder, and
		// then nothing of the XR is pending, so a later change of the
		// Ready target's status is not.
		from = pub.len()
		resolved := c.patch(t, gvrNop, "", database.GetName(), `{"spec":{"forProvider":{"fields":{"networkRef":{"name":"w8-abcde-network"},"network":"networks/n1"}}}}`)
		pub.expect(t, from, want{service: route.Binder, object: database.GetUID(), target: xr.GetUID(), rv: resolved.GetResourceVersion()})
		from = pub.len()
		later, err := c.resource(gvrNop, "").Patch(t.Context(), network.GetName(), types.MergePatchType, []byte(`{"status":{"atProvider":{"fields":{"selfLink":"networks/n2"}}}}`), metav1.PatchOptions{}, "status")
		if err != nil {
			t.Fatalf("cannot patch the status of %s: %v", network.GetName(), err)
		}
		pub.expect(t, from, want{service: route.Renderer, object: network.GetUID(), target: xr.GetUID(), rv: later.GetResourceVersion()})
		for _, p := range pub.since(from) {
			if p.service == route.Binder && types.UID(p.ev.GetObject().GetUid()) == network.GetUID() {
				t.Errorf("a change of a Ready target reached the binder when every reference of its XR had resolved:\n%s", dump([]published{p}))
			}
		}
	})

	t.Run("StatusNoConnectionDetailReads", func(t *testing.T) {
		// The secrets service reads a composed resource's status only
		// into connection details of type FromFieldPath: a change of the
		// status of a resource whose template has none (cache) does not
		// reach it; one of a resource whose template has one (network)
		// does.
		from := pub.len()
		comp := c.create(t, gvrComp, `
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: w7-details}
spec:
  compositeTypeRef: {apiVersion: watch.test.loom.dev/v1, kind: XWidget}
  resources:
  - name: network
    base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    connectionDetails: [{name: endpoint, type: FromFieldPath, fromFieldPath: status.atProvider.selfLink}]
  - name: cache
    base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    connectionDetails: [{name: password, type: FromConnectionSecretKey, fromConnectionSecretKey: password}]
`)
		defer c.delete(t, gvrComp, "", comp.GetName())
		pub.expect(t, from, want{service: route.Renderer, object: comp.GetUID(), target: comp.GetUID()})
		xr := c.create(t, gvrXR, `{apiVersion: watch.test.loom.dev/v1, kind: XWidget, metadata: {name: w7-abcde}, spec: {compositionRef: {name: w7-details}, resourceRefs: [{apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: w7-abcde-network}, {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: w7-abcde-cache}]}}`)
		from = pub.len()
		network := c.createComposed(t, xr, "network")
		cache := c.createComposed(t, xr, "cache")
		pub.expect(t, from, want{service: route.Renderer, object: cache.GetUID(), target: xr.GetUID()})
		setStatus := func(name string) *unstructured.Unstructured {
			t.Helper()
			out, err := c.resource(gvrNop, "").Patch(t.Context(), name, types.MergePatchType, []byte(`{"status":{"atProvider":{"selfLink":"`+rand.Text()+`"}}}`), metav1.PatchOptions{}, "status")
			if err != nil {
				t.Fatalf("cannot patch the status of %s: %v", name, err)
			}
			return out
		}
		from = pub.len()
		cs := setStatus(cache.GetName())
		ns := setStatus(network.GetName())
		// Changes of one kind are published in the order they came: once
		// the network's is, the cache's has been routed.
		pub.expect(t, from,
			want{service: route.Secrets, object: network.GetUID(), target: xr.GetUID(), rv: ns.GetResourceVersion()},
		)
		for _, p := range pub.since(from) {
			if p.service == route.Secrets && types.UID(p.ev.GetObject().GetUid()) == cache.GetUID() {
				t.Errorf("a change of the status of a composed resource whose connection details read none of it (rv %s) reached the secrets service:\n%s", cs.GetResourceVersion(), dump([]published{p}))
			}
			if p.service == route.Renderer {
				t.Errorf("a change of the status of a composed resource that left its Ready condition as it was, of a template whose patches and readiness checks read none of it, reached the renderer:\n%s", dump([]published{p}))
			}
		}
	})

	t.Run("FirstStatusWithheldForSiblings", func(t *testing.T) {
		// While an XR has no Ready condition and a composed resource
		// that must be Ready (a, b: the default readiness check) has no
		// status yet, a sibling's turn to Ready cannot change a render:
		// the renderer does not hear of a's turn while b has no status
		// (a's patch reads its status into the XR's status only, which
		// waits with the rest of it), and hears of b's although c has
		// none (its check is None). The
		// XR's first Ready condition, not True, then goes back to the
		// renderer: a's turn was withheld.
		from := pub.len()
		comp := c.create(t, gvrComp, `
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: w6-first}
spec:
  compositeTypeRef: {apiVersion: watch.test.loom.dev/v1, kind: XWidget}
  resources:
  - name: a
    base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    patches: [{type: ToCompositeFieldPath, fromFieldPath: status.atProvider.tier, toFieldPath: status.tier}]
  - {name: b, base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}}
  - {name: c, base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}, readinessChecks: [{type: None}]}
`)
		defer c.delete(t, gvrComp, "", comp.GetName())
		pub.expect(t, from, want{service: route.Renderer, object: comp.GetUID(), target: comp.GetUID()})
		from = pub.len()
		xr := c.create(t, gvrXR, `{apiVersion: watch.test.loom.dev/v1, kind: XWidget, metadata: {name: w6-abcde}, spec: {compositionRef: {name: w6-first}}}`)
		pub.expect(t, from, want{service: route.Renderer, object: xr.GetUID(), target: xr.GetUID()})
		from = pub.len()
		var res []*unstructured.Unstructured
		for _, n := range []string{"a", "b", "c"} {
			res = append(res, c.createComposed(t, xr, n))
		}
		pub.expect(t, from, want{service: route.Renderer, object: res[2].GetUID(), target: xr.GetUID()})
		setReady := func(u *unstructured.Unstructured) *unstructured.Unstructured {
			t.Helper()
			patch := `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Available","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
			out, err := c.resource(gvrNop, "").Patch(t.Context(), u.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
			if err != nil {
				t.Fatalf("cannot set the Ready condition of %s: %v", u.GetName(), err)
			}
			return out
		}
		from = pub.len()
		a := setReady(res[0])
		b := setReady(res[1])
		// Changes of one kind are published in the order they came: once
		// b's is, a's has been routed.
		pub.expect(t, from, want{service: route.Renderer, object: b.GetUID(), target: xr.GetUID(), rv: b.GetResourceVersion(), reason: "composed resource turned Ready"})
		for _, p := range pub.since(from) {
			if p.service == route.Renderer && types.UID(p.ev.GetObject().GetUid()) == a.GetUID() {
				t.Errorf("a composed resource's turn to Ready (rv %s) reached the renderer while a sibling that must be Ready had no status and the XR no Ready condition:\n%s", a.GetResourceVersion(), dump([]published{p}))
			}
		}
		from = pub.len()
		st, err := c.resource(gvrXR, "").Patch(t.Context(), xr.GetName(), types.MergePatchType,
			[]byte(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Creating","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`),
			metav1.PatchOptions{FieldManager: "loom-renderer"}, "status")
		if err != nil {
			t.Fatalf("cannot write the status of %s: %v", xr.GetName(), err)
		}
		pub.expect(t, from, want{service: route.Renderer, object: xr.GetUID(), target: xr.GetUID(), rv: st.GetResourceVersion(), reason: "composite resource readiness withheld"})
	})

	t.Run("ResyncPurgesWhatVanishedMeanwhile", func(t *testing.T) {
		from := pub.len()
		claim := c.create(t, gvrClaim, fmt.Sprintf(claimYAML, "w2"))
		pub.expect(t, from, want{service: route.Binder, object: claim.GetUID(), rv: claim.GetResourceVersion()})
		stop()
		c.delete(t, gvrClaim, "team-a", "w2")
		if _, state, err := r.Get(ctx, gvkClaim, "team-a", "w2", ""); err != nil || state != mirror.Fresh {
			t.Fatalf("Get(w2) with no watcher running = %s, %v; want the stale entry, Fresh", state, err)
		}
		listed := c.create(t, gvrClaim, fmt.Sprintf(claimYAML, "w3"))
		runMirroring(t, dyn, md, disc, &mirrorChecker{r: r}, mirror.NewWriter(js, kv))
		if _, state, err := r.Get(ctx, gvkClaim, "team-a", "w2", ""); err != nil || state != mirror.Unknown {
			t.Errorf("Get(w2) after the initial resync = %s, %v; want Unknown", state, err)
		}
		// An object the watcher's initial list finds (by watch-list, whose
		// reflector transforms each object twice) is mirrored whole.
		got, state, err := r.Get(ctx, gvkClaim, "team-a", "w3", listed.GetResourceVersion())
		if err != nil || state != mirror.Fresh {
			t.Fatalf("Get(w3) after the initial resync = %s, %v; want Fresh", state, err)
		}
		if size, _, _ := unstructured.NestedString(got.Object, "spec", "size"); size != "small" || len(got.GetManagedFields()) == 0 {
			t.Errorf("mirror holds spec.size %q and %d managed-fields entries of a listed claim; want the full claim", size, len(got.GetManagedFields()))
		}
	})
}

// runMirroring runs a watcher that mirrors through mw until the returned stop is
// called or the test ends, and returns once the watcher is ready (its
// initial resync is done).
func runMirroring(t *testing.T, dyn dynamic.Interface, md metadata.Interface, disc discovery.DiscoveryInterface, pub Publisher, mw *mirror.Writer) (stop func()) {
	t.Helper()
	logs := io.Writer(io.Discard)
	if testing.Verbose() {
		logs = os.Stderr
	}
	w := New(dyn, md, disc, pub,
		WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		WithMirror(mw),
		WithResyncPeriod(0),
		WithSyncTimeout(20*time.Second),
	)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run(): %v", err)
		}
	}
	t.Cleanup(stop)
	poll.Until(t, time.Minute, func() error { return w.Ready(t.Context()) })
	w.expectWatching(t, gvkClaim, route.RoleClaim)
	return stop
}

// createComposed creates a NopResource composed by the XWidget xr from its
// template (the composition-resource-name annotation), named
// <xr's name>-<template>.
func (c cluster) createComposed(t *testing.T, xr *unstructured.Unstructured, template string) *unstructured.Unstructured {
	t.Helper()
	return c.create(t, gvrNop, fmt.Sprintf(`
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: %[1]s-%[2]s
  labels: {crossplane.io/composite: %[1]s}
  annotations: {crossplane.io/composition-resource-name: %[2]s}
  ownerReferences: [{apiVersion: watch.test.loom.dev/v1, kind: XWidget, name: %[1]s, uid: %[3]s, controller: true}]
spec: {forProvider: {}}
`, xr.GetName(), template, xr.GetUID()))
}
