//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loomxr/loom/e2e/framework"
)

// gkeRules are the reference rules of the GKE scenario. Every resource is a
// NopResource, whose spec.forProvider.fields takes any data and is mirrored
// to status.atProvider.fields, so the references live there. Two rules for
// the same kind are merged.
const gkeRules = `
apiVersion: loom.dev/v1alpha1
kind: ReferenceRule
metadata:
  name: e2e-gke-network
spec:
  for:
    apiVersion: nop.crossplane.io/v1alpha1
    kind: NopResource
  references:
  - valueField: spec.forProvider.fields.network
    referenceField: spec.forProvider.fields.networkRef
    selectorField: spec.forProvider.fields.networkSelector
    target: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    fromFieldPath: status.atProvider.fields.selfLink
    waitFor: {conditionType: Ready}
  - valueField: spec.forProvider.fields.subnetwork
    referenceField: spec.forProvider.fields.subnetworkRef
    selectorField: spec.forProvider.fields.subnetworkSelector
    target: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    fromFieldPath: status.atProvider.fields.selfLink
    waitFor: {conditionType: Ready}
---
apiVersion: loom.dev/v1alpha1
kind: ReferenceRule
metadata:
  name: e2e-gke-nodepool
spec:
  for:
    apiVersion: nop.crossplane.io/v1alpha1
    kind: NopResource
  references:
  - valueField: spec.forProvider.fields.cluster
    referenceField: spec.forProvider.fields.clusterRef
    referenceShape: From
    selectorField: spec.forProvider.fields.clusterSelector
    target: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    fromFieldPath: status.atProvider.fields.id
    waitFor: {conditionType: Ready}
  - valueField: spec.forProvider.fields.serviceAccount
    referenceField: spec.forProvider.fields.serviceAccountRef
    selectorField: spec.forProvider.fields.serviceAccountSelector
    target: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    fromFieldPath: status.atProvider.fields.email
    waitFor: {conditionType: Ready}
`

// gkeNop renders a NopResource that turns Ready after readyAfter, with the
// given labels and spec.forProvider.fields, controlled by the XR (xrName,
// xrUID) unless xrUID is empty.
func gkeNop(name, xrName, xrUID, readyAfter string, labels map[string]string, fields string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: nop.crossplane.io/v1alpha1\nkind: NopResource\nmetadata:\n  name: %s\n  labels:\n", name)
	if xrUID != "" {
		labels["crossplane.io/composite"] = xrName
	}
	for k, v := range labels {
		fmt.Fprintf(&b, "    %s: %q\n", k, v)
	}
	if xrUID != "" {
		fmt.Fprintf(&b, "  ownerReferences:\n  - apiVersion: binder.e2e.loom.dev/v1alpha1\n    kind: XBinderDB\n    name: %s\n    uid: %s\n    controller: true\n    blockOwnerDeletion: true\n", xrName, xrUID)
	}
	fmt.Fprintf(&b, "spec:\n  forProvider:\n    conditionAfter:\n    - {time: %s, conditionType: Ready, conditionStatus: \"True\", conditionReason: Available}\n    fields:\n%s", readyAfter, fields)
	return b.String()
}

// A nopState is what the watch saw of one NopResource.
type nopState struct {
	ready  bool
	fields map[string]any
}

// nopLog records, in the order the API server committed them, the states of
// NopResources, and checks at each change that a value field appears only
// once its target is Ready.
type nopLog struct {
	mu         sync.Mutex
	state      map[string]nopState
	violations []string
	firstSet   map[string]bool
}

// expectation says which target a referencer's value field comes from.
type expectation struct {
	referencer, field, target string
}

func (l *nopLog) observe(o *unstructured.Unstructured, want []expectation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fields, _, _ := unstructured.NestedMap(o.Object, "spec", "forProvider", "fields")
	s, _, _ := condition(o, "Ready")
	l.state[o.GetName()] = nopState{ready: s == "True", fields: fields}
	for _, e := range want {
		if e.referencer != o.GetName() || l.firstSet[e.referencer+"/"+e.field] {
			continue
		}
		if v, ok := fields[e.field]; ok && v != nil {
			l.firstSet[e.referencer+"/"+e.field] = true
			if !l.state[e.target].ready {
				l.violations = append(l.violations, fmt.Sprintf("%s.%s was set before %s was Ready", e.referencer, e.field, e.target))
			}
		}
	}
}

// testReferences is the seeds' GKE scenario: a Subnetwork in an existing
// Network, a GKECluster in the Subnetwork, two ServiceAccounts, and two
// NodePools each using its own ServiceAccount (selected by
// matchControllerRef plus labels) and joining the cluster. The test plays
// the renderer: it creates the XR, its composed resources with controller
// references and its spec.resourceRefs.
func testReferences(t *testing.T, env *binderEnv) {
	ctx := t.Context()
	env.apply(t, gkeRules)
	t.Cleanup(func() {
		for _, n := range []string{"e2e-gke-network", "e2e-gke-nodepool"} {
			_ = env.client(ruleGVK, "").Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	framework.Eventually(t, time.Minute, func() error {
		for _, n := range []string{"e2e-gke-network", "e2e-gke-nodepool"} {
			r, err := env.get(ctx, ruleGVK, "", n)
			if err != nil {
				return err
			}
			if s, _, m := condition(r, "Synced"); s != "True" {
				return fmt.Errorf("reference rule %s Synced %q %q", n, s, m)
			}
		}
		return nil
	})

	// The existing network, not part of the XR, Ready before the XR comes.
	env.apply(t, gkeNop("gke-network", "", "", "0s", map[string]string{"role": "network"},
		"      selfLink: projects/p/global/networks/gke-network\n"))
	framework.Eventually(t, time.Minute, func() error {
		n, err := env.get(ctx, nopGVK, "", "gke-network")
		if err != nil {
			return err
		}
		if s, _, _ := condition(n, "Ready"); s != "True" {
			return fmt.Errorf("network not Ready yet")
		}
		return nil
	})

	// Watch NopResources from here on, to check that every value appears
	// only after its target was Ready.
	want := []expectation{
		{"gke-subnet", "network", "gke-network"},
		{"gke-cluster", "subnetwork", "gke-subnet"},
		{"gke-np-a", "cluster", "gke-cluster"},
		{"gke-np-b", "cluster", "gke-cluster"},
		{"gke-np-a", "serviceAccount", "gke-sa-a"},
		{"gke-np-b", "serviceAccount", "gke-sa-b"},
	}
	log := &nopLog{state: map[string]nopState{}, firstSet: map[string]bool{}}
	nops := env.client(nopGVK, "")
	list, err := nops.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		log.observe(&list.Items[i], want)
	}
	w, err := nops.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ev := range w.ResultChan() {
			if o, ok := ev.Object.(*unstructured.Unstructured); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				log.observe(o, want)
			}
		}
	}()

	// The XR, then its composed resources, then its resourceRefs, as the
	// renderer would write them.
	xr := env.apply(t, `
apiVersion: binder.e2e.loom.dev/v1alpha1
kind: XBinderDB
metadata:
  name: gke
spec:
  parameters:
    size: gke
`)[0]
	uid := string(xr.GetUID())
	composed := []string{
		gkeNop("gke-subnet", "gke", uid, "3s", map[string]string{"role": "subnetwork"},
			"      selfLink: projects/p/regions/r/subnetworks/gke-subnet\n      networkRef:\n        name: gke-network\n"),
		gkeNop("gke-cluster", "gke", uid, "3s", map[string]string{"role": "cluster"},
			"      id: projects/p/locations/r/clusters/gke-cluster\n      subnetworkSelector:\n        matchControllerRef: true\n        matchLabels:\n          role: subnetwork\n"),
		gkeNop("gke-sa-a", "gke", uid, "2s", map[string]string{"role": "sa", "pool": "a"},
			"      email: sa-a@p.iam.gserviceaccount.com\n"),
		gkeNop("gke-sa-b", "gke", uid, "20s", map[string]string{"role": "sa", "pool": "b"},
			"      email: sa-b@p.iam.gserviceaccount.com\n"),
		gkeNop("gke-np-a", "gke", uid, "1s", map[string]string{"role": "nodepool"},
			"      serviceAccountSelector:\n        matchControllerRef: true\n        matchLabels:\n          role: sa\n          pool: a\n      clusterSelector:\n        matchControllerRef: true\n        matchLabels:\n          role: cluster\n"),
		gkeNop("gke-np-b", "gke", uid, "1s", map[string]string{"role": "nodepool"},
			"      serviceAccountSelector:\n        matchControllerRef: true\n        matchLabels:\n          role: sa\n          pool: b\n      clusterSelector:\n        matchControllerRef: true\n        matchLabels:\n          role: cluster\n"),
		// A ServiceAccount with pool a's labels that the XR does not
		// control: matchControllerRef must not pick it, although its name
		// sorts first.
		gkeNop("gke-a-decoy-sa", "", "", "0s", map[string]string{"role": "sa", "pool": "a"},
			"      email: decoy@p.iam.gserviceaccount.com\n"),
	}
	env.apply(t, strings.Join(composed, "---\n"))
	t.Cleanup(func() {
		_ = nops.Delete(context.Background(), "gke-a-decoy-sa", metav1.DeleteOptions{})
		_ = nops.Delete(context.Background(), "gke-network", metav1.DeleteOptions{})
		_ = env.client(xrGVK, "").Delete(context.Background(), "gke", metav1.DeleteOptions{})
	})
	var refs []any
	for _, n := range []string{"gke-subnet", "gke-cluster", "gke-sa-a", "gke-sa-b", "gke-np-a", "gke-np-b"} {
		refs = append(refs, map[string]any{"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "name": n})
	}
	applyAsRenderer(t, env, "gke", map[string]any{"spec": map[string]any{"resourceRefs": refs}}, false)

	// While targets are not Ready, the XR says what each reference waits
	// for: gke-sa-b's 20 s outlast the binder's grace for waits
	// (--reference-wait-grace, 5 s), within which a wait is not written.
	sawWait := ""
	framework.Eventually(t, 2*time.Minute, func() error {
		xr, err := env.get(ctx, xrGVK, "", "gke")
		if err != nil {
			return err
		}
		s, r, m := condition(xr, "ReferencesResolved")
		if s == "False" && strings.Contains(m, "waits for") && sawWait == "" {
			sawWait = r + ": " + m
		}
		if s != "True" {
			return fmt.Errorf("XR ReferencesResolved %s/%s %q", s, r, m)
		}
		return nil
	})
	if sawWait == "" {
		t.Errorf("the XR never reported a reference waiting for its target")
	} else {
		t.Logf("XR condition while waiting: %s", sawWait)
	}

	wantValues := map[string]map[string]any{
		"gke-subnet":  {"network": "projects/p/global/networks/gke-network"},
		"gke-cluster": {"subnetwork": "projects/p/regions/r/subnetworks/gke-subnet", "subnetworkRef": map[string]any{"name": "gke-subnet"}},
		"gke-np-a": {
			"cluster":           "projects/p/locations/r/clusters/gke-cluster",
			"clusterRef":        map[string]any{"from": map[string]any{"name": "gke-cluster"}},
			"serviceAccount":    "sa-a@p.iam.gserviceaccount.com",
			"serviceAccountRef": map[string]any{"name": "gke-sa-a"},
		},
		"gke-np-b": {
			"cluster":           "projects/p/locations/r/clusters/gke-cluster",
			"clusterRef":        map[string]any{"from": map[string]any{"name": "gke-cluster"}},
			"serviceAccount":    "sa-b@p.iam.gserviceaccount.com",
			"serviceAccountRef": map[string]any{"name": "gke-sa-b"},
		},
	}
	framework.Eventually(t, time.Minute, func() error {
		var problems []string
		for name, fields := range wantValues {
			o, err := env.get(ctx, nopGVK, "", name)
			if err != nil {
				return err
			}
			got, _, _ := unstructured.NestedMap(o.Object, "spec", "forProvider", "fields")
			for f, v := range fields {
				if !jsonEqual(got[f], v) {
					problems = append(problems, fmt.Sprintf("%s.%s = %v, want %v", name, f, got[f], v))
				}
			}
		}
		return errorf(problems)
	})

	// Only the binder's own fields are its: it never touched the selectors
	// or the fields the test (the renderer) set.
	for _, name := range []string{"gke-subnet", "gke-cluster", "gke-np-a"} {
		o, err := env.get(ctx, nopGVK, "", name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range o.GetManagedFields() {
			if m.Manager == "loom-binder" && m.Operation != metav1.ManagedFieldsOperationApply {
				t.Errorf("%s: loom-binder wrote with operation %s, want only server-side apply", name, m.Operation)
			}
		}
	}

	w.Stop()
	<-watchDone
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, e := range want {
		if !log.firstSet[e.referencer+"/"+e.field] {
			t.Errorf("the watch never saw %s.%s set", e.referencer, e.field)
		}
	}
	for _, v := range log.violations {
		t.Error(v)
	}
}

// jsonEqual compares two JSON-like values.
func jsonEqual(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
