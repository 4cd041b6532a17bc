//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/e2e/framework"
)

// saNS holds TestServiceAccount's ServiceAccount and composed ConfigMaps.
const saNS = "serviceaccount-e2e"

var saXRGVK = schema.GroupVersionKind{Group: "serviceaccount.e2e.loom.dev", Version: "v1alpha1", Kind: "XTenant"}

// saKinds are an XRD bound to the ServiceAccount composer, which may write
// ConfigMaps in saNS and nothing else, and a Composition of two ConfigMaps
// and a NopResource. The renderer itself may create NopResources
// (renderer-aggregate-example.yaml), so only the impersonation can refuse
// them.
const saKinds = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:serviceaccount-e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [serviceaccount.e2e.loom.dev]
  resources: [xtenants]
  verbs: [get, list, patch, delete]
- apiGroups: [serviceaccount.e2e.loom.dev]
  resources: [xtenants/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:serviceaccount-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [serviceaccount.e2e.loom.dev]
  resources: [xtenants]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:serviceaccount-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [serviceaccount.e2e.loom.dev]
  resources: [xtenants, xtenants/status]
  verbs: [get, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:secrets:serviceaccount-e2e
  labels: {loom.dev/aggregate-to-secrets: "true"}
rules:
- apiGroups: [serviceaccount.e2e.loom.dev]
  resources: [xtenants]
  verbs: [get]
---
apiVersion: v1
kind: Namespace
metadata: {name: serviceaccount-e2e}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: composer, namespace: serviceaccount-e2e}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: composer, namespace: serviceaccount-e2e}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, create, patch, update, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: composer, namespace: serviceaccount-e2e}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: composer}
subjects:
- {kind: ServiceAccount, name: composer, namespace: serviceaccount-e2e}
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xtenants.serviceaccount.e2e.loom.dev
spec:
  group: serviceaccount.e2e.loom.dev
  names: {kind: XTenant, plural: xtenants}
  serviceAccountRef: {namespace: serviceaccount-e2e, name: composer}
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
              team: {type: string}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xtenants
spec:
  compositeTypeRef: {apiVersion: serviceaccount.e2e.loom.dev/v1alpha1, kind: XTenant}
  resources:
  - name: settings
    base:
      apiVersion: v1
      kind: ConfigMap
      metadata: {namespace: serviceaccount-e2e}
      data: {team: unknown}
    patches:
    - fromFieldPath: spec.team
      toFieldPath: data.team
    readinessChecks:
    - type: None
  - name: quota
    base:
      apiVersion: v1
      kind: ConfigMap
      metadata: {namespace: serviceaccount-e2e}
      data: {cpu: "2"}
    readinessChecks:
    - type: None
  - name: database
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider:
          conditionAfter:
          - {time: 1s, conditionType: Ready, conditionStatus: "True"}
`

// TestServiceAccount checks that an XRD bound to a ServiceAccount has its
// composed resources written as that account: the ConfigMaps it may create
// are composed, the NopResource it may not is refused, and the XR's Synced
// condition names the account, the verb and the resource.
func TestServiceAccount(t *testing.T) {
	env := framework.StartStack(t)
	framework.ApplyYAML(t, saKinds)
	xr := framework.ApplyYAML(t, `
apiVersion: serviceaccount.e2e.loom.dev/v1alpha1
kind: XTenant
metadata: {name: serviceaccount-e2e-tenant}
spec:
  team: platform
`)[0]

	want := []string{
		`composed resource "database": cannot create NopResource "`,
		"forbidden: service account serviceaccount-e2e/composer may not create nop.crossplane.io/nopresources",
	}
	var msg string
	framework.Eventually(t, 2*time.Minute, func() error {
		got, err := getObject(t, env, saXRGVK, "", xr.GetName())
		if err != nil {
			return err
		}
		if cms := composedOf(t, env, configMapGVR, saNS, got); len(cms) != 2 {
			return fmt.Errorf("XR composed %d ConfigMaps, want 2", len(cms))
		}
		s, r, m := condition(got, "Synced")
		if s != "False" {
			return fmt.Errorf("XR Synced %s/%s (%s), want False", s, r, m)
		}
		for _, w := range want {
			if !strings.Contains(m, w) {
				return fmt.Errorf("XR Synced message %q does not say %q", m, w)
			}
		}
		msg = m
		return nil
	})
	t.Logf("Synced: %s", msg)

	for _, cm := range composedOf(t, env, configMapGVR, saNS, xr) {
		if cm.GetAnnotations()["crossplane.io/composition-resource-name"] != "settings" {
			continue
		}
		if v, _, _ := unstructured.NestedString(cm.Object, "data", "team"); v != "platform" {
			t.Errorf("ConfigMap settings has team %q, want platform", v)
		}
	}
	if n := len(composedOf(t, env, nopGVR, "", xr)); n != 0 {
		t.Errorf("XR composed %d NopResources its service account may not create, want none", n)
	}
}
