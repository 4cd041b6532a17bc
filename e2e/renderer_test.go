//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/stack"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"

	"github.com/loomxr/loom/e2e/framework"
)

// The renderer tests define their own XR kind; installers (here, the test)
// give Loom's services their rights on it with aggregated ClusterRoles, as
// deploy/helm/loom/files/rbac/renderer.yaml describes.
var (
	rendererXRGVK = schema.GroupVersionKind{Group: "renderer.e2e.loom.dev", Version: "v1alpha1", Kind: "XRenderNop"}
	rendererNop   = schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}
	revisionGVK   = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositionRevision"}
)

const rendererRBAC = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [renderer.e2e.loom.dev]
  resources: [xrendernops]
  verbs: [get, list, patch, delete]
- apiGroups: [renderer.e2e.loom.dev]
  resources: [xrendernops/status]
  verbs: [patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:renderer-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [renderer.e2e.loom.dev]
  resources: [xrendernops]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:renderer-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [renderer.e2e.loom.dev]
  resources: [xrendernops]
  verbs: [get, create, patch, delete]
- apiGroups: [renderer.e2e.loom.dev]
  resources: [xrendernops/status]
  verbs: [get, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:secrets:renderer-e2e
  labels: {loom.dev/aggregate-to-secrets: "true"}
rules:
- apiGroups: [renderer.e2e.loom.dev]
  resources: [xrendernops]
  verbs: [get]
- apiGroups: [renderer.e2e.loom.dev]
  resources: [xrendernops/status]
  verbs: [get, patch]
`

const rendererXRD = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xrendernops.renderer.e2e.loom.dev
spec:
  group: renderer.e2e.loom.dev
  names: {kind: XRenderNop, plural: xrendernops}
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

// rendererComposition composes three NopResources that turn Ready after a
// second, with patches, transforms and readiness checks; beta's replicas are
// the XR's multiplied by factor.
func rendererComposition(factor int) string {
	return fmt.Sprintf(`
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xrendernops
spec:
  compositeTypeRef: {apiVersion: renderer.e2e.loom.dev/v1alpha1, kind: XRenderNop}
  resources:
  - name: alpha
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider:
          conditionAfter:
          - {time: 1s, conditionType: Ready, conditionStatus: "True"}
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
          conditionAfter:
          - {time: 1s, conditionType: Ready, conditionStatus: "True"}
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
        forProvider:
          conditionAfter:
          - {time: 1s, conditionType: Ready, conditionStatus: "True"}
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
    - type: MatchCondition
      matchCondition: {type: Ready, status: "True"}
`, factor)
}

// rendererXR is an XR of the test's kind.
func rendererXR(name, size string, replicas int64, policy string) *unstructured.Unstructured {
	spec := map[string]any{"parameters": map[string]any{"size": size, "replicas": replicas}}
	if policy != "" {
		spec["compositionUpdatePolicy"] = policy
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(rendererXRGVK)
	u.SetName(name)
	return u
}

// TestRenderer runs issue 4's end-to-end scenario on the stack: an XRD, a
// Composition of three NopResources, and XRs created with the Go client.
func TestRenderer(t *testing.T) {
	env := framework.StartStack(t)
	ctx := t.Context()
	framework.ApplyYAML(t, rendererRBAC)
	framework.ApplyYAML(t, rendererXRD, rendererComposition(2))

	xrs := env.Dynamic.Resource(rendererXRGVK.GroupVersion().WithResource("xrendernops"))
	nops := env.Dynamic.Resource(rendererNop.GroupVersion().WithResource("nopresources"))
	revs := env.Dynamic.Resource(revisionGVK.GroupVersion().WithResource("compositionrevisions"))
	create := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		t.Helper()
		got, err := xrs.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("cannot create XR %s: %v", u.GetName(), err)
		}
		t.Cleanup(func() { _ = xrs.Delete(ctx, u.GetName(), metav1.DeleteOptions{}) })
		return got
	}
	getXR := func(name string) *unstructured.Unstructured {
		t.Helper()
		u, err := xrs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	// composed returns the XR's composed resources by composition resource
	// name, checking that resourceRefs names exactly those, sorted.
	composed := func(xr *unstructured.Unstructured) (map[string]*unstructured.Unstructured, error) {
		refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "resourceRefs")
		out := map[string]*unstructured.Unstructured{}
		var names []string
		for _, r := range refs {
			m, _ := r.(map[string]any)
			if m["apiVersion"] != "nop.crossplane.io/v1alpha1" || m["kind"] != "NopResource" {
				return nil, fmt.Errorf("unexpected resourceRef %v", m)
			}
			name, _ := m["name"].(string)
			names = append(names, name)
			o, err := nops.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			if c := metav1.GetControllerOf(o); c == nil || c.UID != xr.GetUID() {
				return nil, fmt.Errorf("NopResource %s is not controlled by XR %s", name, xr.GetName())
			}
			out[o.GetAnnotations()["crossplane.io/composition-resource-name"]] = o
		}
		if !slices.IsSorted(names) {
			return nil, fmt.Errorf("resourceRefs are not sorted: %v", names)
		}
		if len(out) != 3 || out["alpha"] == nil || out["beta"] == nil || out["gamma"] == nil {
			return nil, fmt.Errorf("composed resources %v, want alpha, beta and gamma", names)
		}
		return out, nil
	}
	fields := func(xr *unstructured.Unstructured, want map[string]string) error {
		cs, err := composed(xr)
		if err != nil {
			return err
		}
		var errs []error
		for k, w := range want {
			name, field, _ := strings.Cut(k, ".")
			v, _, _ := unstructured.NestedFieldNoCopy(cs[name].Object, "spec", "forProvider", "fields", field)
			if got := fmt.Sprint(v); got != w {
				errs = append(errs, fmt.Errorf("%s's spec.forProvider.fields.%s is %q, want %q", name, field, got, w))
			}
		}
		return errors.Join(errs...)
	}

	// The NopResources appear with the patched fields, turn Ready, and the
	// XR turns Ready with its resourceRefs and ToComposite field.
	xr := create(rendererXR("render-auto", "small", 3, ""))
	framework.Eventually(t, time.Minute, func() error {
		xr = getXR("render-auto")
		if err := fields(xr, map[string]string{"alpha.tier": "tier-s", "beta.replicas": "6", "gamma.label": "SMALL-RENDER-AUTO"}); err != nil {
			return err
		}
		return errors.Join(
			hasCondition(xr, "Synced", "True", "ReconcileSuccess"),
			hasCondition(xr, "Ready", "True", "Available"),
			expectString(xr, "tier-s", "status", "tier"),
		)
	})
	cs, _ := composed(xr)
	for n, o := range cs {
		if err := hasCondition(o, "Ready", "True", "Available"); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	rev1 := nestedString(xr, "spec", "compositionRevisionRef", "name")
	if !strings.HasPrefix(rev1, "xrendernops-") {
		t.Errorf("compositionRevisionRef %q, want a revision of xrendernops", rev1)
	}

	// Re-rendering the unchanged XR makes no API write.
	t.Run("ZeroWritesOnRerender", func(t *testing.T) {
		rerenderWritesNothing(t, env, getXR("render-auto"), "xrendernops")
	})

	// Editing the XR's spec updates the composed resources.
	xr = getXR("render-auto")
	if err := unstructured.SetNestedField(xr.Object, "large", "spec", "parameters", "size"); err != nil {
		t.Fatal(err)
	}
	if _, err := xrs.Update(ctx, xr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		return fields(getXR("render-auto"), map[string]string{"alpha.tier": "tier-l", "gamma.label": "LARGE-RENDER-AUTO"})
	})

	// A new revision is picked up under Automatic and not under Manual.
	create(rendererXR("render-manual", "small", 1, "Manual"))
	framework.Eventually(t, time.Minute, func() error {
		m := getXR("render-manual")
		if err := fields(m, map[string]string{"beta.replicas": "2"}); err != nil {
			return err
		}
		return hasCondition(m, "Synced", "True", "ReconcileSuccess")
	})
	if got := nestedString(getXR("render-manual"), "spec", "compositionRevisionRef", "name"); got != rev1 {
		t.Fatalf("Manual XR on revision %q, want %q", got, rev1)
	}
	if _, err := env.Stack.ApplyObjects(ctx, mustDecode(t, rendererComposition(10))...); err != nil {
		t.Fatal(err)
	}
	var rev2 string
	framework.Eventually(t, time.Minute, func() error {
		l, err := revs.List(ctx, metav1.ListOptions{LabelSelector: "crossplane.io/composition-name=xrendernops"})
		if err != nil {
			return err
		}
		var best int64
		for _, r := range l.Items {
			if n, _, _ := unstructured.NestedInt64(r.Object, "spec", "revision"); n > best {
				best, rev2 = n, r.GetName()
			}
		}
		if len(l.Items) != 2 || best != 2 {
			return fmt.Errorf("%d revisions, latest number %d; want 2 and 2", len(l.Items), best)
		}
		a := getXR("render-auto")
		if got := nestedString(a, "spec", "compositionRevisionRef", "name"); got != rev2 {
			return fmt.Errorf("Automatic XR on revision %q, want %q", got, rev2)
		}
		return fields(a, map[string]string{"beta.replicas": "30"})
	})
	m := getXR("render-manual")
	if got := nestedString(m, "spec", "compositionRevisionRef", "name"); got != rev1 {
		t.Errorf("Manual XR moved to revision %q, want it to stay on %q", got, rev1)
	}
	if err := fields(m, map[string]string{"beta.replicas": "2"}); err != nil {
		t.Errorf("Manual XR: %v", err)
	}

	// Deleting an XR deletes its composed resources.
	cs, err := composed(getXR("render-auto"))
	if err != nil {
		t.Fatal(err)
	}
	if err := xrs.Delete(ctx, "render-auto", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		for n, o := range cs {
			if _, err := nops.Get(ctx, o.GetName(), metav1.GetOptions{}); !kerrors.IsNotFound(err) {
				return fmt.Errorf("composed resource %s (%s) still exists (%v)", n, o.GetName(), err)
			}
		}
		return nil
	})
}

// rerenderWritesNothing asks the renderer to render xr again (a REQUEUE
// event on its work stream, as the revision fan-out publishes) and checks,
// with the API server's own request counters, that the render read the XR
// and wrote nothing: neither the XR nor any NopResource.
func rerenderWritesNothing(t *testing.T, env *framework.Env, xr *unstructured.Unstructured, plural string) {
	ctx := t.Context()
	nc, err := nats.Connect(env.Stack.NATSURL(), nats.Name("e2e-renderer"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, bus.StreamName(bus.Renderer))
	if err != nil {
		t.Fatal(err)
	}
	subject := bus.WorkSubject(bus.Renderer, bus.DefaultPartitions, string(xr.GetUID()))
	pending := func() bool {
		_, err := stream.GetLastMsgForSubject(ctx, subject)
		return err == nil
	}
	// Let whatever was in flight for the XR finish first.
	framework.Eventually(t, 30*time.Second, func() error {
		if pending() {
			return errors.New("an event for the XR is still pending")
		}
		return nil
	})

	count := func() (writes, xrGets float64) {
		t.Helper()
		for _, res := range []string{plural, "nopresources"} {
			for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE"} {
				n, err := env.APIRequests(ctx, map[string]string{"resource": res, "verb": verb})
				if err != nil {
					t.Fatal(err)
				}
				writes += n
			}
		}
		n, err := env.APIRequests(ctx, map[string]string{"resource": plural, "verb": "GET"})
		if err != nil {
			t.Fatal(err)
		}
		// With the object mirror the renderer reads the XR from it, or
		// from its own last write, not from the API server: count those
		// reads (of any kind) too.
		for i := 0; ; i++ {
			addr := env.Stack.ServiceHealthAddr("renderer", i)
			if addr == "" {
				break
			}
			text, err := getMetrics(ctx, addr)
			if err != nil {
				t.Fatal(err)
			}
			n += sumSamples(text, "loom_kube_reads_total", `source="mirror"`) + sumSamples(text, "loom_kube_reads_total", `source="own"`)
		}
		return writes, n
	}
	writes0, gets0 := count()
	pub := bus.NewPublisher(js)
	gvk := xr.GroupVersionKind()
	ev := &eventsv1.Event{
		Object: &eventsv1.ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Name: xr.GetName(), Uid: string(xr.GetUID())},
		Type:   eventsv1.EventType_EVENT_TYPE_REQUEUE,
		Reason: "e2e: re-render an unchanged XR",
		Source: "e2e",
	}
	if err := pub.Publish(ctx, bus.Renderer, ev); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		if pending() {
			return errors.New("the renderer has not handled the REQUEUE event yet")
		}
		return nil
	})
	writes1, gets1 := count()
	if gets1 <= gets0 {
		t.Errorf("the renderer did not read the XR (%v reads before and after): the re-render did not happen", gets0)
	}
	if writes1 != writes0 {
		t.Errorf("re-rendering an unchanged XR made %v API writes to XRs and NopResources, want 0", writes1-writes0)
	}
	t.Logf("re-render of an unchanged XR: %v reads (GETs of XRs, reads through the object mirror), %v writes", gets1-gets0, writes1-writes0)
}

func nestedString(u *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, path...)
	return s
}

func expectString(u *unstructured.Unstructured, want string, path ...string) error {
	if got := nestedString(u, path...); got != want {
		return fmt.Errorf("%s is %q, want %q", strings.Join(path, "."), got, want)
	}
	return nil
}

func mustDecode(t *testing.T, doc string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := stack.DecodeManifests([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
