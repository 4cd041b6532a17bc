//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/stack"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// The parity tests (issue 20) run Crossplane v1.20 behaviours that Loom's
// event routing must not lose, on a stack of their own whose watcher resyncs
// every five hours: whatever they wait for must arrive by events, and the
// tap checks that no RESYNC event was published while they ran.

const parityGroup = "parity.e2e.loom.dev"

const parityRBAC = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:parity-e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [parity.e2e.loom.dev]
  resources: ["*"]
  verbs: [get, list, create, patch, update, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:parity-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [parity.e2e.loom.dev]
  resources: ["*"]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:parity-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [parity.e2e.loom.dev]
  resources: ["*"]
  verbs: [get, create, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:secrets:parity-e2e
  labels: {loom.dev/aggregate-to-secrets: "true"}
rules:
- apiGroups: [parity.e2e.loom.dev]
  resources: ["*"]
  verbs: [get, patch]
`

// parityXRD defines an XR kind of the parity group with the given spec
// properties (YAML, indented for the schema).
func parityXRD(plural, kind, props string) string {
	return fmt.Sprintf(`
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: %[1]s.parity.e2e.loom.dev
spec:
  group: parity.e2e.loom.dev
  names: {kind: %[2]s, plural: %[1]s}
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
%[3]s`, plural, kind, props)
}

// parityNop is a composed NopResource template that turns Ready after a
// second, with extra YAML for the template (patches), indented as a list
// entry's fields.
func parityNop(name, extra string) string {
	return fmt.Sprintf(`
  - name: %s
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      metadata:
        annotations: {exampleVal: foo}
      spec:
        forProvider:
          conditionAfter:
          - {time: 1s, conditionType: Ready, conditionStatus: "True"}
          fields: {zone: z1}
%s`, name, extra)
}

func parityComposition(name, kind, resources string) string {
	return fmt.Sprintf(`
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: %s
spec:
  compositeTypeRef: {apiVersion: parity.e2e.loom.dev/v1alpha1, kind: %s}
  resources:%s`, name, kind, resources)
}

// startParityStack starts a stack of the test's own, its watcher resyncing
// every five hours, with the parity group's roles installed. It stops when
// t ends.
func startParityStack(t *testing.T) *framework.Env {
	t.Helper()
	dir, err := os.MkdirTemp("", "loom-parity-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), framework.StartTimeout)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{StateDir: dir, Env: []string{"LOOM_RESYNC_PERIOD=5h"}})
	if err != nil {
		t.Fatalf("cannot start a stack (state in %s): %v", dir, err)
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
	e := &framework.Env{Stack: s, Config: rc}
	if e.Kube, err = kubernetes.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	if e.Dynamic, err = dynamic.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	e.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return e
}

// parityApply applies docs to the test's stack.
func parityApply(t *testing.T, env *framework.Env, docs ...string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, d := range docs {
		objs = append(objs, mustDecode(t, d)...)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := env.Stack.ApplyObjects(ctx, objs...)
	if err != nil {
		t.Fatalf("cannot apply: %v", err)
	}
	return out
}

func parityXRs(env *framework.Env, plural string) dynamic.NamespaceableResourceInterface {
	return env.Dynamic.Resource(schema.GroupVersionResource{Group: parityGroup, Version: "v1alpha1", Resource: plural})
}

// conditionIs checks a condition's status and reason (not its shape, which
// issue 20's condition work changes).
func conditionIs(o *unstructured.Unstructured, typ, status, reason string) error {
	if s, r := conditionField(o, typ, "status"), conditionField(o, typ, "reason"); s != status || r != reason {
		return fmt.Errorf("%s %s condition is %s/%s (%s), want %s/%s", o.GetKind(), o.GetName(), s, r, conditionField(o, typ, "message"), status, reason)
	}
	return nil
}

// noResync fails t if the tap saw a RESYNC event after mark.
func noResync(t *testing.T, tp *tap, mark int) {
	t.Helper()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for _, g := range tp.events[mark:] {
		if g.ev.GetType() == eventsv1.EventType_EVENT_TYPE_RESYNC {
			t.Fatalf("a RESYNC event reached %s (%s %s): the test must not depend on a resync", g.service, g.ev.GetObject().GetKind(), g.ev.GetObject().GetName())
		}
	}
}

// TestRendererParity checks, without any resync, three behaviours of
// Crossplane v1.20 (issue 20): a nested XR is rendered and its parent hears
// that it became Ready; patches into the XR's metadata and spec are written
// back; and an XR whose composed resource the API server refuses is retried
// until a fix outside its inputs (the composed kind's schema) lets it
// through, with no operator replaying anything.
func TestRendererParity(t *testing.T) {
	env := startParityStack(t)
	parityApply(t, env, parityRBAC)
	tp := startTap(t, env.Stack.NATSURL())
	mark := tp.mark()

	t.Run("Nested", func(t *testing.T) {
		parityApply(t, env,
			parityXRD("xpparents", "XPParent", "              size: {type: string}\n"),
			parityXRD("xpchildren", "XPChild", "              size: {type: string}\n"),
			parityComposition("xpparents", "XPParent", `
  - name: child
    base:
      apiVersion: parity.e2e.loom.dev/v1alpha1
      kind: XPChild
      spec: {size: unknown}
    patches:
    - fromFieldPath: spec.size
      toFieldPath: spec.size
`),
			parityComposition("xpchildren", "XPChild", parityNop("one", `
    patches:
    - fromFieldPath: spec.size
      toFieldPath: spec.forProvider.fields.size
`)+parityNop("two", "")),
		)
		parents, children := parityXRs(env, "xpparents"), parityXRs(env, "xpchildren")
		parityApply(t, env, `
apiVersion: parity.e2e.loom.dev/v1alpha1
kind: XPParent
metadata: {name: nested}
spec: {size: small}
`)
		var child string
		framework.Eventually(t, time.Minute, func() error {
			p, err := parents.Get(t.Context(), "nested", metav1.GetOptions{})
			if err != nil {
				return err
			}
			refs, _, _ := unstructured.NestedSlice(p.Object, "spec", "resourceRefs")
			if len(refs) != 1 {
				return fmt.Errorf("parent resourceRefs %v, want the child XR", refs)
			}
			child, _ = refs[0].(map[string]any)["name"].(string)
			c, err := children.Get(t.Context(), child, metav1.GetOptions{})
			if err != nil {
				return err
			}
			return errors.Join(
				conditionIs(c, "Ready", "True", "Available"),
				expectString(c, "small", "spec", "size"),
				conditionIs(p, "Ready", "True", "Available"),
			)
		})
		noResync(t, tp, mark)
	})

	t.Run("WriteBack", func(t *testing.T) {
		parityApply(t, env,
			parityXRD("xpwrites", "XPWrite", "              zone: {type: string}\n"),
			parityComposition("xpwrites", "XPWrite", parityNop("nop", `
    patches:
    - type: FromCompositeFieldPath
      fromFieldPath: metadata.name
      toFieldPath: metadata.annotations[something]
    - type: ToCompositeFieldPath
      fromFieldPath: metadata.annotations[exampleVal]
      toFieldPath: metadata.annotations[exampleVal]
    - type: ToCompositeFieldPath
      fromFieldPath: status.atProvider.fields.zone
      toFieldPath: spec.zone
`)),
		)
		xrs := parityXRs(env, "xpwrites")
		parityApply(t, env, `
apiVersion: parity.e2e.loom.dev/v1alpha1
kind: XPWrite
metadata: {name: written}
spec: {}
`)
		var xr *unstructured.Unstructured
		framework.Eventually(t, time.Minute, func() error {
			var err error
			if xr, err = xrs.Get(t.Context(), "written", metav1.GetOptions{}); err != nil {
				return err
			}
			if got := xr.GetAnnotations()["exampleVal"]; got != "foo" {
				return fmt.Errorf("the XR's annotation exampleVal is %q, want foo", got)
			}
			return errors.Join(expectString(xr, "z1", "spec", "zone"), conditionIs(xr, "Ready", "True", "Available"))
		})
		// Written back once: rendering again writes nothing.
		rerenderWritesNothing(t, env, xr, "xpwrites")
		noResync(t, tp, mark)
	})

	t.Run("Refused", func(t *testing.T) {
		strict := func(minimum int) string {
			return parityXRD("xpstricts", "XPStrict", fmt.Sprintf("              size: {type: integer, minimum: %d}\n", minimum))
		}
		parityApply(t, env,
			strict(2),
			parityXRD("xpholders", "XPHolder", "              size: {type: integer}\n"),
			parityComposition("xpstricts", "XPStrict", parityNop("nop", "")),
			parityComposition("xpholders", "XPHolder", `
  - name: strict
    base:
      apiVersion: parity.e2e.loom.dev/v1alpha1
      kind: XPStrict
      spec: {}
    patches:
    - fromFieldPath: spec.size
      toFieldPath: spec.size
`+parityNop("nop", "")),
		)
		holders := parityXRs(env, "xpholders")
		parityApply(t, env, `
apiVersion: parity.e2e.loom.dev/v1alpha1
kind: XPHolder
metadata: {name: refused}
spec: {size: 1}
`)
		framework.Eventually(t, time.Minute, func() error {
			h, err := holders.Get(t.Context(), "refused", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := conditionIs(h, "Synced", "False", "ReconcileError"); err != nil {
				return err
			}
			msg := conditionField(h, "Synced", "message")
			for _, want := range []string{`composed resource "strict"`, "XPStrict", "spec.size"} {
				if !strings.Contains(msg, want) {
					return fmt.Errorf("Synced message %q does not name %s", msg, want)
				}
			}
			return nil
		})
		// Fixing the schema of the refused kind changes nothing the
		// holder's render reads: only its retry finds out.
		parityApply(t, env, strict(0))
		framework.Eventually(t, 3*time.Minute, func() error {
			h, err := holders.Get(t.Context(), "refused", metav1.GetOptions{})
			if err != nil {
				return err
			}
			return errors.Join(conditionIs(h, "Synced", "True", "ReconcileSuccess"), conditionIs(h, "Ready", "True", "Available"))
		})
		noResync(t, tp, mark)
	})
}
