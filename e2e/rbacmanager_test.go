//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/loomxr/loom/e2e/framework"
)

// rbacGroup is an API group no other test, example or role names: nothing
// grants anyone rights on it but the RBAC manager.
const (
	rbacGroup  = "rbacmanager.e2e.loom.dev"
	rbacNS     = "rbac-manager-e2e"
	rbacEditor = "rbac-e2e-editor"
)

var (
	rbacXRDGVR   = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1", Resource: "compositeresourcedefinitions"}
	rbacClaimGVR = schema.GroupVersionResource{Group: rbacGroup, Version: "v1alpha1", Resource: "rbacnops"}
)

// rbacKinds are an XRD and a Composition in rbacGroup, applied with no role
// at all, and a namespace whose only binding gives rbacEditor Kubernetes'
// built-in edit ClusterRole.
const rbacKinds = `
apiVersion: v1
kind: Namespace
metadata: {name: ` + rbacNS + `}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: editor, namespace: ` + rbacNS + `}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: ` + rbacEditor + `}
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xrbacnops.` + rbacGroup + `
spec:
  group: ` + rbacGroup + `
  names: {kind: XRBACNop, plural: xrbacnops}
  claimNames: {kind: RBACNop, plural: rbacnops}
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
  name: xrbacnops
spec:
  compositeTypeRef: {apiVersion: ` + rbacGroup + `/v1alpha1, kind: XRBACNop}
  resources:
  - name: nop
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider:
          conditionAfter:
          - {time: 1s, conditionType: Ready, conditionStatus: "True"}
    patches:
    - fromFieldPath: spec.size
      toFieldPath: spec.forProvider.fields.size
`

// TestRBACManager applies an XRD of a brand-new API group with no roles for
// it, a Composition and, as a namespace user bound to nothing but
// Kubernetes' edit role, a claim: the RBAC manager grants Loom's services
// and the user their rights, the XRD says the watcher may watch its kinds,
// and the claim becomes Ready. Once the XRD is deleted, its rules leave the
// roles.
func TestRBACManager(t *testing.T) {
	env := framework.StartStack(t)
	ctx := t.Context()
	framework.ApplyYAML(t, rbacKinds)
	xrdName := "xrbacnops." + rbacGroup

	// The XRD says whether Loom may watch its kinds; with the RBAC manager
	// it soon may.
	framework.Eventually(t, time.Minute, func() error {
		return xrdCondition(ctx, env.Dynamic, xrdName, "Watchable", "True")
	})
	for _, role := range []string{"loom:xrds:watcher", "loom:xrds:renderer", "loom:xrds:binder", "loom:xrds:secrets", "loom:xrds:aggregate-to-edit", "loom:xrds:aggregate-to-view"} {
		cr, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("cannot get ClusterRole %s: %v", role, err)
		}
		if !slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.APIGroups, rbacGroup) }) {
			t.Errorf("ClusterRole %s has no rule for %s: %v", role, rbacGroup, cr.Rules)
		}
	}

	claim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": rbacGroup + "/v1alpha1",
		"kind":       "RBACNop",
		"metadata":   map[string]any{"name": "mine", "namespace": rbacNS},
		"spec":       map[string]any{"size": "small"},
	}}

	// A user with no binding may not create the claim; the editor may (once
	// the aggregation controller has copied the rules into edit).
	stranger := impersonate(t, env.Config, "rbac-e2e-stranger")
	if _, err := stranger.Resource(rbacClaimGVR).Namespace(rbacNS).Create(ctx, claim.DeepCopy(), metav1.CreateOptions{}); !kerrors.IsForbidden(err) {
		t.Fatalf("a user with no binding created a claim: got %v, want Forbidden", err)
	}
	editor := impersonate(t, env.Config, rbacEditor)
	framework.Eventually(t, time.Minute, func() error {
		_, err := editor.Resource(rbacClaimGVR).Namespace(rbacNS).Create(ctx, claim.DeepCopy(), metav1.CreateOptions{})
		return err
	})
	if _, err := editor.Resource(rbacClaimGVR).Namespace(rbacNS).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the editor cannot list claims: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := env.Stack.WaitReady(wctx, []*unstructured.Unstructured{claim}); err != nil {
		t.Fatal(err)
	}

	// The XRD goes (its claim first): its rules leave every role.
	if err := env.Dynamic.Resource(rbacClaimGVR).Namespace(rbacNS).Delete(ctx, "mine", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("cannot delete the claim: %v", err)
	}
	if err := env.Dynamic.Resource(rbacXRDGVR).Delete(ctx, xrdName, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("cannot delete the XRD: %v", err)
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		for _, role := range []string{"loom:xrds:watcher", "loom:xrds:aggregate-to-edit"} {
			cr, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.APIGroups, rbacGroup) }) {
				return fmt.Errorf("ClusterRole %s still has rules for %s after its XRD was deleted", role, rbacGroup)
			}
		}
		return nil
	})
}

// xrdCondition returns nil if the named XRD has condition typ with status.
func xrdCondition(ctx context.Context, dyn dynamic.Interface, name, typ, status string) error {
	u, err := dyn.Resource(rbacXRDGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			if m["status"] == status {
				return nil
			}
			return fmt.Errorf("XRD %s has %s=%v: %v", name, typ, m["status"], m["message"])
		}
	}
	return errors.New("XRD " + name + " has no " + typ + " condition")
}

// impersonate returns a dynamic client acting as user (the admin
// impersonates it).
func impersonate(t *testing.T, rc *rest.Config, user string) dynamic.Interface {
	t.Helper()
	c := rest.CopyConfig(rc)
	c.Impersonate = rest.ImpersonationConfig{UserName: user}
	dyn, err := dynamic.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}
