//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/e2e/framework"
)

// testRenderer is the field manager under which the tests play the
// renderer's part on XRs.
const testRenderer = "test-renderer"

// testClaimLifecycle covers a claim's life with the binder: dynamic binding,
// spec, label and annotation propagation, status and conditions back,
// composition references back, an XR deleted from under its claim, static
// binding and refusal, and deletion with the Background and Foreground
// policies and with reclaimPolicy Retain, each leaving nothing behind.
func testClaimLifecycle(t *testing.T, env *binderEnv) {
	ns := env.namespace(t, "binder-lifecycle")
	t.Run("Dynamic", func(t *testing.T) { testDynamic(t, env, ns) })
	t.Run("Static", func(t *testing.T) { testStatic(t, env, ns) })
	t.Run("StaticRace", func(t *testing.T) { testStaticRace(t, env, ns) })
	t.Run("Foreground", func(t *testing.T) { testForeground(t, env, ns) })
	t.Run("Retain", func(t *testing.T) { testRetain(t, env, ns) })
}

// createClaim creates a claim from YAML in namespace ns.
func createClaim(t *testing.T, env *binderEnv, ns, doc string) *unstructured.Unstructured {
	t.Helper()
	objs := env.apply(t, doc)
	if len(objs) != 1 || objs[0].GroupVersionKind() != claimGVK {
		t.Fatalf("want one %s, got %d objects", claimGVK.Kind, len(objs))
	}
	return objs[0]
}

// boundXR waits until claim ns/name names an XR that exists and is bound to
// it, and returns both.
func boundXR(t *testing.T, env *binderEnv, ns, name string) (cm, xr *unstructured.Unstructured) {
	t.Helper()
	ctx := t.Context()
	framework.Eventually(t, time.Minute, func() error {
		var err error
		cm, err = env.get(ctx, claimGVK, ns, name)
		if err != nil || cm == nil {
			return fmt.Errorf("claim %s: %v", name, err)
		}
		ref, _, _ := unstructured.NestedString(cm.Object, "spec", "resourceRef", "name")
		if ref == "" {
			return fmt.Errorf("claim %s has no resourceRef yet", name)
		}
		xr, err = env.get(ctx, xrGVK, "", ref)
		if err != nil || xr == nil {
			return fmt.Errorf("XR %s: %v", ref, err)
		}
		if n, _, _ := unstructured.NestedString(xr.Object, "spec", "claimRef", "name"); n != name {
			return fmt.Errorf("XR %s is bound to %q", ref, n)
		}
		return nil
	})
	return cm, xr
}

// applyAsRenderer server-side-applies patch (a partial object of xr's kind)
// to XR name, on the status subresource if status is true.
func applyAsRenderer(t *testing.T, env *binderEnv, name string, patch map[string]any, status bool) {
	t.Helper()
	patch["apiVersion"] = xrGVK.GroupVersion().String()
	patch["kind"] = xrGVK.Kind
	patch["metadata"] = map[string]any{"name": name}
	b, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	var sub []string
	if status {
		sub = []string{"status"}
	}
	if _, err := env.client(xrGVK, "").Patch(t.Context(), name, types.ApplyPatchType, b,
		metav1.PatchOptions{FieldManager: testRenderer, Force: ptrTrue()}, sub...); err != nil {
		t.Fatalf("cannot apply to XR %s as the renderer: %v", name, err)
	}
}

func ptrTrue() *bool { b := true; return &b }

func testDynamic(t *testing.T, env *binderEnv, ns string) {
	ctx := t.Context()
	createClaim(t, env, ns, fmt.Sprintf(`
apiVersion: binder.e2e.loom.dev/v1alpha1
kind: BinderDB
metadata:
  name: dyn
  namespace: %s
  labels:
    team: a
  annotations:
    crossplane.io/external-name: dyn-ext
spec:
  compositionSelector:
    matchLabels:
      tier: standard
  parameters:
    size: small
    replicas: 2
`, ns))
	cm, xr := boundXR(t, env, ns, "dyn")

	// Name-then-create: <claim>-<5 random characters>.
	if n := xr.GetName(); len(n) != len("dyn-")+5 || !strings.HasPrefix(n, "dyn-") {
		t.Errorf("XR name %q, want dyn- followed by five characters", n)
	}
	if diff := cmp.Diff([]string{"finalizer.apiextensions.crossplane.io"}, cm.GetFinalizers()); diff != "" {
		t.Errorf("claim finalizers: -want, +got:\n%s", diff)
	}
	wantLabels := map[string]string{"team": "a", "crossplane.io/claim-name": "dyn", "crossplane.io/claim-namespace": ns}
	if diff := cmp.Diff(wantLabels, xr.GetLabels()); diff != "" {
		t.Errorf("XR labels: -want, +got:\n%s", diff)
	}
	if got := xr.GetAnnotations()["crossplane.io/external-name"]; got != "dyn-ext" {
		t.Errorf("XR external name %q, want dyn-ext", got)
	}
	if _, ok := xr.GetAnnotations()["kubectl.kubernetes.io/last-applied-configuration"]; ok {
		t.Errorf("XR got the claim's kubectl annotation")
	}
	spec, _, _ := unstructured.NestedMap(xr.Object, "spec")
	wantSpec := map[string]any{
		"compositionSelector":     map[string]any{"matchLabels": map[string]any{"tier": "standard"}},
		"compositionUpdatePolicy": "Automatic",
		"parameters":              map[string]any{"size": "small", "replicas": int64(2)},
		"claimRef":                map[string]any{"apiVersion": claimGVK.GroupVersion().String(), "kind": claimGVK.Kind, "namespace": ns, "name": "dyn"},
	}
	if diff := cmp.Diff(wantSpec, spec); diff != "" {
		t.Errorf("XR spec: -want, +got:\n%s", diff)
	}
	// The XR's first status (the renderer composing it) gives the claim its
	// first: Synced, and Ready False while the XR is not Ready.
	applyAsRenderer(t, env, xr.GetName(), map[string]any{"status": map[string]any{
		"conditions": []any{
			map[string]any{"type": "Ready", "status": "False", "reason": "Creating", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		},
	}}, true)
	framework.Eventually(t, time.Minute, func() error {
		cm, err := env.get(ctx, claimGVK, ns, "dyn")
		if err != nil {
			return err
		}
		if s, _, _ := condition(cm, "Synced"); s != "True" {
			return fmt.Errorf("claim Synced is %q", s)
		}
		if s, r, _ := condition(cm, "Ready"); s != "False" || r != "Waiting" {
			return fmt.Errorf("claim Ready is %s/%s, want False/Waiting", s, r)
		}
		return nil
	})

	// Spec changes propagate, including removals.
	patch := `{"spec":{"parameters":{"size":"large","replicas":null}},"metadata":{"labels":{"team":"b"}}}`
	if _, err := env.client(claimGVK, ns).Patch(ctx, "dyn", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		xr, err := env.get(ctx, xrGVK, "", xr.GetName())
		if err != nil {
			return err
		}
		params, _, _ := unstructured.NestedMap(xr.Object, "spec", "parameters")
		if diff := cmp.Diff(map[string]any{"size": "large"}, params); diff != "" {
			return fmt.Errorf("XR spec.parameters: -want, +got:\n%s", diff)
		}
		if l := xr.GetLabels()["team"]; l != "b" {
			return fmt.Errorf("XR label team is %q, want b", l)
		}
		return nil
	})

	// What the renderer writes on the XR flows back: the selected
	// composition and revision to the claim's spec, the status fields and
	// Ready to the claim's status, and conditions meant for the claim.
	applyAsRenderer(t, env, xr.GetName(), map[string]any{"spec": map[string]any{
		"compositionRef":         map[string]any{"name": "picked"},
		"compositionRevisionRef": map[string]any{"name": "picked-1a2b3c"},
	}}, false)
	applyAsRenderer(t, env, xr.GetName(), map[string]any{"status": map[string]any{
		"address":             "10.0.0.7",
		"claimConditionTypes": []any{"DatabaseReady"},
		"conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			map[string]any{"type": "DatabaseReady", "status": "True", "reason": "Accepting", "message": "accepting connections", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		},
	}}, true)
	framework.Eventually(t, time.Minute, func() error {
		cm, err := env.get(ctx, claimGVK, ns, "dyn")
		if err != nil {
			return err
		}
		var problems []string
		if r, _, _ := unstructured.NestedString(cm.Object, "spec", "compositionRef", "name"); r != "picked" {
			problems = append(problems, fmt.Sprintf("claim spec.compositionRef.name %q, want picked", r))
		}
		if r, _, _ := unstructured.NestedString(cm.Object, "spec", "compositionRevisionRef", "name"); r != "picked-1a2b3c" {
			problems = append(problems, fmt.Sprintf("claim spec.compositionRevisionRef.name %q, want picked-1a2b3c", r))
		}
		if a, _, _ := unstructured.NestedString(cm.Object, "status", "address"); a != "10.0.0.7" {
			problems = append(problems, fmt.Sprintf("claim status.address %q, want 10.0.0.7", a))
		}
		if s, r, _ := condition(cm, "Ready"); s != "True" || r != "Available" {
			problems = append(problems, fmt.Sprintf("claim Ready %s/%s, want True/Available", s, r))
		}
		if s, r, m := condition(cm, "DatabaseReady"); s != "True" || r != "Accepting" || m != "accepting connections" {
			problems = append(problems, fmt.Sprintf("claim DatabaseReady %s/%s/%q, want the XR's", s, r, m))
		}
		if _, ok, _ := unstructured.NestedSlice(cm.Object, "status", "claimConditionTypes"); ok {
			problems = append(problems, "claim got the XR's status.claimConditionTypes")
		}
		return errorf(problems)
	})

	// An XR deleted from under its claim shows on the claim's conditions
	// while it goes, and is created again once it is gone.
	xrs := env.client(xrGVK, "")
	if _, err := xrs.Patch(ctx, xr.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":["e2e.loom.dev/hold"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	oldUID := xr.GetUID()
	if err := xrs.Delete(ctx, xr.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		cm, err := env.get(ctx, claimGVK, ns, "dyn")
		if err != nil {
			return err
		}
		s, _, m := condition(cm, "Synced")
		if want := fmt.Sprintf("composite resource %q is being deleted from under this claim", xr.GetName()); s != "False" || m != want {
			return fmt.Errorf("claim Synced %s %q, want False %q", s, m, want)
		}
		return nil
	})
	if _, err := xrs.Patch(ctx, xr.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		again, err := env.get(ctx, xrGVK, "", xr.GetName())
		if err != nil || again == nil || again.GetUID() == oldUID {
			return fmt.Errorf("XR %s not created again yet (%v)", xr.GetName(), err)
		}
		cm, err := env.get(ctx, claimGVK, ns, "dyn")
		if err != nil {
			return err
		}
		if s, _, m := condition(cm, "Synced"); s != "True" {
			return fmt.Errorf("claim Synced %s %q", s, m)
		}
		return nil
	})

	// Background deletion deletes the XR, then the claim goes.
	if err := env.client(claimGVK, ns).Delete(ctx, "dyn", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env, ns, "dyn", xr.GetName())
}

// waitGone waits until claim ns/claim and XR xr no longer exist.
func waitGone(t *testing.T, env *binderEnv, ns, claim, xr string) {
	t.Helper()
	framework.Eventually(t, time.Minute, func() error {
		cm, err := env.get(t.Context(), claimGVK, ns, claim)
		if err != nil {
			return err
		}
		x, err := env.get(t.Context(), xrGVK, "", xr)
		if err != nil {
			return err
		}
		if cm != nil || x != nil {
			return fmt.Errorf("claim %s exists: %t, XR %s exists: %t", claim, cm != nil, xr, x != nil)
		}
		return nil
	})
}

func testStatic(t *testing.T, env *binderEnv, ns string) {
	ctx := t.Context()
	env.apply(t, `
apiVersion: binder.e2e.loom.dev/v1alpha1
kind: XBinderDB
metadata:
  name: static-xr
spec:
  parameters:
    size: medium
`)
	createClaim(t, env, ns, fmt.Sprintf(`
apiVersion: binder.e2e.loom.dev/v1alpha1
kind: BinderDB
metadata:
  name: static
  namespace: %s
spec:
  resourceRef:
    apiVersion: binder.e2e.loom.dev/v1alpha1
    kind: XBinderDB
    name: static-xr
  parameters:
    size: large
`, ns))
	_, xr := boundXR(t, env, ns, "static")
	if xr.GetName() != "static-xr" {
		t.Fatalf("claim bound to %s, want static-xr", xr.GetName())
	}
	framework.Eventually(t, time.Minute, func() error {
		xr, err := env.get(ctx, xrGVK, "", "static-xr")
		if err != nil {
			return err
		}
		if s, _, _ := unstructured.NestedString(xr.Object, "spec", "parameters", "size"); s != "large" {
			return fmt.Errorf("XR spec.parameters.size %q, want the claim's large", s)
		}
		return nil
	})

	// A second claim naming the same XR is refused.
	createClaim(t, env, ns, fmt.Sprintf(`
apiVersion: binder.e2e.loom.dev/v1alpha1
kind: BinderDB
metadata:
  name: thief
  namespace: %s
spec:
  resourceRef:
    apiVersion: binder.e2e.loom.dev/v1alpha1
    kind: XBinderDB
    name: static-xr
`, ns))
	framework.Eventually(t, time.Minute, func() error {
		cm, err := env.get(ctx, claimGVK, ns, "thief")
		if err != nil {
			return err
		}
		want := fmt.Sprintf(`refusing to bind to composite resource "static-xr": bound to claim "%s/static"`, ns)
		if s, r, m := condition(cm, "Synced"); s != "False" || r != "ReconcileError" || m != want {
			return fmt.Errorf("thief Synced %s/%s %q, want False/ReconcileError %q", s, r, m, want)
		}
		return nil
	})

	// Deleting the refused claim leaves the XR to its owner; deleting the
	// owner deletes it.
	if err := env.client(claimGVK, ns).Delete(ctx, "thief", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		cm, err := env.get(ctx, claimGVK, ns, "thief")
		if err != nil || cm != nil {
			return fmt.Errorf("claim thief still exists (%v)", err)
		}
		xr, err := env.get(ctx, xrGVK, "", "static-xr")
		if err != nil || xr == nil || xr.GetDeletionTimestamp() != nil {
			return fmt.Errorf("XR static-xr went with the refused claim (%v)", err)
		}
		return nil
	})
	if err := env.client(claimGVK, ns).Delete(ctx, "static", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env, ns, "static", "static-xr")
}

// testStaticRace creates two claims naming the same unclaimed XR at once:
// exactly one binds it, the other is refused.
func testStaticRace(t *testing.T, env *binderEnv, ns string) {
	ctx := t.Context()
	env.apply(t, `
apiVersion: binder.e2e.loom.dev/v1alpha1
kind: XBinderDB
metadata:
  name: contested-xr
spec: {}
`)
	claims := env.client(claimGVK, ns)
	errs := make(chan error, 2)
	for _, name := range []string{"contender-1", "contender-2"} {
		go func() {
			c := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"resourceRef": map[string]any{
				"apiVersion": xrGVK.GroupVersion().String(), "kind": xrGVK.Kind, "name": "contested-xr",
			}}}}
			c.SetGroupVersionKind(claimGVK)
			c.SetNamespace(ns)
			c.SetName(name)
			_, err := claims.Create(ctx, c, metav1.CreateOptions{})
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var winner string
	framework.Eventually(t, time.Minute, func() error {
		xr, err := env.get(ctx, xrGVK, "", "contested-xr")
		if err != nil {
			return err
		}
		winner, _, _ = unstructured.NestedString(xr.Object, "spec", "claimRef", "name")
		if winner == "" {
			return fmt.Errorf("contested-xr is not bound yet")
		}
		var problems []string
		for _, name := range []string{"contender-1", "contender-2"} {
			cm, err := env.get(ctx, claimGVK, ns, name)
			if err != nil {
				return err
			}
			s, _, m := condition(cm, "Synced")
			switch {
			case name == winner && s == "False":
				problems = append(problems, fmt.Sprintf("winner %s Synced %s %q", name, s, m))
			case name != winner && (s != "False" || !strings.HasPrefix(m, "refusing to bind")):
				problems = append(problems, fmt.Sprintf("loser %s Synced %s %q, want a refusal", name, s, m))
			}
		}
		return errorf(problems)
	})
	t.Logf("%s won contested-xr", winner)
	for _, name := range []string{"contender-1", "contender-2"} {
		if err := claims.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitGone(t, env, ns, winner, "contested-xr")
}

func testForeground(t *testing.T, env *binderEnv, ns string) {
	ctx := t.Context()
	createClaim(t, env, ns, fmt.Sprintf(`
apiVersion: binder.e2e.loom.dev/v1alpha1
kind: BinderDB
metadata:
  name: fg
  namespace: %s
spec:
  compositeDeletePolicy: Foreground
  parameters:
    size: small
`, ns))
	_, xr := boundXR(t, env, ns, "fg")

	// A composed resource that blocks its owner's foreground deletion until
	// the garbage collector has deleted it.
	nop := env.apply(t, fmt.Sprintf(`
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: fg-composed
  labels:
    crossplane.io/composite: %s
  ownerReferences:
  - apiVersion: binder.e2e.loom.dev/v1alpha1
    kind: XBinderDB
    name: %s
    uid: %s
    controller: true
    blockOwnerDeletion: true
spec:
  forProvider: {}
`, xr.GetName(), xr.GetName(), xr.GetUID()))[0]

	if err := env.client(claimGVK, ns).Delete(ctx, "fg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The claim waits for its XR, which waits for its composed resource.
	sawWaiting := false
	framework.Eventually(t, 2*time.Minute, func() error {
		cm, err := env.get(ctx, claimGVK, ns, "fg")
		if err != nil {
			return err
		}
		if cm != nil {
			if s, r, _ := condition(cm, "Ready"); s == "False" && r == "Deleting" {
				sawWaiting = true
			}
			return fmt.Errorf("claim fg still exists")
		}
		for _, o := range []struct {
			gvk  string
			name string
		}{{"xr", xr.GetName()}, {"nop", nop.GetName()}} {
			var got *unstructured.Unstructured
			if o.gvk == "xr" {
				got, err = env.get(ctx, xrGVK, "", o.name)
			} else {
				got, err = env.get(ctx, nopGVK, "", o.name)
			}
			if err != nil {
				return err
			}
			if got != nil {
				return fmt.Errorf("claim fg is gone but %s %s remains", o.gvk, o.name)
			}
		}
		return nil
	})
	if !sawWaiting {
		t.Logf("the claim's Deleting condition was not observed (deletion may have been quick)")
	}
}

func testRetain(t *testing.T, env *binderEnv, ns string) {
	ctx := t.Context()
	createClaim(t, env, ns, fmt.Sprintf(`
apiVersion: binder.e2e.loom.dev/v1alpha1
kind: BinderDB
metadata:
  name: keep
  namespace: %s
spec:
  reclaimPolicy: Retain
  parameters:
    size: small
`, ns))
	_, xr := boundXR(t, env, ns, "keep")
	if err := env.client(claimGVK, ns).Delete(ctx, "keep", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		cm, err := env.get(ctx, claimGVK, ns, "keep")
		if err != nil || cm != nil {
			return fmt.Errorf("claim keep still exists (%v)", err)
		}
		got, err := env.get(ctx, xrGVK, "", xr.GetName())
		if err != nil || got == nil {
			return fmt.Errorf("released XR %s is gone (%v)", xr.GetName(), err)
		}
		if ref, ok, _ := unstructured.NestedMap(got.Object, "spec", "claimRef"); ok {
			return fmt.Errorf("released XR still has claimRef %v", ref)
		}
		if _, ok := got.GetLabels()["crossplane.io/claim-name"]; ok {
			return fmt.Errorf("released XR still has the claim-name label")
		}
		if s, r, _ := condition(got, "Bound"); s != "False" || r != "Released" {
			return fmt.Errorf("released XR Bound %s/%s, want False/Released", s, r)
		}
		return nil
	})

	// A new claim may bind the released XR.
	createClaim(t, env, ns, fmt.Sprintf(`
apiVersion: binder.e2e.loom.dev/v1alpha1
kind: BinderDB
metadata:
  name: keep-again
  namespace: %s
spec:
  resourceRef:
    apiVersion: binder.e2e.loom.dev/v1alpha1
    kind: XBinderDB
    name: %s
  parameters:
    size: small
`, ns, xr.GetName()))
	boundXR(t, env, ns, "keep-again")
	framework.Eventually(t, time.Minute, func() error {
		got, err := env.get(ctx, xrGVK, "", xr.GetName())
		if err != nil {
			return err
		}
		if s, r, _ := condition(got, "Bound"); s != "True" || r != "Bound" {
			return fmt.Errorf("rebound XR Bound %s/%s, want True/Bound", s, r)
		}
		return nil
	})
	if err := env.client(claimGVK, ns).Delete(ctx, "keep-again", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env, ns, "keep-again", xr.GetName())
}
