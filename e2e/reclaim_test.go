//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/e2e/framework"
)

// reclaimNS holds TestReclaim's claims.
const reclaimNS = "reclaim-e2e"

var (
	reclaimXRGVK    = schema.GroupVersionKind{Group: "reclaim.e2e.loom.dev", Version: "v1alpha1", Kind: "XReclaim"}
	reclaimClaimGVK = schema.GroupVersionKind{Group: "reclaim.e2e.loom.dev", Version: "v1alpha1", Kind: "Reclaim"}
)

// reclaimKinds are a claimable XR kind composing one NopResource, with the
// rights every service needs on it.
const reclaimKinds = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:reclaim-e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [reclaim.e2e.loom.dev]
  resources: [xreclaims]
  verbs: [get, list, patch, delete]
- apiGroups: [reclaim.e2e.loom.dev]
  resources: [xreclaims/status]
  verbs: [patch]
- apiGroups: [reclaim.e2e.loom.dev]
  resources: [reclaims]
  verbs: [list, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:reclaim-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [reclaim.e2e.loom.dev]
  resources: [xreclaims, reclaims]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:reclaim-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [reclaim.e2e.loom.dev]
  resources: [reclaims]
  verbs: [get, update, patch]
- apiGroups: [reclaim.e2e.loom.dev]
  resources: [reclaims/status, xreclaims/status]
  verbs: [get, patch]
- apiGroups: [reclaim.e2e.loom.dev]
  resources: [xreclaims]
  verbs: [get, create, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:secrets:reclaim-e2e
  labels: {loom.dev/aggregate-to-secrets: "true"}
rules:
- apiGroups: [reclaim.e2e.loom.dev]
  resources: [xreclaims, reclaims]
  verbs: [get]
- apiGroups: [reclaim.e2e.loom.dev]
  resources: [xreclaims/status, reclaims/status]
  verbs: [get, patch]
---
apiVersion: v1
kind: Namespace
metadata: {name: reclaim-e2e}
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xreclaims.reclaim.e2e.loom.dev
spec:
  group: reclaim.e2e.loom.dev
  names: {kind: XReclaim, plural: xreclaims}
  claimNames: {kind: Reclaim, plural: reclaims}
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
              size: {type: string}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xreclaims
spec:
  compositeTypeRef: {apiVersion: reclaim.e2e.loom.dev/v1alpha1, kind: XReclaim}
  resources:
  - name: store
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider:
          conditionAfter:
          - {time: 1s, conditionType: Ready, conditionStatus: "True"}
          fields: {size: unknown}
    patches:
    - fromFieldPath: spec.size
      toFieldPath: spec.forProvider.fields.size
`

// TestReclaim checks reclaimPolicy Retain on the whole system, set on the
// claim or on its XR: deleting the claim releases the XR, which keeps its
// composed resources (the same objects, untouched), loses its claimRef and
// says it is released; a second claim that names it binds it and becomes
// Ready on the same composed resources.
func TestReclaim(t *testing.T) {
	env := framework.StartStack(t)
	framework.ApplyYAML(t, reclaimKinds)

	cases := map[string]struct {
		reason string
		// onClaim sets Retain on the claim; otherwise it is set on the XR
		// after binding.
		onClaim bool
	}{
		"Claim":     {reason: "A claim with reclaimPolicy Retain releases its XR.", onClaim: true},
		"Composite": {reason: "An XR with reclaimPolicy Retain is released by a claim without one.", onClaim: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			first, second := strings.ToLower("first-"+name), strings.ToLower("second-"+name)
			spec := map[string]any{"size": "small"}
			if tc.onClaim {
				spec["reclaimPolicy"] = "Retain"
			}
			createReclaim(t, env, first, spec)
			xr := readyClaimXR(t, env, first)
			if !tc.onClaim {
				patch := []byte(`{"spec":{"reclaimPolicy":"Retain"}}`)
				if _, err := env.Dynamic.Resource(reclaimXRGVK.GroupVersion().WithResource("xreclaims")).Patch(ctx, xr.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Fatalf("cannot set reclaimPolicy Retain on XR %s: %v", xr.GetName(), err)
				}
			}
			t.Cleanup(func() {
				_ = env.Dynamic.Resource(reclaimXRGVK.GroupVersion().WithResource("xreclaims")).Delete(context.Background(), xr.GetName(), metav1.DeleteOptions{})
			})
			nops := composedOf(t, env, nopGVR, "", xr)
			if len(nops) != 1 {
				t.Fatalf("XR %s composed %d NopResources, want 1", xr.GetName(), len(nops))
			}
			nop := nops[0]

			claims := env.Dynamic.Resource(reclaimClaimGVK.GroupVersion().WithResource("reclaims")).Namespace(reclaimNS)
			if err := claims.Delete(ctx, first, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(t, time.Minute, func() error {
				if _, err := claims.Get(ctx, first, metav1.GetOptions{}); err == nil {
					return fmt.Errorf("claim %s still exists", first)
				}
				got, err := getObject(t, env, reclaimXRGVK, "", xr.GetName())
				if err != nil {
					return fmt.Errorf("released XR %s: %w", xr.GetName(), err)
				}
				if got.GetUID() != xr.GetUID() || got.GetDeletionTimestamp() != nil {
					return fmt.Errorf("released XR %s was replaced or is being deleted", xr.GetName())
				}
				if ref, ok, _ := unstructured.NestedMap(got.Object, "spec", "claimRef"); ok {
					return fmt.Errorf("released XR still has claimRef %v", ref)
				}
				if s, r, m := condition(got, "Bound"); s != "False" || r != "Released" {
					return fmt.Errorf("released XR Bound %s/%s (%s), want False/Released", s, r, m)
				}
				return nil
			})
			got, err := env.Dynamic.Resource(nopGVR).Get(ctx, nop.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatalf("%s\nthe released XR's NopResource %s: %v", tc.reason, nop.GetName(), err)
			}
			if got.GetUID() != nop.GetUID() || got.GetDeletionTimestamp() != nil {
				t.Fatalf("%s\nthe released XR's NopResource %s was replaced or is being deleted", tc.reason, nop.GetName())
			}

			// A second claim binds the released XR statically.
			createReclaim(t, env, second, map[string]any{
				"size":        "small",
				"resourceRef": map[string]any{"apiVersion": reclaimXRGVK.GroupVersion().String(), "kind": reclaimXRGVK.Kind, "name": xr.GetName()},
			})
			rebound := readyClaimXR(t, env, second)
			if rebound.GetUID() != xr.GetUID() {
				t.Errorf("%s\nclaim %s bound XR %s (uid %s), want the released %s", tc.reason, second, rebound.GetName(), rebound.GetUID(), xr.GetUID())
			}
			if ref, _, _ := unstructured.NestedString(rebound.Object, "spec", "claimRef", "name"); ref != second {
				t.Errorf("%s\nrebound XR claimRef.name %q, want %q", tc.reason, ref, second)
			}
			nops = composedOf(t, env, nopGVR, "", xr)
			if len(nops) != 1 || nops[0].GetUID() != nop.GetUID() {
				t.Errorf("%s\nrebound XR composes %d NopResources, want the original %s", tc.reason, len(nops), nop.GetName())
			}
		})
	}
}

// createReclaim creates a claim in reclaimNS and deletes it when t ends.
func createReclaim(t *testing.T, env *framework.Env, name string, spec map[string]any) {
	t.Helper()
	c := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	c.SetGroupVersionKind(reclaimClaimGVK)
	c.SetNamespace(reclaimNS)
	c.SetName(name)
	ri := env.Dynamic.Resource(reclaimClaimGVK.GroupVersion().WithResource("reclaims")).Namespace(reclaimNS)
	if _, err := ri.Create(t.Context(), c, metav1.CreateOptions{}); err != nil {
		t.Fatalf("cannot create claim %s: %v", name, err)
	}
	t.Cleanup(func() { _ = ri.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// readyClaimXR waits until the claim is Ready and returns its XR.
func readyClaimXR(t *testing.T, env *framework.Env, claim string) *unstructured.Unstructured {
	t.Helper()
	var xr *unstructured.Unstructured
	framework.Eventually(t, 2*time.Minute, func() error {
		cm, err := getObject(t, env, reclaimClaimGVK, reclaimNS, claim)
		if err != nil {
			return err
		}
		if s, r, m := condition(cm, "Ready"); s != "True" {
			return fmt.Errorf("claim %s Ready %s/%s (%s), want True", claim, s, r, m)
		}
		name, _, _ := unstructured.NestedString(cm.Object, "spec", "resourceRef", "name")
		if name == "" {
			return fmt.Errorf("claim %s has no resourceRef", claim)
		}
		got, err := getObject(t, env, reclaimXRGVK, "", name)
		if err != nil {
			return err
		}
		xr = got
		return nil
	})
	return xr
}
