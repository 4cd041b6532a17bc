//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/e2e/framework"
)

var claimNopGVK = schema.GroupVersionKind{Group: "claim.renderer.e2e.loom.dev", Version: "v1alpha1", Kind: "ClaimNop"}

const claimNopKinds = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:claim-e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [claim.renderer.e2e.loom.dev]
  resources: [xclaimnops]
  verbs: [get, list, patch, delete]
- apiGroups: [claim.renderer.e2e.loom.dev]
  resources: [xclaimnops/status]
  verbs: [patch]
- apiGroups: [claim.renderer.e2e.loom.dev]
  resources: [claimnops]
  verbs: [list, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:claim-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [claim.renderer.e2e.loom.dev]
  resources: [xclaimnops, claimnops]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:claim-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [claim.renderer.e2e.loom.dev]
  resources: [claimnops]
  verbs: [get, update, patch]
- apiGroups: [claim.renderer.e2e.loom.dev]
  resources: [claimnops/status, xclaimnops/status]
  verbs: [get, patch]
- apiGroups: [claim.renderer.e2e.loom.dev]
  resources: [xclaimnops]
  verbs: [get, create, patch, delete]
- apiGroups: [nop.crossplane.io]
  resources: [nopresources]
  verbs: [get, list, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:secrets:claim-e2e
  labels: {loom.dev/aggregate-to-secrets: "true"}
rules:
- apiGroups: [claim.renderer.e2e.loom.dev]
  resources: [xclaimnops, claimnops]
  verbs: [get]
- apiGroups: [claim.renderer.e2e.loom.dev]
  resources: [xclaimnops/status, claimnops/status]
  verbs: [get, patch]
---
apiVersion: v1
kind: Namespace
metadata: {name: renderer-claims}
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xclaimnops.claim.renderer.e2e.loom.dev
spec:
  group: claim.renderer.e2e.loom.dev
  names: {kind: XClaimNop, plural: xclaimnops}
  claimNames: {kind: ClaimNop, plural: claimnops}
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

// TestRendererClaims creates claims of a kind whose Composition has three
// NopResources, waits until every claim is Ready through the whole system
// (watcher, binder, renderer, provider), and reports the API writes each
// claim cost, per resource, from the API server's own counters. It then
// requeues every XR and checks that none of those renders writes anything.
//
// LOOM_E2E_RENDERER_CLAIMS sets the number of claims (default 10).
func TestRendererClaims(t *testing.T) {
	claims := 10
	if n, err := strconv.Atoi(os.Getenv("LOOM_E2E_RENDERER_CLAIMS")); err == nil && n > 0 {
		claims = n
	}
	env := framework.StartStack(t)
	ctx := t.Context()
	framework.ApplyYAML(t, claimNopKinds)
	framework.ApplyYAML(t, strings.NewReplacer(
		"name: xrendernops", "name: xclaimnops",
		"apiVersion: renderer.e2e.loom.dev/v1alpha1, kind: XRenderNop", "apiVersion: claim.renderer.e2e.loom.dev/v1alpha1, kind: XClaimNop",
	).Replace(rendererComposition(2)))

	resources := []string{"claimnops", "xclaimnops", "nopresources", "secrets", "events"}
	writes := func() map[string]float64 {
		t.Helper()
		out := map[string]float64{}
		for _, res := range resources {
			for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE"} {
				for _, sub := range []string{"", "status"} {
					n, err := env.APIRequests(ctx, map[string]string{"resource": res, "verb": verb, "subresource": sub})
					if err != nil {
						t.Fatal(err)
					}
					out[res] += n
					if n > 0 {
						out[res+"/"+sub+"/"+verb] += n
					}
				}
			}
		}
		return out
	}
	before := writes()
	start := time.Now()
	cl := env.Dynamic.Resource(claimNopGVK.GroupVersion().WithResource("claimnops")).Namespace("renderer-claims")
	for i := range claims {
		c := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"parameters": map[string]any{"size": "small", "replicas": int64(i)}}}}
		c.SetGroupVersionKind(claimNopGVK)
		c.SetName(fmt.Sprintf("claim-%02d", i))
		if _, err := cl.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = cl.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	framework.Eventually(t, 2*time.Minute+time.Duration(claims)*100*time.Millisecond, func() error {
		l, err := cl.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		var last error
		for i := range l.Items {
			if err := hasCondition(&l.Items[i], "Ready", "True", "Available"); err != nil {
				last = fmt.Errorf("claim %s: %w", l.Items[i].GetName(), err)
				continue
			}
			ready++
		}
		if ready < claims {
			return fmt.Errorf("%d of %d claims Ready; %v", ready, claims, last)
		}
		return nil
	})
	took := time.Since(start)
	after := writes()
	var total float64
	var parts []string
	for res := range after {
		d := after[res] - before[res]
		if !strings.Contains(res, "/") {
			total += d
		}
		if d > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f", res, d/float64(claims)))
		}
	}
	sort.Strings(parts)
	t.Logf("%d claims Ready in %s; API writes per claim: %.1f (%s)", claims, took.Round(time.Millisecond), total/float64(claims), strings.Join(parts, ", "))

	// Every XR, rendered again, writes nothing.
	xrs, err := env.Dynamic.Resource(claimNopGVK.GroupVersion().WithResource("xclaimnops")).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(xrs.Items) != claims {
		t.Fatalf("%d XRs for %d claims", len(xrs.Items), claims)
	}
	var errs []error
	for i := range xrs.Items {
		if c := conditionField(&xrs.Items[i], "Ready", "status"); c != "True" {
			errs = append(errs, fmt.Errorf("XR %s is not Ready", xrs.Items[i].GetName()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	rerenderWritesNothing(t, env, &xrs.Items[0], "xclaimnops")
}
