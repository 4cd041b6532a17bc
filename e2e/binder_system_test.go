//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/testing/poll"
)

// The full-system claim test defines its own kinds, rendered by the real
// renderer on the shared stack.
var (
	sysClaimGVK = schema.GroupVersionKind{Group: "binderfull.e2e.loom.dev", Version: "v1alpha1", Kind: "FullDB"}
	sysXRGVK    = schema.GroupVersionKind{Group: "binderfull.e2e.loom.dev", Version: "v1alpha1", Kind: "XFullDB"}
)

// sysSetup is an XRD offering a claim, a Composition of one NopResource
// whose size comes from the claim and goes back to the XR's status, and the
// services' rights on the test kinds.
const sysSetup = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xfulldbs.binderfull.e2e.loom.dev
spec:
  group: binderfull.e2e.loom.dev
  names: {kind: XFullDB, plural: xfulldbs}
  claimNames: {kind: FullDB, plural: fulldbs}
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
          status:
            type: object
            properties:
              size: {type: string}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xfulldbs
spec:
  compositeTypeRef: {apiVersion: binderfull.e2e.loom.dev/v1alpha1, kind: XFullDB}
  resources:
  - name: db
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider:
          conditionAfter:
          - {time: 1s, conditionType: Ready, conditionStatus: "True"}
          fields: {size: unknown}
    patches:
    - fromFieldPath: spec.parameters.size
      toFieldPath: spec.forProvider.fields.size
    - type: ToCompositeFieldPath
      fromFieldPath: status.atProvider.fields.size
      toFieldPath: status.size
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:binderfull-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [binderfull.e2e.loom.dev]
  resources: [fulldbs]
  verbs: [get, update, patch]
- apiGroups: [binderfull.e2e.loom.dev]
  resources: [fulldbs/status, xfulldbs/status]
  verbs: [get, patch]
- apiGroups: [binderfull.e2e.loom.dev]
  resources: [xfulldbs]
  verbs: [get, create, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:binderfull-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [binderfull.e2e.loom.dev]
  resources: [fulldbs, xfulldbs]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:binderfull-e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [binderfull.e2e.loom.dev]
  resources: [xfulldbs]
  verbs: [get, list, patch, delete]
- apiGroups: [binderfull.e2e.loom.dev]
  resources: [xfulldbs/status]
  verbs: [patch]
- apiGroups: [binderfull.e2e.loom.dev]
  resources: [fulldbs]
  verbs: [list, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:secrets:binderfull-e2e
  labels: {loom.dev/aggregate-to-secrets: "true"}
rules:
- apiGroups: [binderfull.e2e.loom.dev]
  resources: [fulldbs, xfulldbs]
  verbs: [get]
- apiGroups: [binderfull.e2e.loom.dev]
  resources: [fulldbs/status, xfulldbs/status]
  verbs: [get, patch]
`

// sysClaims is how many claims the full-system test creates.
const sysClaims = 10

// TestBinderClaimSystem runs claims through the whole of Loom on the shared
// stack: the binder binds each claim, the renderer composes its XR, the test
// provider makes the composed resource Ready, and the binder brings the XR's
// status and readiness back to the claim. A spec change on the claim reaches
// the composed resource and comes back as status; deleting the claims
// deletes everything they caused. It reports the API writes per claim of
// the whole system.
func TestBinderClaimSystem(t *testing.T) {
	env := framework.StartStack(t)
	ctx := t.Context()
	framework.ApplyYAML(t, sysSetup)
	ns := "binder-system"
	framework.ApplyYAML(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns))
	claims, err := resourceFor(env, sysClaimGVK, ns)
	if err != nil {
		t.Fatal(err)
	}
	xrs, err := resourceFor(env, sysXRGVK, "")
	if err != nil {
		t.Fatal(err)
	}
	nops, err := resourceFor(env, nopGVK, "")
	if err != nil {
		t.Fatal(err)
	}

	// The Composition's first revision exists before the claims come, as
	// on a running platform: the binder names it in each claim's binding.
	revs, err := env.Resource(revisionStub())
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		l, err := revs.List(ctx, metav1.ListOptions{LabelSelector: "crossplane.io/composition-name=xfulldbs"})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return errors.New("no CompositionRevision of xfulldbs yet")
		}
		return nil
	})

	resources := []string{"fulldbs", "xfulldbs", "nopresources", "secrets", "events"}
	before, err := systemWrites(ctx, env, resources)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sysClaims {
		c := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"compositionRef": map[string]any{"name": "xfulldbs"},
			"parameters":     map[string]any{"size": "small"},
		}}}
		c.SetGroupVersionKind(sysClaimGVK)
		c.SetNamespace(ns)
		c.SetName(fmt.Sprintf("sys-%02d", i))
		if _, err := claims.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Every claim Ready, with the composed resource's size in its status.
	framework.Eventually(t, 3*time.Minute, func() error { return claimsReady(ctx, claims, "small") })
	after, err := quietSystemWrites(t, env, resources)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	total := 0.0
	for _, r := range resources {
		n := (after[r] - before[r]) / sysClaims
		if r == "fulldbs" {
			n-- // the test's own create
		}
		total += n
		parts = append(parts, fmt.Sprintf("%s %.1f", r, n))
	}
	t.Logf("API writes per claim by Loom from creation to Ready (%d claims): %s; total %.1f", sysClaims, strings.Join(parts, ", "), total)
	for _, r := range []string{"fulldbs", "xfulldbs"} {
		var detail []string
		for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE"} {
			for _, sub := range []string{"", "status"} {
				n, err := env.APIRequests(ctx, map[string]string{"resource": r, "verb": verb, "subresource": sub})
				if err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					detail = append(detail, fmt.Sprintf("%s %s %.1f", verb, sub, n/sysClaims))
				}
			}
		}
		t.Logf("%s writes per claim since the stack started, by verb and subresource: %s", r, strings.Join(detail, ", "))
	}
	// The binder creates each XR with the claim's spec; until the claim
	// changes, nothing is applied to the XR's spec (the API server's default
	// of spec.compositionUpdatePolicy, recorded as the binder's at create,
	// once cost every claim an apply).
	applied, err := env.APIRequests(ctx, map[string]string{"resource": "xfulldbs", "verb": "APPLY", "subresource": ""})
	if err != nil {
		t.Fatal(err)
	}
	if applied != 0 {
		t.Errorf("server-side applies of XFullDB spec before any claim changed: %.0f, want 0", applied)
	}
	// Each claim's spec is written once, by its binding, which names the
	// Composition's revision too: nothing flows back from the XR later
	// (that was a second update of every claim). One claim may still see
	// the revision flow back, if the binder read the object mirror in the
	// moment before the watcher mirrored the revision.
	updated, err := env.APIRequests(ctx, map[string]string{"resource": "fulldbs", "verb": "PUT", "subresource": ""})
	if err != nil {
		t.Fatal(err)
	}
	if updated > sysClaims+1 {
		t.Errorf("updates of FullDB claims' spec until Ready: %.0f for %d claims, want at most %d (the binding of each, one spare)", updated, sysClaims, sysClaims+1)
	}

	// A spec change reaches the composed resource and comes back.
	for i := range sysClaims {
		patch := []byte(`{"spec":{"parameters":{"size":"large"}}}`)
		if _, err := claims.Patch(ctx, fmt.Sprintf("sys-%02d", i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 2*time.Minute, func() error { return claimsReady(ctx, claims, "large") })

	// Deleting the claims deletes their XRs and composed resources.
	for i := range sysClaims {
		if err := claims.Delete(ctx, fmt.Sprintf("sys-%02d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		cl, err := claims.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		xl, err := xrs.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		nl, err := nops.List(ctx, metav1.ListOptions{LabelSelector: "crossplane.io/claim-namespace=" + ns})
		if err != nil {
			return err
		}
		if len(cl.Items)+len(xl.Items)+len(nl.Items) > 0 {
			return fmt.Errorf("%d claims, %d XRs and %d composed resources remain", len(cl.Items), len(xl.Items), len(nl.Items))
		}
		return nil
	})
}

// revisionStub is an object of kind CompositionRevision, for resourceFor-like lookups.
func revisionStub() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiextensions.crossplane.io/v1")
	u.SetKind("CompositionRevision")
	return u
}

// dynamicResource is the dynamic client of one kind.
type dynamicResource = dynamic.ResourceInterface

// resourceFor returns the dynamic client of gvk in namespace.
func resourceFor(env *framework.Env, gvk schema.GroupVersionKind, namespace string) (dynamicResource, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	return env.Resource(u)
}

// claimsReady checks that every claim is Ready and mirrors size in its
// status, coming from its composed resource.
func claimsReady(ctx context.Context, claims dynamicResource, size string) error {
	l, err := claims.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(l.Items) != sysClaims {
		return fmt.Errorf("%d claims, want %d", len(l.Items), sysClaims)
	}
	var problems []string
	for i := range l.Items {
		c := &l.Items[i]
		if s, r, m := condition(c, "Ready"); s != "True" {
			problems = append(problems, fmt.Sprintf("claim %s Ready %s/%s %q", c.GetName(), s, r, m))
			continue
		}
		if got, _, _ := unstructured.NestedString(c.Object, "status", "size"); got != size {
			problems = append(problems, fmt.Sprintf("claim %s status.size %q, want %q", c.GetName(), got, size))
		}
	}
	sort.Strings(problems)
	return errorf(problems)
}

// systemWrites returns the API server's write counts of each resource.
func systemWrites(ctx context.Context, env *framework.Env, resources []string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, r := range resources {
		for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE"} {
			n, err := env.APIRequests(ctx, map[string]string{"resource": r, "verb": verb})
			if err != nil {
				return nil, err
			}
			out[r] += n
		}
	}
	return out, nil
}

// quietSystemWrites waits until the write counts of resources stay
// unchanged for three seconds, and returns them.
func quietSystemWrites(t *testing.T, env *framework.Env, resources []string) (map[string]float64, error) {
	t.Helper()
	var last map[string]float64
	var since time.Time
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := poll.Wait(ctx, func(context.Context) error {
		now, err := systemWrites(t.Context(), env, resources)
		if err != nil {
			return err
		}
		same := last != nil
		for _, r := range resources {
			same = same && now[r] == last[r]
		}
		if !same {
			last, since = now, time.Now()
			return fmt.Errorf("writes still happening")
		}
		if time.Since(since) < 3*time.Second {
			return fmt.Errorf("quiet for %s only", time.Since(since).Round(time.Millisecond))
		}
		return nil
	}, poll.Every(framework.PollInterval))
	return last, err
}
