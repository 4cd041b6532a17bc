//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/stack"
)

// The namespaces of TestScope: XRs live in scopeNS; scopeOtherNS is where a
// bad Composition tries to write.
const (
	scopeNS      = "scope-e2e"
	scopeOtherNS = "scope-e2e-other"
)

var (
	scopeXRGVK        = schema.GroupVersionKind{Group: "scope.e2e.loom.dev", Version: "v1alpha1", Kind: "XScope"}
	scopeClusterXRGVK = schema.GroupVersionKind{Group: "scope.e2e.loom.dev", Version: "v1alpha1", Kind: "XClusterScope"}
	configMapGVR      = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	nopGVR            = schema.GroupVersionResource{Group: "nop.crossplane.io", Version: "v1alpha1", Resource: "nopresources"}
)

// scopeKinds are the RBAC, namespaces, XRDs and Compositions of TestScope:
// a Namespaced XR kind with a good Composition (two ConfigMaps in the XR's
// namespace), one that writes into another namespace and one that composes
// a cluster-scoped NopResource; and a Cluster XR kind composing a ConfigMap.
const scopeKinds = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:scope-e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [scope.e2e.loom.dev]
  resources: [xscopes, xclusterscopes]
  verbs: [get, list, patch, delete]
- apiGroups: [scope.e2e.loom.dev]
  resources: [xscopes/status, xclusterscopes/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, create, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:scope-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [scope.e2e.loom.dev]
  resources: [xscopes, xclusterscopes]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:scope-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [scope.e2e.loom.dev]
  resources: [xscopes, xclusterscopes, xscopes/status, xclusterscopes/status]
  verbs: [get, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:secrets:scope-e2e
  labels: {loom.dev/aggregate-to-secrets: "true"}
rules:
- apiGroups: [scope.e2e.loom.dev]
  resources: [xscopes, xclusterscopes]
  verbs: [get]
---
apiVersion: v1
kind: Namespace
metadata: {name: scope-e2e}
---
apiVersion: v1
kind: Namespace
metadata: {name: scope-e2e-other}
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xscopes.scope.e2e.loom.dev
spec:
  group: scope.e2e.loom.dev
  scope: Namespaced
  names: {kind: XScope, plural: xscopes}
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
              color: {type: string}
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xclusterscopes.scope.e2e.loom.dev
spec:
  group: scope.e2e.loom.dev
  scope: Cluster
  names: {kind: XClusterScope, plural: xclusterscopes}
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
              color: {type: string}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xscopes-local
spec:
  compositeTypeRef: {apiVersion: scope.e2e.loom.dev/v1alpha1, kind: XScope}
  resources:
  - name: settings
    base:
      apiVersion: v1
      kind: ConfigMap
      data: {color: unknown}
    patches:
    - fromFieldPath: spec.color
      toFieldPath: data.color
    readinessChecks:
    - type: None
  - name: flags
    base:
      apiVersion: v1
      kind: ConfigMap
      data: {debug: "false"}
    readinessChecks:
    - type: None
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xscopes-elsewhere
spec:
  compositeTypeRef: {apiVersion: scope.e2e.loom.dev/v1alpha1, kind: XScope}
  resources:
  - name: settings
    base:
      apiVersion: v1
      kind: ConfigMap
      data: {color: unknown}
    readinessChecks:
    - type: None
  - name: intruder
    base:
      apiVersion: v1
      kind: ConfigMap
      metadata: {namespace: scope-e2e-other}
      data: {color: unknown}
    readinessChecks:
    - type: None
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xscopes-cluster-kind
spec:
  compositeTypeRef: {apiVersion: scope.e2e.loom.dev/v1alpha1, kind: XScope}
  resources:
  - name: settings
    base:
      apiVersion: v1
      kind: ConfigMap
      data: {color: unknown}
    readinessChecks:
    - type: None
  - name: global
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider:
          conditionAfter:
          - {time: 1s, conditionType: Ready, conditionStatus: "True"}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xclusterscopes
spec:
  compositeTypeRef: {apiVersion: scope.e2e.loom.dev/v1alpha1, kind: XClusterScope}
  resources:
  - name: settings
    base:
      apiVersion: v1
      kind: ConfigMap
      metadata: {namespace: scope-e2e}
      data: {color: unknown}
    patches:
    - fromFieldPath: spec.color
      toFieldPath: data.color
    readinessChecks:
    - type: None
`

// TestScope checks composite resources of the Namespaced and Cluster scopes
// on the whole system: a Namespaced XR composes namespaced objects in its
// own namespace and becomes Ready; one whose Composition writes into
// another namespace, or composes a cluster-scoped kind, is refused with a
// condition naming the template and the cause, and nothing of it is
// created; a Namespaced XRD may not offer claims; a Cluster XR composes
// as before.
func TestScope(t *testing.T) {
	env := framework.StartStack(t)
	framework.ApplyYAML(t, scopeKinds)

	t.Run("ComposesInItsNamespace", func(t *testing.T) {
		xr := createScopeXR(t, env, scopeXRGVK, scopeNS, "local", "xscopes-local")
		framework.Eventually(t, time.Minute, func() error {
			got, err := getObject(t, env, scopeXRGVK, scopeNS, "local")
			if err != nil {
				return err
			}
			if s, r, m := condition(got, "Ready"); s != "True" {
				return fmt.Errorf("XR local Ready %s/%s (%s), want True", s, r, m)
			}
			return nil
		})
		cms := composedOf(t, env, configMapGVR, scopeNS, xr)
		if len(cms) != 2 {
			t.Fatalf("XR local composed %d ConfigMaps in %s, want 2", len(cms), scopeNS)
		}
		colors := map[string]string{}
		for _, cm := range cms {
			if c := metav1.GetControllerOf(&cm); c == nil || c.UID != xr.GetUID() {
				t.Errorf("ConfigMap %s is not controlled by XR local", cm.GetName())
			}
			v, _, _ := unstructured.NestedString(cm.Object, "data", "color")
			colors[cm.GetName()] = v
		}
		found := false
		for _, v := range colors {
			found = found || v == "teal"
		}
		if !found {
			t.Errorf("no composed ConfigMap has the XR's color patched in: %v", colors)
		}
		if n := len(composedOf(t, env, configMapGVR, scopeOtherNS, xr)); n != 0 {
			t.Errorf("XR local composed %d ConfigMaps in %s, want none", n, scopeOtherNS)
		}
	})

	refused := map[string]struct {
		reason      string
		composition string
		want        []string
	}{
		"RefusesAnotherNamespace": {
			reason:      "A template that writes into another namespace is refused, and nothing is composed.",
			composition: "xscopes-elsewhere",
			want:        []string{`composed resource "intruder"`, `namespace "scope-e2e-other" is not the composite resource's namespace "scope-e2e"`, "nothing was composed"},
		},
		"RefusesClusterScopedKind": {
			reason:      "A template of a cluster-scoped kind is refused, and nothing is composed.",
			composition: "xscopes-cluster-kind",
			want:        []string{`composed resource "global"`, "NopResource is cluster scoped", "nothing was composed"},
		},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			xrName := strings.ToLower(name)
			xr := createScopeXR(t, env, scopeXRGVK, scopeNS, xrName, tc.composition)
			var msg string
			framework.Eventually(t, time.Minute, func() error {
				got, err := getObject(t, env, scopeXRGVK, scopeNS, xrName)
				if err != nil {
					return err
				}
				s, r, m := condition(got, "Synced")
				if s != "False" {
					return fmt.Errorf("XR %s Synced %s/%s (%s), want False", xrName, s, r, m)
				}
				msg = m
				return nil
			})
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s\nSynced message %q does not say %q", tc.reason, msg, w)
				}
			}
			for _, ns := range []string{scopeNS, scopeOtherNS} {
				if n := len(composedOf(t, env, configMapGVR, ns, xr)); n != 0 {
					t.Errorf("%s\nXR %s composed %d ConfigMaps in %s, want none", tc.reason, xrName, n, ns)
				}
			}
			if n := len(composedOf(t, env, nopGVR, "", xr)); n != 0 {
				t.Errorf("%s\nXR %s composed %d NopResources, want none", tc.reason, xrName, n)
			}
			got, err := getObject(t, env, scopeXRGVK, scopeNS, xrName)
			if err != nil {
				t.Fatal(err)
			}
			if refs, _, _ := unstructured.NestedSlice(got.Object, "spec", "crossplane", "resourceRefs"); len(refs) != 0 {
				t.Errorf("%s\nXR %s records resourceRefs %v, want none", tc.reason, xrName, refs)
			}
		})
	}

	t.Run("OffersNoClaims", func(t *testing.T) {
		xrd := `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xclaimedscopes.scope.e2e.loom.dev
spec:
  group: scope.e2e.loom.dev
  scope: Namespaced
  names: {kind: XClaimedScope, plural: xclaimedscopes}
  claimNames: {kind: ClaimedScope, plural: claimedscopes}
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema: {type: object}
`
		objs, err := stack.DecodeManifests([]byte(xrd))
		if err != nil {
			t.Fatal(err)
		}
		ri, err := env.Resource(objs[0])
		if err != nil {
			t.Fatal(err)
		}
		_, err = ri.Create(t.Context(), objs[0], metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !kerrors.IsInvalid(err) || !strings.Contains(err.Error(), "claimNames are only supported when scope is LegacyCluster") {
			t.Errorf("creating a Namespaced XRD with claimNames returned %v, want it refused as invalid", err)
		}
	})

	t.Run("ClusterScopeComposes", func(t *testing.T) {
		xr := createScopeXR(t, env, scopeClusterXRGVK, "", "scope-e2e-cluster", "xclusterscopes")
		framework.Eventually(t, time.Minute, func() error {
			got, err := getObject(t, env, scopeClusterXRGVK, "", xr.GetName())
			if err != nil {
				return err
			}
			if s, r, m := condition(got, "Ready"); s != "True" {
				return fmt.Errorf("XR %s Ready %s/%s (%s), want True", xr.GetName(), s, r, m)
			}
			return nil
		})
		if n := len(composedOf(t, env, configMapGVR, scopeNS, xr)); n != 1 {
			t.Errorf("cluster-scoped XR composed %d ConfigMaps in %s, want 1", n, scopeNS)
		}
	})
}

// createScopeXR creates an XR of kind gvk (in namespace, "" for a
// cluster-scoped kind) that uses the named Composition and has color teal,
// and deletes it when t ends.
func createScopeXR(t *testing.T, env *framework.Env, gvk schema.GroupVersionKind, namespace, name, composition string) *unstructured.Unstructured {
	t.Helper()
	xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"color":      "teal",
		"crossplane": map[string]any{"compositionRef": map[string]any{"name": composition}},
	}}}
	xr.SetGroupVersionKind(gvk)
	xr.SetNamespace(namespace)
	xr.SetName(name)
	ri, err := env.Resource(xr)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ri.Create(t.Context(), xr, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("cannot create %s %s: %v", gvk.Kind, name, err)
	}
	t.Cleanup(func() { _ = ri.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return got
}

// getObject returns the object, or an error (also when it does not exist).
func getObject(t *testing.T, env *framework.Env, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(gvk)
	o.SetNamespace(namespace)
	ri, err := env.Resource(o)
	if err != nil {
		return nil, err
	}
	return ri.Get(t.Context(), name, metav1.GetOptions{})
}

// composedOf lists the objects of resource gvr in namespace ("" for all or
// a cluster-scoped kind) that carry xr's crossplane.io/composite label.
func composedOf(t *testing.T, env *framework.Env, gvr schema.GroupVersionResource, namespace string, xr *unstructured.Unstructured) []unstructured.Unstructured {
	t.Helper()
	l, err := env.Dynamic.Resource(gvr).Namespace(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "crossplane.io/composite=" + xr.GetName()})
	if err != nil {
		t.Fatalf("cannot list %s: %v", gvr.Resource, err)
	}
	var out []unstructured.Unstructured
	for _, o := range l.Items {
		if c := metav1.GetControllerOf(&o); c != nil && c.UID == xr.GetUID() {
			out = append(out, o)
		}
	}
	return out
}
