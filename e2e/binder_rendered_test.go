//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/e2e/framework"
)

var gkeClaimGVK = schema.GroupVersionKind{Group: "bindergke.e2e.loom.dev", Version: "v1alpha1", Kind: "GKE"}

// gkeRendered is the GKE scenario as a Composition the renderer renders: the
// binder resolves the references between the composed resources the
// renderer applies, and neither undoes the other's fields.
const gkeRendered = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xgkes.bindergke.e2e.loom.dev
spec:
  group: bindergke.e2e.loom.dev
  names: {kind: XGKE, plural: xgkes}
  claimNames: {kind: GKE, plural: gkes}
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
                  machineType: {type: string}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xgkes
spec:
  compositeTypeRef: {apiVersion: bindergke.e2e.loom.dev/v1alpha1, kind: XGKE}
  resources:
  - name: subnetwork
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      metadata:
        labels: {role: subnetwork}
      spec:
        forProvider:
          conditionAfter: [{time: 2s, conditionType: Ready, conditionStatus: "True"}]
          fields:
            selfLink: projects/p/regions/r/subnetworks/rendered
            networkRef: {name: gke-rendered-network}
  - name: cluster
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      metadata:
        labels: {role: cluster}
      spec:
        forProvider:
          conditionAfter: [{time: 2s, conditionType: Ready, conditionStatus: "True"}]
          fields:
            id: projects/p/locations/r/clusters/rendered
            subnetworkSelector:
              matchControllerRef: true
              matchLabels: {role: subnetwork}
  - name: sa-a
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      metadata:
        labels: {role: sa, pool: a}
      spec:
        forProvider:
          conditionAfter: [{time: 1s, conditionType: Ready, conditionStatus: "True"}]
          fields: {email: rendered-a@p.iam.gserviceaccount.com}
  - name: sa-b
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      metadata:
        labels: {role: sa, pool: b}
      spec:
        forProvider:
          conditionAfter: [{time: 3s, conditionType: Ready, conditionStatus: "True"}]
          fields: {email: rendered-b@p.iam.gserviceaccount.com}
  - name: nodepool-a
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      metadata:
        labels: {role: nodepool, pool: a}
      spec:
        forProvider:
          conditionAfter: [{time: 1s, conditionType: Ready, conditionStatus: "True"}]
          fields:
            serviceAccountSelector:
              matchControllerRef: true
              matchLabels: {role: sa, pool: a}
            clusterSelector:
              matchControllerRef: true
              matchLabels: {role: cluster}
    patches:
    - fromFieldPath: spec.parameters.machineType
      toFieldPath: spec.forProvider.fields.machineType
  - name: nodepool-b
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      metadata:
        labels: {role: nodepool, pool: b}
      spec:
        forProvider:
          conditionAfter: [{time: 1s, conditionType: Ready, conditionStatus: "True"}]
          fields:
            serviceAccountSelector:
              matchControllerRef: true
              matchLabels: {role: sa, pool: b}
            clusterSelector:
              matchControllerRef: true
              matchLabels: {role: cluster}
    patches:
    - fromFieldPath: spec.parameters.machineType
      toFieldPath: spec.forProvider.fields.machineType
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:bindergke-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [bindergke.e2e.loom.dev]
  resources: [gkes]
  verbs: [get, update, patch]
- apiGroups: [bindergke.e2e.loom.dev]
  resources: [gkes/status, xgkes/status]
  verbs: [get, patch]
- apiGroups: [bindergke.e2e.loom.dev]
  resources: [xgkes]
  verbs: [get, create, patch, delete]
- apiGroups: [nop.crossplane.io]
  resources: [nopresources]
  verbs: [get, list, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:bindergke-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [bindergke.e2e.loom.dev]
  resources: [gkes, xgkes]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:bindergke-e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [bindergke.e2e.loom.dev]
  resources: [xgkes]
  verbs: [get, list, patch, delete]
- apiGroups: [bindergke.e2e.loom.dev]
  resources: [xgkes/status]
  verbs: [patch]
- apiGroups: [bindergke.e2e.loom.dev]
  resources: [gkes]
  verbs: [list, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:secrets:bindergke-e2e
  labels: {loom.dev/aggregate-to-secrets: "true"}
rules:
- apiGroups: [bindergke.e2e.loom.dev]
  resources: [gkes, xgkes]
  verbs: [get]
- apiGroups: [bindergke.e2e.loom.dev]
  resources: [gkes/status, xgkes/status]
  verbs: [get, patch]
`

// TestBinderReferencesRendered runs the GKE reference scenario through the
// renderer on the shared stack: a claim's Composition composes the
// Subnetwork, the cluster, two ServiceAccounts and two NodePools; the binder
// fills in every value; a spec change re-renders the NodePools without
// undoing what the binder wrote; and Loom then goes quiet.
func TestBinderReferencesRendered(t *testing.T) {
	env := framework.StartStack(t)
	ctx := t.Context()
	framework.ApplyYAML(t, gkeRules)
	framework.ApplyYAML(t, gkeNop("gke-rendered-network", "", "", "0s", map[string]string{"role": "network"},
		"      selfLink: projects/p/global/networks/rendered\n"))
	framework.ApplyYAML(t, gkeRendered)
	framework.ApplyYAML(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: binder-gke\n")
	framework.ApplyYAML(t, `
apiVersion: bindergke.e2e.loom.dev/v1alpha1
kind: GKE
metadata:
  name: gke
  namespace: binder-gke
spec:
  compositionRef: {name: xgkes}
  parameters:
    machineType: e2-standard-2
`)
	claims, err := resourceFor(env, gkeClaimGVK, "binder-gke")
	if err != nil {
		t.Fatal(err)
	}
	nops, err := resourceFor(env, nopGVK, "")
	if err != nil {
		t.Fatal(err)
	}

	// The composed resources of the claim's XR, by template name.
	composed := func() (map[string]*unstructured.Unstructured, error) {
		l, err := nops.List(ctx, metav1.ListOptions{LabelSelector: "crossplane.io/claim-namespace=binder-gke"})
		if err != nil {
			return nil, err
		}
		out := map[string]*unstructured.Unstructured{}
		for i := range l.Items {
			out[l.Items[i].GetAnnotations()["crossplane.io/composition-resource-name"]] = &l.Items[i]
		}
		return out, nil
	}
	check := func(machineType string) error {
		c, err := composed()
		if err != nil {
			return err
		}
		want := map[string]map[string]any{
			"subnetwork": {"network": "projects/p/global/networks/rendered"},
			"cluster":    {"subnetwork": "projects/p/regions/r/subnetworks/rendered"},
			"nodepool-a": {"serviceAccount": "rendered-a@p.iam.gserviceaccount.com", "cluster": "projects/p/locations/r/clusters/rendered", "machineType": machineType},
			"nodepool-b": {"serviceAccount": "rendered-b@p.iam.gserviceaccount.com", "cluster": "projects/p/locations/r/clusters/rendered", "machineType": machineType},
		}
		var problems []string
		for name, fields := range want {
			o := c[name]
			if o == nil {
				problems = append(problems, fmt.Sprintf("composed resource %s does not exist", name))
				continue
			}
			got, _, _ := unstructured.NestedMap(o.Object, "spec", "forProvider", "fields")
			for f, v := range fields {
				if !jsonEqual(got[f], v) {
					problems = append(problems, fmt.Sprintf("%s.%s = %v, want %v", name, f, got[f], v))
				}
			}
		}
		cm, err := claims.Get(ctx, "gke", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s, r, m := condition(cm, "Ready"); s != "True" {
			problems = append(problems, fmt.Sprintf("claim Ready %s/%s %q", s, r, m))
		}
		return errorf(problems)
	}
	framework.Eventually(t, 2*time.Minute, func() error { return check("e2-standard-2") })

	// A spec change makes the renderer apply the NodePools again; the values
	// the binder set stay.
	if _, err := claims.Patch(ctx, "gke", types.MergePatchType, []byte(`{"spec":{"parameters":{"machineType":"e2-standard-8"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error { return check("e2-standard-8") })
	if _, err := quietSystemWrites(t, env, []string{"gkes", "xgkes", "nopresources"}); err != nil {
		t.Fatalf("Loom does not go quiet once the references are resolved: %v", err)
	}
	if err := check("e2-standard-8"); err != nil {
		t.Fatalf("after Loom went quiet: %v", err)
	}
}
