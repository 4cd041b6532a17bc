//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/loomxr/loom/e2e/framework"
)

var isoClaimGVR = schema.GroupVersionResource{Group: "isolation.e2e.loom.dev", Version: "v1alpha1", Resource: "isos"}

// isolationKinds: a claim kind whose default Composition composes two
// NopResources that turn Ready at once, and poisoned Compositions: function
// steps that fail (a Fatal result, a timeout, an unreachable function) and
// two resources that wait for each other (a reference cycle).
const isolationKinds = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:isolation-e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [isolation.e2e.loom.dev]
  resources: [xisos]
  verbs: [get, list, patch, delete]
- apiGroups: [isolation.e2e.loom.dev]
  resources: [xisos/status]
  verbs: [patch]
- apiGroups: [isolation.e2e.loom.dev]
  resources: [isos]
  verbs: [list, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:isolation-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [isolation.e2e.loom.dev]
  resources: [xisos, isos]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:isolation-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [isolation.e2e.loom.dev]
  resources: [isos]
  verbs: [get, update, patch]
- apiGroups: [isolation.e2e.loom.dev]
  resources: [isos/status, xisos/status]
  verbs: [get, patch]
- apiGroups: [isolation.e2e.loom.dev]
  resources: [xisos]
  verbs: [get, create, patch, delete]
- apiGroups: [nop.crossplane.io]
  resources: [nopresources]
  verbs: [get, list, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:secrets:isolation-e2e
  labels: {loom.dev/aggregate-to-secrets: "true"}
rules:
- apiGroups: [isolation.e2e.loom.dev]
  resources: [xisos, isos]
  verbs: [get]
- apiGroups: [isolation.e2e.loom.dev]
  resources: [xisos/status, isos/status]
  verbs: [get, patch]
---
apiVersion: v1
kind: Namespace
metadata: {name: isolation-base}
---
apiVersion: v1
kind: Namespace
metadata: {name: isolation-mixed}
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xisos.isolation.e2e.loom.dev
spec:
  group: isolation.e2e.loom.dev
  names: {kind: XIso, plural: xisos}
  claimNames: {kind: Iso, plural: isos}
  defaultCompositionRef: {name: isolation-healthy}
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
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: isolation-healthy
spec:
  compositeTypeRef: {apiVersion: isolation.e2e.loom.dev/v1alpha1, kind: XIso}
  resources:
  - name: a
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider:
          conditionAfter:
          - {time: 0s, conditionType: Ready, conditionStatus: "True"}
    patches:
    - {fromFieldPath: spec.parameters.size, toFieldPath: spec.forProvider.fields.size}
  - name: b
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider:
          conditionAfter:
          - {time: 0s, conditionType: Ready, conditionStatus: "True"}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: isolation-cycle
spec:
  compositeTypeRef: {apiVersion: isolation.e2e.loom.dev/v1alpha1, kind: XIso}
  resources:
  - name: left
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      metadata:
        labels: {isolation.e2e.loom.dev/role: left}
      spec:
        forProvider:
          fields:
            id: left
            isolationPeerSelector: {matchControllerRef: true, matchLabels: {isolation.e2e.loom.dev/role: right}}
  - name: right
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      metadata:
        labels: {isolation.e2e.loom.dev/role: right}
      spec:
        forProvider:
          fields:
            id: right
            isolationPeerSelector: {matchControllerRef: true, matchLabels: {isolation.e2e.loom.dev/role: left}}
---
apiVersion: loom.dev/v1alpha1
kind: ReferenceRule
metadata:
  name: isolation-peer
spec:
  for: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
  references:
  - valueField: spec.forProvider.fields.isolationPeer
    referenceField: spec.forProvider.fields.isolationPeerRef
    selectorField: spec.forProvider.fields.isolationPeerSelector
    target: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    fromFieldPath: status.atProvider.fields.id
    waitFor: {conditionType: Ready}
`

// isolationPipeline is a poisoned Composition: one step of function fn
// with the given input spec.
func isolationPipeline(name, fn, spec string) string {
	return fmt.Sprintf(`
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: %s
spec:
  compositeTypeRef: {apiVersion: isolation.e2e.loom.dev/v1alpha1, kind: XIso}
  mode: Pipeline
  pipeline:
  - step: poison
    functionRef: {name: %s}
    input:
      apiVersion: testfn.loom.dev/v1alpha1
      kind: Input
      spec: %s
`, name, fn, spec)
}

// TestIsolation creates 100 healthy claims alone, then 100 more together
// with 20 poisoned ones (failing functions and reference cycles), and
// checks that the p99 time to Ready of the healthy claims of the second
// run is within 1.5 times that of the first.
func TestIsolation(t *testing.T) {
	const healthy, poisoned = 100, 20
	env := framework.StartStack(t)
	ctx := t.Context()
	fn := startFunction(t, "compose-from-env")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := l.Addr().String()
	_ = l.Close()
	framework.ApplyYAML(t, isolationKinds, fmt.Sprintf(`
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: isolation-fn}
spec: {endpoint: "%[1]s", insecure: true, timeout: 3s}
---
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: isolation-fn-unreachable}
spec: {endpoint: "%[2]s", insecure: true, timeout: 3s}
`, fn, unreachable),
		isolationPipeline("isolation-fatal", "isolation-fn", "{behaviour: {fatal: poisoned on purpose}}"),
		isolationPipeline("isolation-timeout", "isolation-fn", "{behaviour: {sleep: 60s}}"),
		isolationPipeline("isolation-unreachable", "isolation-fn-unreachable", "{}"),
		isolationPipeline("isolation-unstable", "isolation-fn", "{behaviour: {unstable: true}}"),
	)
	poisons := []string{"isolation-fatal", "isolation-timeout", "isolation-unreachable", "isolation-unstable", "isolation-cycle"}

	base := readyTimes(t, env.Dynamic, "isolation-base", healthy, nil)
	var poison []string
	for i := range poisoned {
		poison = append(poison, poisons[i%len(poisons)])
	}
	mixed := readyTimes(t, env.Dynamic, "isolation-mixed", healthy, poison)

	p99 := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[(len(d)*99+99)/100-1]
	}
	pb, pm := p99(base), p99(mixed)
	t.Logf("p99 time to Ready of %d healthy claims: %s alone, %s with %d poisoned (ratio %.2f); p50 %s and %s",
		healthy, pb, pm, poisoned, float64(pm)/float64(pb), base[len(base)/2], mixed[len(mixed)/2])
	if float64(pm) > 1.5*float64(pb) {
		t.Errorf("p99 with poisoned claims %s is more than 1.5 times the p99 without them %s", pm, pb)
	}

	// The poisoned claims are still not Ready: they really were poisoned.
	l2, err := env.Dynamic.Resource(isoClaimGVR).Namespace("isolation-mixed").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range l2.Items {
		c := &l2.Items[i]
		if c.GetLabels()["isolation.e2e.loom.dev/poison"] != "" && conditionField(c, "Ready", "status") == "True" {
			t.Errorf("poisoned claim %s is Ready", c.GetName())
		}
	}
}

// readyTimes creates healthy claims and one claim per entry of poison
// (naming that Composition) in namespace ns, in random order, and returns
// for each healthy claim the time from its creation to the first poll that
// saw it Ready. The claims are deleted when t ends.
func readyTimes(t *testing.T, dyn dynamic.Interface, ns string, healthy int, poison []string) []time.Duration {
	t.Helper()
	ctx := t.Context()
	cl := dyn.Resource(isoClaimGVR).Namespace(ns)
	t.Cleanup(func() { _ = cl.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}) })
	type item struct {
		name        string
		composition string
	}
	var items []item
	for i := range healthy {
		items = append(items, item{name: fmt.Sprintf("healthy-%03d", i)})
	}
	for i, p := range poison {
		items = append(items, item{name: fmt.Sprintf("poison-%02d", i), composition: p})
	}
	rand.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })

	var mu sync.Mutex
	created := map[string]time.Time{}
	ready := map[string]time.Duration{}
	work := make(chan item)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for it := range work {
				c := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": isoClaimGVR.GroupVersion().String(),
					"kind":       "Iso",
					"metadata":   map[string]any{"name": it.name, "namespace": ns},
					"spec":       map[string]any{"parameters": map[string]any{"size": "small"}},
				}}
				if it.composition != "" {
					c.SetLabels(map[string]string{"isolation.e2e.loom.dev/poison": it.composition})
					c.Object["spec"].(map[string]any)["compositionRef"] = map[string]any{"name": it.composition}
				}
				at := time.Now()
				if _, err := cl.Create(ctx, c, metav1.CreateOptions{}); err != nil {
					t.Errorf("cannot create claim %s: %v", it.name, err)
					continue
				}
				if it.composition == "" {
					mu.Lock()
					created[it.name] = at
					mu.Unlock()
				}
			}
		})
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	framework.Eventually(t, 5*time.Minute, func() error {
		l, err := cl.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		now := time.Now()
		for i := range l.Items {
			c := &l.Items[i]
			at, ok := created[c.GetName()]
			if _, done := ready[c.GetName()]; !ok || done || conditionField(c, "Ready", "status") != "True" {
				continue
			}
			ready[c.GetName()] = now.Sub(at)
		}
		if len(ready) < healthy {
			return fmt.Errorf("%d of %d healthy claims in %s Ready", len(ready), healthy, ns)
		}
		return nil
	})
	var out []time.Duration
	for _, d := range ready {
		out = append(out, d)
	}
	return out
}
