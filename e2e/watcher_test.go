//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/stack"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// tap records every event published on the work subjects of the bus. It is
// a plain NATS subscription next to the services' JetStream consumers, so it
// sees each publish without taking work from anyone.
type tap struct {
	mu     sync.Mutex
	events []tapped
}

type tapped struct {
	service string
	ev      *eventsv1.Event
}

func startTap(t *testing.T, url string) *tap {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("e2e-watcher-tap"))
	if err != nil {
		t.Fatalf("cannot connect to NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	tp := &tap{}
	for _, svc := range bus.Services {
		_, err := nc.Subscribe("loom."+svc+".>", func(m *nats.Msg) {
			ev, err := bus.DecodeEvent(m.Data)
			if err != nil {
				t.Errorf("cannot decode event on %s: %v", m.Subject, err)
				return
			}
			tp.mu.Lock()
			tp.events = append(tp.events, tapped{service: svc, ev: ev})
			tp.mu.Unlock()
		})
		if err != nil {
			t.Fatalf("cannot subscribe to %s events: %v", svc, err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("cannot flush subscriptions: %v", err)
	}
	return tp
}

func (tp *tap) mark() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.events)
}

// expected is an event the watcher must publish.
type expected struct {
	service string
	typ     eventsv1.EventType
	object  *unstructured.Unstructured
	target  *unstructured.Unstructured
	// rv defaults to the object's resourceVersion; "-" matches any.
	rv string
	// orNewer also matches a MODIFIED event for an expected ADDED one.
	orNewer bool
}

func (e expected) String() string {
	return fmt.Sprintf("%s %s %s/%s -> %s/%s", e.service, e.typ, e.object.GetKind(), e.object.GetName(), e.target.GetKind(), e.target.GetName())
}

func (e expected) matches(got tapped) bool {
	rv := e.rv
	if rv == "" {
		rv = e.object.GetResourceVersion()
	}
	typ := got.ev.GetType() == e.typ ||
		e.orNewer && e.typ == eventsv1.EventType_EVENT_TYPE_ADDED && got.ev.GetType() == eventsv1.EventType_EVENT_TYPE_MODIFIED
	return got.service == e.service && typ &&
		got.ev.GetObject().GetUid() == string(e.object.GetUID()) &&
		got.ev.GetTarget().GetUid() == string(e.target.GetUID()) &&
		(rv == "-" || got.ev.GetResourceVersion() == rv)
}

// expect waits until every expected event was published after mark.
func (tp *tap) expect(t *testing.T, mark int, want ...expected) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, func() error {
		tp.mu.Lock()
		got := append([]tapped(nil), tp.events[mark:]...)
		tp.mu.Unlock()
		var missing []string
		for _, w := range want {
			found := false
			for _, g := range got {
				found = found || w.matches(g)
			}
			if !found {
				missing = append(missing, w.String())
			}
		}
		if len(missing) > 0 {
			var sb strings.Builder
			for _, g := range got {
				ev := g.ev
				fmt.Fprintf(&sb, "\n  %s %s %s/%s(%s) -> %s/%s(%s) rv=%s", g.service, ev.GetType(),
					ev.GetObject().GetKind(), ev.GetObject().GetName(), ev.GetObject().GetUid(),
					ev.GetTarget().GetKind(), ev.GetTarget().GetName(), ev.GetTarget().GetUid(), ev.GetResourceVersion())
			}
			return fmt.Errorf("not published:\n  %s\npublished since:%s", strings.Join(missing, "\n  "), sb.String())
		}
		return nil
	})
}

const watcherE2EKinds = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom-watcher-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [watcher.e2e.loom.dev]
  resources: [xgadgets, gadgets]
  verbs: [get, list, watch]
---
apiVersion: v1
kind: Namespace
metadata: {name: watcher-e2e}
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xgadgets.watcher.e2e.loom.dev}
spec:
  group: watcher.e2e.loom.dev
  names: {kind: XGadget, plural: xgadgets}
  claimNames: {kind: Gadget, plural: gadgets}
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
` + watcherE2ECRD + `
---
` + watcherE2EClaimCRD

// The renderer generates these from the XRD; the test creates them itself
// so that it depends on the watcher alone.
const watcherE2ECRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: xgadgets.watcher.e2e.loom.dev}
spec:
  group: watcher.e2e.loom.dev
  names: {kind: XGadget, listKind: XGadgetList, plural: xgadgets, singular: xgadget, categories: [composite]}
  scope: Cluster
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

const watcherE2ERule = `
apiVersion: loom.dev/v1alpha1
kind: ReferenceRule
metadata: {name: watcher-e2e}
spec:
  for: {apiVersion: watcher.e2e.loom.dev/v1alpha1, kind: XGadget}
  references:
  - valueField: spec.gadget
    referenceField: spec.gadgetRef
    target: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    fromFieldPath: metadata.name
`

const watcherE2EClaimCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.watcher.e2e.loom.dev}
spec:
  group: watcher.e2e.loom.dev
  names: {kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget, categories: [claim]}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// The claim and XR are paused (crossplane.io/paused) and statically bound,
// so that the other services leave them alone: this test is about what the
// watcher publishes.
const watcherE2EClaim = `
apiVersion: watcher.e2e.loom.dev/v1alpha1
kind: Gadget
metadata:
  name: g1
  namespace: watcher-e2e
  annotations: {crossplane.io/paused: "true"}
spec:
  size: small
  resourceRef: {apiVersion: watcher.e2e.loom.dev/v1alpha1, kind: XGadget, name: g1-x7k2p}
`

const watcherE2EXR = `
apiVersion: watcher.e2e.loom.dev/v1alpha1
kind: XGadget
metadata:
  name: g1-x7k2p
  annotations: {crossplane.io/paused: "true"}
spec:
  size: small
  claimRef: {apiVersion: watcher.e2e.loom.dev/v1alpha1, kind: Gadget, namespace: watcher-e2e, name: g1}
  resourceRefs:
  - {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: g1-x7k2p-nop}
`

const watcherE2ENop = `
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: g1-x7k2p-nop
  labels: {crossplane.io/composite: g1-x7k2p}
  ownerReferences:
  - {apiVersion: watcher.e2e.loom.dev/v1alpha1, kind: XGadget, name: g1-x7k2p, uid: %s, controller: true}
spec:
  forProvider: {}
`

// TestWatcher creates, updates and deletes a claim, an XR and a composed
// NopResource and checks that the watcher publishes each change to the
// services that must react, naming the target each reconciles; then it kills
// the watcher, changes objects while it is down, and checks that the
// restarted watcher publishes them (its start-up resync).
func TestWatcher(t *testing.T) {
	env := framework.StartStack(t)
	ctx := t.Context()
	tp := startTap(t, env.Stack.NATSURL())

	// The watcher may watch only the kinds aggregated into its role: the
	// example role (NopResources) and this test's XR and claim kinds.
	root, err := stack.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join(root, "deploy", "helm", "loom", "files", "rbac", "watcher-aggregate-example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	framework.ApplyYAML(t, string(example), watcherE2EKinds)
	// The binder hears of an XR and its composed resources only where a
	// ReferenceRule names a kind the XR composes, and of a composed
	// resource only when it can act on the change. This rule names
	// NopResource as a target (for XGadgets, which nothing composes, so
	// the binder resolves nothing with it): the binder hears of the XR and
	// of the NopResource's deletion, not of its creation or changes. The
	// binder's Synced condition on it says the binder had its event, so
	// the watcher knows it.
	rule := framework.ApplyYAML(t, watcherE2ERule)[0]
	rules, err := env.Resource(rule)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rules.Delete(context.Background(), rule.GetName(), metav1.DeleteOptions{}) })
	framework.Eventually(t, time.Minute, func() error {
		got, err := rules.Get(ctx, rule.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s, _, _ := condition(got, "Synced"); s == "" {
			return fmt.Errorf("ReferenceRule %s has no Synced condition yet", rule.GetName())
		}
		return nil
	})

	get := func(o *unstructured.Unstructured) *unstructured.Unstructured {
		t.Helper()
		ri, err := env.Resource(o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("cannot get %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		return got
	}
	label := func(o *unstructured.Unstructured, v string) *unstructured.Unstructured {
		t.Helper()
		ri, err := env.Resource(o)
		if err != nil {
			t.Fatal(err)
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{"e2e.loom.dev/step":%q}}}`, v)
		got, err := ri.Patch(ctx, o.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("cannot label %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		return got
	}
	del := func(o *unstructured.Unstructured) {
		t.Helper()
		ri, err := env.Resource(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatalf("cannot delete %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}

	const (
		added    = eventsv1.EventType_EVENT_TYPE_ADDED
		modified = eventsv1.EventType_EVENT_TYPE_MODIFIED
		deleted  = eventsv1.EventType_EVENT_TYPE_DELETED
		resync   = eventsv1.EventType_EVENT_TYPE_RESYNC
	)

	// Create.
	mark := tp.mark()
	claim := framework.ApplyYAML(t, watcherE2EClaim)[0]
	xr := framework.ApplyYAML(t, watcherE2EXR)[0]
	nop := framework.ApplyYAML(t, fmt.Sprintf(watcherE2ENop, xr.GetUID()))[0]
	// Other services may have changed the objects since (the test provider
	// reconciles the NopResource): any resourceVersion will do for creation.
	tp.expect(t, mark,
		expected{service: bus.Binder, typ: added, object: claim, target: claim, rv: "-"},
		expected{service: bus.Renderer, typ: added, object: xr, target: xr, rv: "-"},
		expected{service: bus.Secrets, typ: added, object: xr, target: xr, rv: "-"},
		expected{service: bus.Binder, typ: added, object: xr, target: xr, rv: "-"},
		// The XR's creation reaches its claim's binder; if the claim is
		// cached only after a later change of the XR (the watcher's
		// informers of claims and XRs run apart, and the claim's may list
		// late on a new XRD), that change goes instead: the watcher keeps
		// the newest change of an XR waiting for its claim.
		expected{service: bus.Binder, typ: added, object: xr, target: claim, rv: "-", orNewer: true},
		expected{service: bus.Renderer, typ: added, object: nop, target: xr, rv: "-"},
		// (Not to the binder: the rule names NopResource as a target,
		// and nothing of the XR holds a reference the NopResource could
		// resolve.)
		expected{service: bus.Secrets, typ: added, object: nop, target: xr, rv: "-"},
	)
	t.Logf("creation: %d events published", tp.mark()-mark)
	// (A claim's creation seen live is no news to the secrets service, but
	// this claim's kind is new, and its informer may list it: listed
	// objects go to everyone. The routing's table test covers it.)

	// Update.
	mark = tp.mark()
	claim, xr, nop = label(claim, "updated"), label(xr, "updated"), label(nop, "updated")
	tp.expect(t, mark,
		expected{service: bus.Binder, typ: modified, object: claim, target: claim},
		expected{service: bus.Secrets, typ: modified, object: claim, target: claim},
		expected{service: bus.Renderer, typ: modified, object: xr, target: xr},
		expected{service: bus.Secrets, typ: modified, object: xr, target: xr},
		expected{service: bus.Binder, typ: modified, object: xr, target: xr},
		expected{service: bus.Binder, typ: modified, object: xr, target: claim},
		expected{service: bus.Renderer, typ: modified, object: nop, target: xr},
		expected{service: bus.Secrets, typ: modified, object: nop, target: xr},
	)

	// Restart: changes made while the watcher is down are published by the
	// next one's start-up resync, once per service and target, naming the
	// target itself with its current resourceVersion.
	pid := env.Stack.ServicePID("watcher", 0)
	if err := env.Stack.KillService("watcher", 0); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		if p := env.Stack.ServicePID("watcher", 0); p == pid {
			return fmt.Errorf("watcher still runs as pid %d", pid)
		}
		return nil
	})
	mark = tp.mark()
	claim, xr = label(claim, "while-down"), label(xr, "while-down")
	nop = label(nop, "while-down")
	tp.expect(t, mark,
		expected{service: bus.Binder, typ: resync, object: claim, target: claim},
		expected{service: bus.Secrets, typ: resync, object: claim, target: claim},
		expected{service: bus.Renderer, typ: resync, object: xr, target: xr},
		expected{service: bus.Secrets, typ: resync, object: xr, target: xr},
		expected{service: bus.Binder, typ: resync, object: xr, target: xr},
	)
	t.Logf("watcher restarted as pid %d", env.Stack.ServicePID("watcher", 0))

	// Delete: the restarted watcher publishes deletions as they happen.
	nop = get(nop)
	mark = tp.mark()
	del(nop)
	del(claim)
	del(xr)
	tp.expect(t, mark,
		expected{service: bus.Renderer, typ: deleted, object: nop, target: xr, rv: "-"},
		expected{service: bus.Binder, typ: deleted, object: nop, target: xr, rv: "-"},
		expected{service: bus.Secrets, typ: deleted, object: nop, target: xr, rv: "-"},
		expected{service: bus.Binder, typ: deleted, object: claim, target: claim, rv: "-"},
		expected{service: bus.Secrets, typ: deleted, object: claim, target: claim, rv: "-"},
		expected{service: bus.Renderer, typ: deleted, object: xr, target: xr, rv: "-"},
		expected{service: bus.Secrets, typ: deleted, object: xr, target: xr, rv: "-"},
		expected{service: bus.Binder, typ: deleted, object: xr, target: xr, rv: "-"},
	)
}
