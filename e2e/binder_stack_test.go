//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/stack"
	"github.com/loomxr/loom/pkg/xcrd"

	"github.com/loomxr/loom/e2e/framework"
)

// binderReplicas is how many binder replicas the binder tests run, so that
// they race on every claim.
const binderReplicas = 3

// The kinds the binder tests define: an XRD offering a claim, whose CRDs the
// tests generate with pkg/xcrd as the renderer would.
var (
	binderGroup = "binder.e2e.loom.dev"
	xrGVK       = schema.GroupVersionKind{Group: binderGroup, Version: "v1alpha1", Kind: "XBinderDB"}
	claimGVK    = schema.GroupVersionKind{Group: binderGroup, Version: "v1alpha1", Kind: "BinderDB"}
	nopGVK      = schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}
	ruleGVK     = schema.GroupVersionKind{Group: "loom.dev", Version: "v1alpha1", Kind: "ReferenceRule"}
)

const binderXRD = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xbinderdbs.binder.e2e.loom.dev
spec:
  group: binder.e2e.loom.dev
  names:
    kind: XBinderDB
    plural: xbinderdbs
  claimNames:
    kind: BinderDB
    plural: binderdbs
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
                  size:
                    type: string
                  replicas:
                    type: integer
          status:
            type: object
            properties:
              address:
                type: string
`

// binderRBAC gives the binder and the watcher the rights on the test's kinds
// that the renderer (claims, XRs) and a provider's chart (NopResources) give
// them in a real installation, through their aggregation labels.
const binderRBAC = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:aggregate-to-watcher:binder-e2e
  labels:
    loom.dev/aggregate-to-watcher: "true"
rules:
- apiGroups: [binder.e2e.loom.dev]
  resources: [binderdbs, xbinderdbs]
  verbs: [get, list, watch]
- apiGroups: [nop.crossplane.io]
  resources: [nopresources]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:aggregate-to-binder:binder-e2e
  labels:
    loom.dev/aggregate-to-binder: "true"
rules:
- apiGroups: [binder.e2e.loom.dev]
  resources: [binderdbs]
  verbs: [get, update, patch]
- apiGroups: [binder.e2e.loom.dev]
  resources: [binderdbs/status]
  verbs: [get, patch]
- apiGroups: [binder.e2e.loom.dev]
  resources: [xbinderdbs]
  verbs: [get, create, patch, delete]
- apiGroups: [binder.e2e.loom.dev]
  resources: [xbinderdbs/status]
  verbs: [get, patch]
- apiGroups: [nop.crossplane.io]
  resources: [nopresources]
  verbs: [get, list, patch]
`

// binderEnv is a stack of the watcher, three binders and the test provider,
// without the renderer and the secrets service, so that the binder is tested
// on its own: the tests play the renderer's part (XR status, resourceRefs,
// composed resources) themselves.
type binderEnv struct {
	*framework.Env
	t *testing.T
}

// startBinderStack starts the binder tests' own stack and stops it when t
// ends, keeping its state folder (with every process's log) if t failed.
func startBinderStack(t *testing.T) *binderEnv {
	t.Helper()
	dir, err := os.MkdirTemp("", "loom-binder-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), framework.StartTimeout)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{
		StateDir: dir,
		Services: []string{"watcher", "binder", "provider-nop"},
		Replicas: map[string]int{"binder": binderReplicas},
		Log:      t.Output(),
	})
	if err != nil {
		t.Fatalf("cannot start the stack: %v (logs in %s)", err, filepath.Join(dir, "logs"))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("cannot stop the stack: %v", err)
		}
		if t.Failed() {
			t.Logf("stack state and logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})

	rc := rest.CopyConfig(s.RESTConfig())
	rc.QPS, rc.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	env := &binderEnv{
		Env: &framework.Env{Stack: s, Config: rc, Kube: kube, Dynamic: dyn,
			Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))},
		t: t,
	}
	env.install(t)
	return env
}

// install applies the test XRD, the XR and claim CRDs generated from it,
// and the binder's rights on the test kinds.
func (e *binderEnv) install(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// The XRD first, directly: the stack's applier would wait for the kinds
	// it defines, which only the CRDs below create. They are generated with
	// the XRD's UID in their owner reference, as the renderer does.
	xrds, err := stack.DecodeManifests([]byte(binderXRD))
	if err != nil {
		t.Fatal(err)
	}
	xrd, err := e.client(xrds[0].GroupVersionKind(), "").Apply(ctx, xrds[0].GetName(), xrds[0],
		metav1.ApplyOptions{FieldManager: stack.FieldManager, Force: true})
	if err != nil {
		t.Fatalf("cannot apply the test XRD: %v", err)
	}
	d := &xv1.CompositeResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(xrd.Object, d); err != nil {
		t.Fatal(err)
	}
	objs, err := stack.DecodeManifests([]byte(binderRBAC))
	if err != nil {
		t.Fatal(err)
	}
	for _, gen := range []func(*xv1.CompositeResourceDefinition) (any, error){
		func(d *xv1.CompositeResourceDefinition) (any, error) { return xcrd.ForCompositeResource(d) },
		func(d *xv1.CompositeResourceDefinition) (any, error) { return xcrd.ForCompositeResourceClaim(d) },
	} {
		crd, err := gen(d)
		if err != nil {
			t.Fatalf("cannot generate CRD: %v", err)
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		objs = append(objs, u)
	}
	if _, err := e.Stack.ApplyObjects(ctx, objs...); err != nil {
		t.Fatalf("cannot install the test XRD and CRDs: %v", err)
	}
	// Through the aggregation labels, the binder's and the watcher's
	// aggregated roles get the test kinds once the clusterrole-aggregation
	// controller has run: the binder holds exactly the rights its labelled
	// role grants.
	framework.Eventually(t, time.Minute, func() error {
		for role, resource := range map[string]string{"loom-binder-aggregated": "xbinderdbs", "loom-watcher-aggregated": "binderdbs"} {
			cr, err := e.Kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
			if err != nil {
				return err
			}
			found := false
			for _, r := range cr.Rules {
				for _, res := range r.Resources {
					found = found || res == resource
				}
			}
			if !found {
				return fmt.Errorf("%s does not aggregate %s yet", role, resource)
			}
		}
		return nil
	})
}

// client returns the dynamic client of gvk in namespace.
func (e *binderEnv) client(gvk schema.GroupVersionKind, namespace string) dynamic.ResourceInterface {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	r, err := e.Resource(u)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// get returns the object, or nil if it does not exist.
func (e *binderEnv) get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	o, err := e.client(gvk, namespace).Get(ctx, name, metav1.GetOptions{})
	if kerrors.IsNotFound(err) {
		return nil, nil
	}
	return o, err
}

// list returns every object of gvk in namespace ("" for all).
func (e *binderEnv) list(ctx context.Context, gvk schema.GroupVersionKind, namespace string) ([]unstructured.Unstructured, error) {
	l, err := e.client(gvk, namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// apply server-side-applies the objects in doc (a stream of YAML
// documents) as the admin and returns them as stored. It fails t on error.
func (e *binderEnv) apply(t *testing.T, doc string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := stack.DecodeManifests([]byte(doc))
	if err != nil {
		t.Fatalf("cannot decode YAML: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	applied, err := e.Stack.ApplyObjects(ctx, objs...)
	if err != nil {
		t.Fatalf("cannot apply YAML: %v", err)
	}
	return applied
}

// namespace creates a namespace for one test and deletes it when t ends.
func (e *binderEnv) namespace(t *testing.T, name string) string {
	t.Helper()
	e.apply(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", name))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

// condition returns the status, reason and message of the condition of
// type ct on o, or empty strings.
func condition(o *unstructured.Unstructured, ct string) (status, reason, message string) {
	if o == nil {
		return "", "", ""
	}
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == ct {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg
		}
	}
	return "", "", ""
}

// writes returns the API server's count of write requests (POST, PUT,
// PATCH, APPLY, DELETE) for the supplied resource, all subresources
// included.
func (e *binderEnv) writes(ctx context.Context, resource string) (float64, error) {
	var sum float64
	for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE"} {
		n, err := e.APIRequests(ctx, map[string]string{"resource": resource, "verb": verb})
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// TestBinder runs the binder's end-to-end tests on one stack of their own.
func TestBinder(t *testing.T) {
	env := startBinderStack(t)
	t.Run("BindingRace", func(t *testing.T) { testBindingRace(t, env) })
	t.Run("BindingNameTaken", func(t *testing.T) { testBindingNameTaken(t, env) })
	t.Run("ClaimLifecycle", func(t *testing.T) { testClaimLifecycle(t, env) })
	t.Run("References", func(t *testing.T) { testReferences(t, env) })
}

// errorf joins a list of problems into one error, or returns nil.
func errorf(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	if len(problems) > 5 {
		problems = append(problems[:5], fmt.Sprintf("and %d more", len(problems)-5))
	}
	return fmt.Errorf("%s", strings.Join(problems, "; "))
}
