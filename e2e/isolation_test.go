//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/bus"
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
// with 20 poisoned ones (failing functions, a timeout, an unreachable
// function, requirements that never settle, a reference cycle), and checks
// the bus's isolation by counting, from the services' metrics, what the
// poisoned claims could take from the healthy ones:
//   - handler runs of any one target within any minute stay within the
//     per-target budget (bus.DefaultTargetBudget);
//   - a failing target runs in the main pool of handler slots at most once
//     per service (its first failure), then only in the quarantine pool:
//     the main pool's failed runs grow by at most one per poisoned claim and
//     service over the healthy run's;
//   - the poisoned targets' throttling shows (deferred handlings counted).
//
// The p99 time to Ready of the healthy claims with and without the
// poisoned ones, and its ratio (target 1.2), are reported, not asserted: a
// p99 of 100 samples on a shared machine is noise.
func TestIsolation(t *testing.T) {
	const healthy, poisoned = 100, 20
	env := framework.StartStack(t)
	ctx := t.Context()
	fn := framework.StartFunction(t, "compose-from-env")
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

	apiRequests := func() float64 {
		n, err := env.APIRequests(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before, reqBefore := busCounts(t, env), apiRequests()
	base := readyTimes(t, env.Dynamic, "isolation-base", healthy, nil)
	afterBase, reqAfterBase := busCounts(t, env), apiRequests()
	var poison []string
	for i := range poisoned {
		poison = append(poison, poisons[i%len(poisons)])
	}
	start := time.Now()
	mixed := readyTimes(t, env.Dynamic, "isolation-mixed", healthy, poison)
	// The healthy claims can all be Ready before a failed poisoned target's
	// backoff (a second at first) has run out: the counts are taken once
	// a retry has run, so that they cover at least one retry of a failed
	// target, whatever the machine's speed. The main-pool bound below holds
	// over any window, so waiting longer only makes it stricter.
	afterMixed := awaitQuarantine(t, env, afterBase, 3*time.Minute)
	minutes := time.Since(start).Minutes()
	reqAfterMixed := apiRequests()
	// API requests beyond the healthy run's, per poisoned claim and minute
	// of the mixed run: what the poisoned claims cost the API server.
	poisonReqPerMin := ((reqAfterMixed - reqAfterBase) - (reqAfterBase - reqBefore)) / poisoned / minutes

	p99 := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[(len(d)*99+99)/100-1]
	}
	pb, pm := p99(base), p99(mixed)
	baseFailedMain := afterBase.sub(before).mainFailed
	mixedDelta := afterMixed.sub(afterBase)
	report := map[string]any{
		"healthy_p99_alone_s":                    pb.Seconds(),
		"healthy_p99_with_poisoned_s":            pm.Seconds(),
		"p99_ratio":                              float64(pm) / float64(pb),
		"p99_ratio_target":                       1.2,
		"mixed_run_minutes":                      minutes,
		"max_runs_per_target_minute":             afterMixed.peakRuns,
		"budget_runs_per_minute":                 bus.DefaultTargetBudget,
		"main_pool_failed_runs_alone":            baseFailedMain,
		"main_pool_failed_runs_mixed":            mixedDelta.mainFailed,
		"quarantine_runs_mixed":                  mixedDelta.quarantine,
		"throttled_mixed":                        mixedDelta.throttled,
		"queue_waits_mixed":                      mixedDelta.waits,
		"queue_wait_s_mixed":                     mixedDelta.waitSeconds,
		"poisoned_api_requests_per_claim_minute": poisonReqPerMin,
	}
	js, _ := json.Marshal(report)
	t.Logf("isolation report: %s", js)
	t.Logf("p99 time to Ready of %d healthy claims: %s alone, %s with %d poisoned (ratio %.2f, target 1.2, reported only); p50 %s and %s",
		healthy, pb, pm, poisoned, float64(pm)/float64(pb), base[len(base)/2], mixed[len(mixed)/2])

	if afterMixed.peakRuns == 0 {
		t.Error("no service reports loom_bus_target_runs_per_minute_max: the counts below would prove nothing")
	}
	if afterMixed.peakRuns > bus.DefaultTargetBudget {
		t.Errorf("a target ran %d times within a minute; want at most the budget %d", afterMixed.peakRuns, bus.DefaultTargetBudget)
	}
	if limit := baseFailedMain + poisoned*len(bus.Services); mixedDelta.mainFailed > limit {
		t.Errorf("failed runs in the main pool of handler slots: %d with %d poisoned claims; want at most %d (the %d of the healthy run plus one per poisoned claim and service)",
			mixedDelta.mainFailed, poisoned, limit, baseFailedMain)
	}
	if mixedDelta.quarantine == 0 {
		t.Error("no run in the quarantine pool within 3 minutes of the mixed run: the poisoned targets were never found out")
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

// busTotals are the bus's scheduling counts summed over every replica of
// every service.
type busTotals struct {
	mainFailed  int // failed handler runs in main-pool slots (pools main and resync)
	quarantine  int // handler runs in the quarantine pool
	throttled   int // handlings deferred (backoff, budget)
	waits       int // requests that queued for a slot
	waitSeconds float64
	peakRuns    int // the most runs of one target in one minute (a maximum, not a sum)
}

func (a busTotals) sub(b busTotals) busTotals {
	return busTotals{
		mainFailed:  a.mainFailed - b.mainFailed,
		quarantine:  a.quarantine - b.quarantine,
		throttled:   a.throttled - b.throttled,
		waits:       a.waits - b.waits,
		waitSeconds: a.waitSeconds - b.waitSeconds,
		peakRuns:    a.peakRuns,
	}
}

// awaitQuarantine scrapes the services' bus counts until the quarantine
// pool has run a handler since from, or within has passed, and returns the last
// counts. It does not fail: the caller asserts on what it returns.
func awaitQuarantine(t *testing.T, env *framework.Env, from busTotals, within time.Duration) busTotals {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		now := busCounts(t, env)
		if now.sub(from).quarantine > 0 || time.Now().After(deadline) {
			return now
		}
		select {
		case <-t.Context().Done():
			return now
		case <-time.After(time.Second):
		}
	}
}

// busCounts scrapes every service replica's /metrics for the bus's
// scheduling counts.
func busCounts(t *testing.T, env *framework.Env) busTotals {
	t.Helper()
	var out busTotals
	for _, svc := range bus.Services {
		for i := 0; ; i++ {
			addr := env.Stack.ServiceHealthAddr(svc, i)
			if addr == "" {
				break
			}
			var text []byte
			framework.Eventually(t, 30*time.Second, func() error {
				var err error
				text, err = getMetrics(t.Context(), addr)
				return err
			})
			// Resync runs hold main-pool slots too.
			out.mainFailed += int(sumSamples(text, "loom_bus_handler_runs_total", `pool="main"`, `failed="true"`))
			out.mainFailed += int(sumSamples(text, "loom_bus_handler_runs_total", `pool="resync"`, `failed="true"`))
			out.quarantine += int(sumSamples(text, "loom_bus_handler_runs_total", `pool="quarantine"`))
			out.throttled += int(sumSamples(text, "loom_bus_targets_throttled_total"))
			out.waits += int(sumSamples(text, "loom_bus_queue_wait_seconds_count"))
			out.waitSeconds += sumSamples(text, "loom_bus_queue_wait_seconds_sum")
			out.peakRuns = max(out.peakRuns, int(maxSample(text, "loom_bus_target_runs_per_minute_max")))
		}
	}
	return out
}

func getMetrics(ctx context.Context, addr string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", addr, rsp.Status)
	}
	return io.ReadAll(rsp.Body)
}

// samples returns the values of metric's samples whose labels contain
// every one of labels (`name="value"`).
func samples(text []byte, metric string, labels ...string) []float64 {
	var out []float64
	for line := range strings.Lines(string(text)) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), " ")
		lbl := ""
		if i := strings.IndexByte(line, '{'); i >= 0 && (!ok || i < len(name)) {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			name, lbl, rest = line[:i], line[i+1:j], strings.TrimSpace(line[j+1:])
		}
		if name != metric {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(","+lbl+",", ","+l+",") {
				match = false
			}
		}
		if f := strings.Fields(rest); match && len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				out = append(out, v)
			}
		}
	}
	return out
}

func sumSamples(text []byte, metric string, labels ...string) float64 {
	var s float64
	for _, v := range samples(text, metric, labels...) {
		s += v
	}
	return s
}

func maxSample(text []byte, metric string, labels ...string) float64 {
	var m float64
	for _, v := range samples(text, metric, labels...) {
		m = max(m, v)
	}
	return m
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
