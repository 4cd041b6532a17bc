package route_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/bus/bustest"
	"github.com/loomxr/loom/pkg/reconcile"
	"github.com/loomxr/loom/pkg/stack"
	"github.com/loomxr/loom/pkg/stack/stacktest"
	"github.com/loomxr/loom/pkg/testing/poll"
	"github.com/loomxr/loom/pkg/watchreq"
	"github.com/loomxr/loom/pkg/xrd"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/renderer/internal/composite"
	"github.com/loomxr/loom/services/renderer/internal/definition"
	"github.com/loomxr/loom/services/renderer/internal/kube"
	"github.com/loomxr/loom/services/renderer/internal/revision"
	"github.com/loomxr/loom/services/renderer/internal/route"
)

// apiPoll spaces the polls of a test that reads the kube-apiserver.
var apiPoll = poll.Every(100 * time.Millisecond)

// These tests run the renderer's handler in-process against a real
// kube-apiserver (the local control plane, without any Loom service) and a
// real embedded NATS server. They play the watcher by handing the handler
// the requests the watcher would route, and the provider by writing the
// NopResources' status, and count every API request the renderer makes.

// env is the renderer wired as main wires it, with an admin client beside it.
type env struct {
	t       *testing.T
	handler *route.Handler
	admin   dynamic.Interface
	js      jetstream.JetStream
	cfg     bus.Config
	// superseded is what reconcile.Superseded says to the handler: a newer
	// event for the target has come.
	superseded bool
}

func startEnv(t *testing.T) *env {
	t.Helper()
	s := stacktest.ControlPlane(t, stack.Options{})

	srv := bustest.Run(t)
	nc, js := bustest.Connect(t, srv.URL())
	cfg := bus.Config{}
	if err := bus.EnsureStreams(t.Context(), js, cfg); err != nil {
		t.Fatal(err)
	}
	kv, err := watchreq.EnsureBucket(t.Context(), js, 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc

	rc := rest.CopyConfig(s.RESTConfig())
	rc.QPS, rc.Burst = 200, 400
	rc.Wrap(kube.Count(nil))
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	client := kube.New(dyn, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	index := xrd.NewIndex(client)
	store := revision.NewStore(client, time.Minute)
	pub := bus.NewPublisher(js, bus.WithConfig(cfg))
	h := route.NewHandler(index,
		definition.NewReconciler(client, index, definition.WithLogger(log)),
		revision.NewReconciler(client, store, index, pub, bus.Renderer, revision.WithLogger(log)),
		// Each render writes what it found, first status included, so
		// that the test sees one render's writes at a time.
		composite.NewReconciler(client, index, store, composite.WithWatches(composite.KVWatches{KV: kv}), composite.WithLogger(log), composite.WithFirstStatusWait(0)),
		nil, log)

	admin, err := dynamic.NewForConfig(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, handler: h, admin: admin, js: js, cfg: cfg}
}

// handle hands the handler a request for target, as the watcher would
// after a change of cause (nil: the target itself), and returns what it
// returned and the API requests it made.
func (e *env) handle(target, cause *unstructured.Unstructured) (reconcile.Result, *kube.Tally, error) {
	e.t.Helper()
	if cause == nil {
		cause = target
	}
	return e.handleEvent(target, &eventsv1.Event{Object: ref(cause), Type: eventsv1.EventType_EVENT_TYPE_MODIFIED})
}

// handleEvent hands the handler ev for target, and returns what it
// returned and the API requests it made.
func (e *env) handleEvent(target *unstructured.Unstructured, ev *eventsv1.Event) (reconcile.Result, *kube.Tally, error) {
	e.t.Helper()
	tally := &kube.Tally{}
	ctx := kube.WithTally(e.t.Context(), tally)
	superseded := e.superseded
	ctx = reconcile.WithSuperseded(ctx, func() bool { return superseded })
	res, err := e.handler.Handle(ctx, reconcile.Request{Event: ev, Target: ref(target)})
	return res, tally, err
}

func ref(u *unstructured.Unstructured) *eventsv1.ObjectRef {
	gvk := u.GroupVersionKind()
	return &eventsv1.ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName(), Uid: string(u.GetUID())}
}

// resource returns the admin client of gvk.
func (e *env) resource(gvk schema.GroupVersionKind, namespace string) dynamic.ResourceInterface {
	plural := strings.ToLower(gvk.Kind) + "s"
	r := e.admin.Resource(gvk.GroupVersion().WithResource(plural))
	if namespace != "" {
		return r.Namespace(namespace)
	}
	return r
}

// apply server-side applies a YAML document as the admin.
func (e *env) apply(doc string) *unstructured.Unstructured {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		e.t.Fatal(err)
	}
	got, err := e.resource(u.GroupVersionKind(), u.GetNamespace()).Apply(e.t.Context(), u.GetName(), u, metav1.ApplyOptions{FieldManager: "test", Force: true})
	if err != nil {
		e.t.Fatalf("cannot apply %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return got
}

func (e *env) get(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	return e.resource(gvk, namespace).Get(e.t.Context(), name, metav1.GetOptions{})
}

func (e *env) mustGet(gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	e.t.Helper()
	u, err := e.get(gvk, namespace, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return u
}

// provide plays the provider: it mirrors a NopResource's
// spec.forProvider.fields to status.atProvider.fields and sets Ready=True
// (long ago).
func (e *env) provide(u *unstructured.Unstructured) {
	e.t.Helper()
	e.provideAt(u, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// provideAt plays the provider like provide, with a Ready condition that
// turned True at t.
func (e *env) provideAt(u *unstructured.Unstructured, t time.Time) {
	e.t.Helper()
	fields, _, _ := unstructured.NestedMap(u.Object, "spec", "forProvider", "fields")
	status := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"metadata": map[string]any{"name": u.GetName()},
		"status": map[string]any{
			"atProvider": map[string]any{"fields": fields},
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": t.UTC().Format(time.RFC3339)}},
		},
	}}
	if _, err := e.resource(u.GroupVersionKind(), "").ApplyStatus(e.t.Context(), u.GetName(), status, metav1.ApplyOptions{FieldManager: "test-provider", Force: true}); err != nil {
		e.t.Fatal(err)
	}
}

var (
	xrdGVK  = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositeResourceDefinition"}
	crdGVK  = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	revGVK  = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositionRevision"}
	xnopGVK = schema.GroupVersionKind{Group: "it.loom.dev", Version: "v1alpha1", Kind: "XNop"}
	nopGVK  = schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}
)

const testXRD = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xnops.it.loom.dev
spec:
  group: it.loom.dev
  names: {kind: XNop, plural: xnops}
  claimNames: {kind: Nop, plural: nops}
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              parameters:
                type: object
                properties:
                  size: {type: string}
                  replicas: {type: integer}
          status:
            type: object
            properties:
              tier: {type: string}
`

// testComposition composes three NopResources with patches, transforms and
// readiness checks; beta's replicas are multiplied by factor.
func testComposition(factor int) string {
	return fmt.Sprintf(`
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xnops
spec:
  compositeTypeRef: {apiVersion: it.loom.dev/v1alpha1, kind: XNop}
  resources:
  - name: alpha
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider:
          fields: {tier: unknown}
    patches:
    - fromFieldPath: spec.parameters.size
      toFieldPath: spec.forProvider.fields.tier
      transforms:
      - type: map
        map: {small: tier-s, large: tier-l}
    - type: ToCompositeFieldPath
      fromFieldPath: status.atProvider.fields.tier
      toFieldPath: status.tier
  - name: beta
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider:
          fields: {phase: ready}
    patches:
    - fromFieldPath: spec.parameters.replicas
      toFieldPath: spec.forProvider.fields.replicas
      transforms:
      - type: math
        math: {multiply: %d}
    readinessChecks:
    - type: MatchString
      fieldPath: status.atProvider.fields.phase
      matchString: ready
  - name: gamma
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider: {}
    patches:
    - type: CombineFromComposite
      combine:
        variables:
        - fromFieldPath: spec.parameters.size
        - fromFieldPath: metadata.name
        strategy: string
        string: {fmt: "%%s-%%s"}
      toFieldPath: spec.forProvider.fields.label
      transforms:
      - type: string
        string: {type: Convert, convert: ToUpper}
    readinessChecks:
    - type: NonEmpty
      fieldPath: status.atProvider.fields.label
`, factor)
}

func TestRenderOnAPIServer(t *testing.T) {
	e := startEnv(t)

	// The XRD: its CRDs, conditions and finalizer.
	xrd := e.apply(testXRD)
	poll.Until(t, 30*time.Second, func() error {
		res, _, err := e.handle(xrd, nil)
		if err != nil {
			return err
		}
		if res.RequeueAfter != 0 {
			return errors.New("the CRDs are not established yet")
		}
		return nil
	}, apiPoll)
	xrd = e.mustGet(xrdGVK, "", xrd.GetName())
	for _, c := range []string{"Established", "Offered", "Synced"} {
		if got := condition(xrd, c); got != "True" {
			t.Errorf("XRD condition %s is %q, want True", c, got)
		}
	}
	if !slices.Contains(xrd.GetFinalizers(), definition.Finalizer) {
		t.Errorf("XRD finalizers %v lack %s", xrd.GetFinalizers(), definition.Finalizer)
	}
	for _, n := range []string{"xnops.it.loom.dev", "nops.it.loom.dev"} {
		if _, err := e.get(crdGVK, "", n); err != nil {
			t.Errorf("CRD %s: %v", n, err)
		}
	}
	if _, tally, err := e.handle(xrd, nil); err != nil || tally.Writes() != 0 {
		t.Errorf("handling an unchanged XRD: err %v, %d writes, want none", err, tally.Writes())
	}

	// The Composition: revision 1.
	comp := e.apply(testComposition(2))
	if _, _, err := e.handle(comp, nil); err != nil {
		t.Fatal(err)
	}
	rev1 := onlyRevision(t, e, 1)
	if want := "xnops-"; !strings.HasPrefix(rev1.GetName(), want) || len(rev1.GetName()) != len(want)+7 {
		t.Errorf("revision name %q, want xnops-<7 hex>", rev1.GetName())
	}
	if _, tally, err := e.handle(comp, nil); err != nil || tally.Writes() != 0 {
		t.Errorf("handling an unchanged Composition: err %v, %d writes, want none", err, tally.Writes())
	}

	// An XR: first render.
	xr := e.apply(`
apiVersion: it.loom.dev/v1alpha1
kind: XNop
metadata: {name: first}
spec:
  parameters: {size: small, replicas: 3}
`)
	_, tally, err := e.handle(xr, nil)
	if err != nil {
		t.Fatal(err)
	}
	// One spec patch (compositionRef, compositionRevisionRef, resourceRefs),
	// three applies, one status apply.
	if tally.Writes() != 5 {
		t.Errorf("first render made %d writes, want 5", tally.Writes())
	}
	t.Logf("first render: %d reads, %d writes", tally.Reads(), tally.Writes())
	xr = e.mustGet(xnopGVK, "", "first")
	if got := nested(xr, "spec", "compositionRef", "name"); got != "xnops" {
		t.Errorf("compositionRef %q, want xnops", got)
	}
	if got := nested(xr, "spec", "compositionRevisionRef", "name"); got != rev1.GetName() {
		t.Errorf("compositionRevisionRef %q, want %q", got, rev1.GetName())
	}
	nops := composedByName(t, e, xr)
	if diff := cmp.Diff([]string{"alpha", "beta", "gamma"}, sortedKeys(nops)); diff != "" {
		t.Fatalf("composed resources: -want, +got:\n%s", diff)
	}
	refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "resourceRefs")
	var names []string
	for _, r := range refs {
		names = append(names, r.(map[string]any)["name"].(string))
	}
	if !slices.IsSorted(names) || len(names) != 3 {
		t.Errorf("resourceRefs %v: want 3 sorted names", names)
	}
	for want, got := range map[string]string{
		"tier-s":      nested(nops["alpha"], "spec", "forProvider", "fields", "tier"),
		"6":           fmt.Sprint(nestedAny(nops["beta"], "spec", "forProvider", "fields", "replicas")),
		"SMALL-FIRST": nested(nops["gamma"], "spec", "forProvider", "fields", "label"),
	} {
		if got != want {
			t.Errorf("patched field %q, want %q", got, want)
		}
	}
	for n, o := range nops {
		if c := metav1.GetControllerOf(o); c == nil || c.UID != xr.GetUID() {
			t.Errorf("composed resource %s is not controlled by the XR", n)
		}
		if o.GetLabels()["crossplane.io/composite"] != "first" {
			t.Errorf("composed resource %s labels %v", n, o.GetLabels())
		}
	}
	if got := condition(xr, "Synced"); got != "True" {
		t.Errorf("Synced %q, want True: %s", got, conditionMessage(xr, "Synced"))
	}
	if got, msg := condition(xr, "Ready"), conditionMessage(xr, "Ready"); got != "False" || msg != "Unready resources: alpha, beta, and gamma" {
		t.Errorf("Ready %q %q, want False with the three unready resources", got, msg)
	}

	// Re-rendering the unchanged XR writes nothing.
	if _, tally, err := e.handle(xr, nil); err != nil || tally.Writes() != 0 {
		t.Fatalf("re-render of an unchanged XR: err %v, %d writes, want none", err, tally.Writes())
	}

	// The provider makes them ready: one status write, then none.
	for _, o := range nops {
		e.provide(o)
	}
	_, tally, err = e.handle(xr, nops["alpha"])
	if err != nil {
		t.Fatal(err)
	}
	if tally.Writes() != 1 {
		t.Errorf("render after the resources turned ready made %d writes, want 1 (status)", tally.Writes())
	}
	t.Logf("ready render: %d reads, %d writes", tally.Reads(), tally.Writes())
	xr = e.mustGet(xnopGVK, "", "first")
	if got := condition(xr, "Ready"); got != "True" {
		t.Errorf("Ready %q, want True: %s", got, conditionMessage(xr, "Ready"))
	}
	if got := nested(xr, "status", "tier"); got != "tier-s" {
		t.Errorf("status.tier %q, want tier-s (ToCompositeFieldPath)", got)
	}
	if _, tally, err := e.handle(xr, nil); err != nil || tally.Writes() != 0 {
		t.Fatalf("re-render of a ready XR: err %v, %d writes, want none", err, tally.Writes())
	}

	// Editing the XR updates the composed resources it patches.
	e.apply(`
apiVersion: it.loom.dev/v1alpha1
kind: XNop
metadata: {name: first}
spec:
  parameters: {size: large, replicas: 3}
`)
	if _, _, err := e.handle(xr, nil); err != nil {
		t.Fatal(err)
	}
	nops = composedByName(t, e, xr)
	if got := nested(nops["alpha"], "spec", "forProvider", "fields", "tier"); got != "tier-l" {
		t.Errorf("alpha tier after the edit %q, want tier-l", got)
	}
	if got := nested(nops["gamma"], "spec", "forProvider", "fields", "label"); got != "LARGE-FIRST" {
		t.Errorf("gamma label after the edit %q, want LARGE-FIRST", got)
	}

	// A Manual XR keeps its revision; an Automatic one follows.
	manual := e.apply(`
apiVersion: it.loom.dev/v1alpha1
kind: XNop
metadata: {name: manual}
spec:
  compositionUpdatePolicy: Manual
  parameters: {size: small, replicas: 1}
`)
	if _, _, err := e.handle(manual, nil); err != nil {
		t.Fatal(err)
	}
	comp = e.apply(testComposition(10))
	if _, _, err := e.handle(comp, nil); err != nil {
		t.Fatal(err)
	}
	revs := revisions(t, e)
	if len(revs) != 2 {
		t.Fatalf("%d revisions, want 2", len(revs))
	}
	rev2 := revs[1]
	if n, _, _ := unstructured.NestedInt64(rev2.Object, "spec", "revision"); n != 2 {
		t.Errorf("new revision number %d, want 2", n)
	}
	// The fan-out requeued the Automatic XR, not the Manual one.
	if !requeued(t, e, xr) {
		t.Error("the Automatic XR was not requeued after the Composition changed")
	}
	if requeued(t, e, manual) {
		t.Error("the Manual XR was requeued after the Composition changed")
	}
	// As the fan-out asks: a render because of the new revision.
	for _, x := range []*unstructured.Unstructured{xr, manual} {
		if _, _, err := e.handle(x, rev2); err != nil {
			t.Fatal(err)
		}
	}
	xr = e.mustGet(xnopGVK, "", "first")
	if got := nested(xr, "spec", "compositionRevisionRef", "name"); got != rev2.GetName() {
		t.Errorf("Automatic XR on revision %q, want %q", got, rev2.GetName())
	}
	if got := fmt.Sprint(nestedAny(composedByName(t, e, xr)["beta"], "spec", "forProvider", "fields", "replicas")); got != "30" {
		t.Errorf("Automatic XR's beta replicas %s, want 30", got)
	}
	manual = e.mustGet(xnopGVK, "", "manual")
	if got := nested(manual, "spec", "compositionRevisionRef", "name"); got != rev1.GetName() {
		t.Errorf("Manual XR on revision %q, want %q", got, rev1.GetName())
	}

	// Going back to the first state renumbers the first revision.
	comp = e.apply(testComposition(2))
	if _, _, err := e.handle(comp, nil); err != nil {
		t.Fatal(err)
	}
	revs = revisions(t, e)
	if len(revs) != 2 {
		t.Fatalf("%d revisions after a rollback, want 2", len(revs))
	}
	if n, _, _ := unstructured.NestedInt64(e.mustGet(revGVK, "", rev1.GetName()).Object, "spec", "revision"); n != 3 {
		t.Errorf("rolled-back revision number %d, want 3", n)
	}

	// A render whose first status would say "not Ready" while a newer
	// event for the XR has come leaves the status to that event's render,
	// which writes it alone.
	late := e.apply(`
apiVersion: it.loom.dev/v1alpha1
kind: XNop
metadata: {name: superseded}
spec:
  parameters: {size: small, replicas: 3}
`)
	e.superseded = true
	_, _, err = e.handle(late, nil)
	e.superseded = false
	if err != nil {
		t.Fatal(err)
	}
	if got := condition(e.mustGet(xnopGVK, "", "superseded"), "Ready"); got != "" {
		t.Errorf("a superseded first render wrote Ready %q, want no status", got)
	}
	if _, tally, err = e.handle(late, nil); err != nil {
		t.Fatal(err)
	}
	if got := condition(e.mustGet(xnopGVK, "", "superseded"), "Ready"); got != "False" || tally.Writes() != 1 {
		t.Errorf("the render after a superseded one: Ready %q after %d writes, want False after 1 (the status)", got, tally.Writes())
	}
	// So does a render whose status would still say "not Ready", with
	// fewer unready resources; a render that finds the XR Ready writes at
	// once, superseded or not.
	composed, err := e.resource(nopGVK, "").List(t.Context(), metav1.ListOptions{LabelSelector: "crossplane.io/composite=superseded"})
	if err != nil || len(composed.Items) != 3 {
		t.Fatalf("composed resources of XR superseded: %d, %v; want 3", len(composed.Items), err)
	}
	e.provide(&composed.Items[0])
	before := conditionMessage(e.mustGet(xnopGVK, "", "superseded"), "Ready")
	e.superseded = true
	_, tally, err = e.handle(late, &composed.Items[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := conditionMessage(e.mustGet(xnopGVK, "", "superseded"), "Ready"); got != before || tally.Writes() != 0 {
		t.Errorf("a superseded render of progress: Ready message %q after %d writes, want %q after none", got, tally.Writes(), before)
	}
	for i := range composed.Items[1:] {
		e.provide(&composed.Items[1+i])
	}
	_, tally, err = e.handle(late, &composed.Items[2])
	e.superseded = false
	if err != nil {
		t.Fatal(err)
	}
	if got := condition(e.mustGet(xnopGVK, "", "superseded"), "Ready"); got != "True" || tally.Writes() != 1 {
		t.Errorf("a superseded render that finds the XR Ready: Ready %q after %d writes, want True after 1 (the status)", got, tally.Writes())
	}

	// Deleting the XRD deletes the XRs, then the CRDs.
	if err := e.resource(xrdGVK, "").Delete(t.Context(), xrd.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, time.Minute, func() error {
		_, _, err := e.handle(xrd, nil)
		if err != nil {
			return err
		}
		if _, err := e.get(xrdGVK, "", xrd.GetName()); !kerrors.IsNotFound(err) {
			return fmt.Errorf("the XRD still exists (%v)", err)
		}
		return nil
	}, apiPoll)
	for _, n := range []string{"xnops.it.loom.dev", "nops.it.loom.dev"} {
		poll.Until(t, 30*time.Second, func() error {
			if _, err := e.get(crdGVK, "", n); !kerrors.IsNotFound(err) {
				return fmt.Errorf("CRD %s still exists (%v)", n, err)
			}
			return nil
		}, apiPoll)
	}
}

func condition(u *unstructured.Unstructured, typ string) string {
	return conditionField(u, typ, "status")
}

func conditionMessage(u *unstructured.Unstructured, typ string) string {
	return conditionField(u, typ, "message")
}

func conditionField(u *unstructured.Unstructured, typ, field string) string {
	cs, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range cs {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m[field].(string)
			return s
		}
	}
	return ""
}

func nested(u *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, path...)
	return s
}

func nestedAny(u *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	return v
}

// composedByName GETs the XR's composed resources, keyed by composition
// resource name.
func composedByName(t *testing.T, e *env, xr *unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	xr = e.mustGet(xr.GroupVersionKind(), xr.GetNamespace(), xr.GetName())
	refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "resourceRefs")
	out := map[string]*unstructured.Unstructured{}
	for _, r := range refs {
		m := r.(map[string]any)
		o := e.mustGet(nopGVK, "", m["name"].(string))
		out[o.GetAnnotations()["crossplane.io/composition-resource-name"]] = o
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// revisions lists the CompositionRevisions, by creation.
func revisions(t *testing.T, e *env) []*unstructured.Unstructured {
	t.Helper()
	l, err := e.resource(revGVK, "").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*unstructured.Unstructured, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		return a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time)
	})
	return out
}

func onlyRevision(t *testing.T, e *env, number int64) *unstructured.Unstructured {
	t.Helper()
	revs := revisions(t, e)
	if len(revs) != 1 {
		t.Fatalf("%d revisions, want 1", len(revs))
	}
	if n, _, _ := unstructured.NestedInt64(revs[0].Object, "spec", "revision"); n != number {
		t.Errorf("revision number %d, want %d", n, number)
	}
	return revs[0]
}

// requeued reports whether a REQUEUE event for xr waits in the renderer's
// work stream, and removes it.
func requeued(t *testing.T, e *env, xr *unstructured.Unstructured) bool {
	t.Helper()
	s, err := e.js.Stream(t.Context(), bus.StreamName(bus.Renderer))
	if err != nil {
		t.Fatal(err)
	}
	subj := bus.WorkSubject(bus.Renderer, bus.DefaultPartitions, string(xr.GetUID()))
	m, err := s.GetLastMsgForSubject(t.Context(), subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = s.DeleteMsg(t.Context(), m.Sequence)
	return true
}

// establish applies an XRD and handles it until its CRDs are established.
func (e *env) establish(doc string) *unstructured.Unstructured {
	e.t.Helper()
	xrd := e.apply(doc)
	poll.Until(e.t, 30*time.Second, func() error {
		res, _, err := e.handle(xrd, nil)
		if err != nil {
			return err
		}
		if res.RequeueAfter != 0 {
			return errors.New("the CRDs are not established yet")
		}
		return nil
	}, apiPoll)
	return xrd
}

func TestRenderFailuresOnAPIServer(t *testing.T) {
	e := startEnv(t)
	e.establish(testXRD)

	// A Composition whose second template's map transform lacks the XR's
	// value, and whose third is only present in the first version.
	bad := strings.Replace(testComposition(2), "map: {small: tier-s, large: tier-l}", "map: {large: tier-l}", 1)
	comp := e.apply(bad)
	if _, _, err := e.handle(comp, nil); err != nil {
		t.Fatal(err)
	}
	xr := e.apply(`
apiVersion: it.loom.dev/v1alpha1
kind: XNop
metadata: {name: broken}
spec:
  parameters: {size: small, replicas: 1}
`)
	_, _, err := e.handle(xr, nil)
	if !reconcile.IsTerminal(err) {
		t.Errorf("render with a failing patch returned %v, want a permanent error", err)
	}
	xr = e.mustGet(xnopGVK, "", "broken")
	msg := conditionMessage(xr, "Synced")
	for _, want := range []string{`template "alpha"`, "spec.parameters.size", "spec.forProvider.fields.tier", `"small"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("Synced message %q does not mention %s", msg, want)
		}
	}
	if got := condition(xr, "Synced"); got != "False" {
		t.Errorf("Synced %q, want False", got)
	}
	nops := composedByName(t, e, xr)
	if diff := cmp.Diff([]string{"beta", "gamma"}, sortedKeys(nops)); diff != "" {
		t.Errorf("the templates that did not fail are composed: -want, +got:\n%s", diff)
	}
	summary, _, _ := unstructured.NestedSlice(xr.Object, "status", "loom", "resources")
	if len(summary) != 3 || summary[0].(map[string]any)["resourceName"] != "alpha" || summary[0].(map[string]any)["reason"] != "RenderFailed" {
		t.Errorf("status.loom.resources %v: want alpha first, RenderFailed", summary)
	}
	// Rendering again changes nothing and writes nothing.
	if _, tally, _ := e.handle(xr, nil); tally.Writes() != 0 {
		t.Errorf("re-render of a failing XR made %d writes, want none", tally.Writes())
	}

	// The fixed Composition without gamma: alpha appears, gamma goes.
	fixed := testComposition(2)
	fixed = fixed[:strings.Index(fixed, "  - name: gamma")]
	comp = e.apply(fixed)
	if _, _, err := e.handle(comp, nil); err != nil {
		t.Fatal(err)
	}
	gamma := nops["gamma"]
	if _, _, err := e.handle(xr, revisions(t, e)[1]); err != nil {
		t.Fatal(err)
	}
	xr = e.mustGet(xnopGVK, "", "broken")
	if got := condition(xr, "Synced"); got != "True" {
		t.Errorf("Synced %q after the fix, want True: %s", got, conditionMessage(xr, "Synced"))
	}
	if _, err := e.get(nopGVK, "", gamma.GetName()); !kerrors.IsNotFound(err) {
		t.Errorf("gamma, which left the Composition, still exists (%v)", err)
	}
	// Its reference goes once it is gone.
	if _, _, err := e.handle(xr, gamma); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"alpha", "beta"}, sortedKeys(composedByName(t, e, xr))); diff != "" {
		t.Errorf("composed resources after the fix: -want, +got:\n%s", diff)
	}

	// A paused XR says so and is left alone.
	e.apply(`
apiVersion: it.loom.dev/v1alpha1
kind: XNop
metadata:
  name: broken
  annotations: {crossplane.io/paused: "true"}
spec:
  parameters: {size: large, replicas: 1}
`)
	if _, _, err := e.handle(xr, nil); err != nil {
		t.Fatal(err)
	}
	xr = e.mustGet(xnopGVK, "", "broken")
	if got := conditionField(xr, "Synced", "reason"); got != "ReconcilePaused" {
		t.Errorf("Synced reason %q of a paused XR, want ReconcilePaused", got)
	}
	if got := nested(composedByName(t, e, xr)["alpha"], "spec", "forProvider", "fields", "tier"); got != "tier-s" {
		t.Errorf("a paused XR's composed resource changed: tier %q", got)
	}
}

const namespacedXRD = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xapps.it.loom.dev
spec:
  group: it.loom.dev
  scope: Namespaced
  names: {kind: XApp, plural: xapps}
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              greeting: {type: string}
`

func TestRenderNamespacedOnAPIServer(t *testing.T) {
	e := startEnv(t)
	e.establish(namespacedXRD)
	e.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n")
	comp := e.apply(`
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xapps}
spec:
  compositeTypeRef: {apiVersion: it.loom.dev/v1alpha1, kind: XApp}
  resources:
  - name: config
    base:
      apiVersion: v1
      kind: ConfigMap
      data: {greeting: hello}
    patches:
    - fromFieldPath: spec.greeting
      toFieldPath: data.greeting
    readinessChecks:
    - type: None
`)
	if _, _, err := e.handle(comp, nil); err != nil {
		t.Fatal(err)
	}
	xr := e.apply(`
apiVersion: it.loom.dev/v1alpha1
kind: XApp
metadata: {name: app, namespace: team-a}
spec:
  greeting: bonjour
`)
	if _, _, err := e.handle(xr, nil); err != nil {
		t.Fatal(err)
	}
	xr = e.mustGet(schema.GroupVersionKind{Group: "it.loom.dev", Version: "v1alpha1", Kind: "XApp"}, "team-a", "app")
	if got := condition(xr, "Ready"); got != "True" {
		t.Errorf("Ready %q, want True: %s", got, conditionMessage(xr, "Ready"))
	}
	refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "crossplane", "resourceRefs")
	if len(refs) != 1 {
		t.Fatalf("spec.crossplane.resourceRefs %v, want one", refs)
	}
	name := refs[0].(map[string]any)["name"].(string)
	cm := e.mustGet(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "team-a", name)
	if got := nested(cm, "data", "greeting"); got != "bonjour" {
		t.Errorf("ConfigMap greeting %q, want bonjour", got)
	}

	// A cluster-scoped kind is refused, and nothing is composed.
	refused := e.apply(`
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xapps-cluster}
spec:
  compositeTypeRef: {apiVersion: it.loom.dev/v1alpha1, kind: XApp}
  resources:
  - name: nop
    base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, spec: {forProvider: {}}}
`)
	if _, _, err := e.handle(refused, nil); err != nil {
		t.Fatal(err)
	}
	other := e.apply(`
apiVersion: it.loom.dev/v1alpha1
kind: XApp
metadata: {name: refused, namespace: team-a}
spec:
  crossplane:
    compositionRef: {name: xapps-cluster}
`)
	if _, _, err := e.handle(other, nil); !reconcile.IsTerminal(err) {
		t.Errorf("render of a cluster-scoped kind for a Namespaced XR returned %v, want a permanent error", err)
	}
	other = e.mustGet(other.GroupVersionKind(), "team-a", "refused")
	if msg := conditionMessage(other, "Synced"); !strings.Contains(msg, "NopResource is cluster scoped") {
		t.Errorf("Synced message %q does not say the kind is cluster scoped", msg)
	}
	if refs, _, _ := unstructured.NestedSlice(other.Object, "spec", "crossplane", "resourceRefs"); len(refs) != 0 {
		t.Errorf("resourceRefs %v of a refused render, want none", refs)
	}

	// A template that names another namespace is refused, not moved into
	// the XR's, and nothing is composed.
	elsewhere := e.apply(`
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xapps-elsewhere}
spec:
  compositeTypeRef: {apiVersion: it.loom.dev/v1alpha1, kind: XApp}
  resources:
  - name: config
    base: {apiVersion: v1, kind: ConfigMap, metadata: {namespace: elsewhere}}
    readinessChecks:
    - type: None
`)
	if _, _, err := e.handle(elsewhere, nil); err != nil {
		t.Fatal(err)
	}
	moved := e.apply(`
apiVersion: it.loom.dev/v1alpha1
kind: XApp
metadata: {name: moved, namespace: team-a}
spec:
  crossplane:
    compositionRef: {name: xapps-elsewhere}
`)
	if _, _, err := e.handle(moved, nil); !reconcile.IsTerminal(err) {
		t.Errorf("render into another namespace for a Namespaced XR returned %v, want a permanent error", err)
	}
	moved = e.mustGet(moved.GroupVersionKind(), "team-a", "moved")
	if msg := conditionMessage(moved, "Synced"); !strings.Contains(msg, `composed resource "config": namespace "elsewhere" is not the composite resource's namespace "team-a"`) {
		t.Errorf("Synced message %q does not name the template and the namespace", msg)
	}
	if refs, _, _ := unstructured.NestedSlice(moved.Object, "spec", "crossplane", "resourceRefs"); len(refs) != 0 {
		t.Errorf("resourceRefs %v of a refused render, want none", refs)
	}
}
