//go:build e2e

package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/loomxr/loom/pkg/stack"
)

// install applies testdata/setup.yaml, waits until the services' roles
// cover the benchmark's kinds, and runs one warm-up claim to Ready.
func (r *run) install(ctx context.Context) error {
	path := filepath.Join(r.cfg.RepoRoot, "e2e", "bench", "testdata", "setup.yaml")
	objs, err := stack.ReadManifests(path)
	if err != nil {
		return err
	}
	for _, ns := range []string{Namespace, warmupNamespace} {
		n := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
		objs = append([]*unstructured.Unstructured{n}, objs...)
	}
	r.logf("installing the benchmark's XRD, Composition, ReferenceRule and roles")
	actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if _, err := r.s.ApplyObjects(actx, objs...); err != nil {
		return fmt.Errorf("cannot install the benchmark's kinds: %w", err)
	}
	if err := poll(ctx, 2*time.Minute, 200*time.Millisecond, func() error { return r.aggregated(ctx) }); err != nil {
		return err
	}

	r.logf("warm-up claim")
	claims := r.dyn.Resource(claimGVR).Namespace(warmupNamespace)
	if _, err := claims.Create(ctx, benchClaim(warmupNamespace, "warmup"), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cannot create the warm-up claim: %w", err)
	}
	var last *unstructured.Unstructured
	if err := poll(ctx, 3*time.Minute, 200*time.Millisecond, func() error {
		c, err := claims.Get(ctx, "warmup", metav1.GetOptions{})
		if err != nil {
			return err
		}
		last = c
		if s, _ := readyCondition(c); s != "True" {
			return errors.New("the warm-up claim is not Ready")
		}
		return nil
	}); err != nil {
		if last != nil {
			return fmt.Errorf("%w: %s", err, conditionSummary(last))
		}
		return err
	}
	return r.waitQuiet(ctx, "after the warm-up claim")
}

// aggregated checks that every service's aggregated role covers the
// benchmark's group (kube-controller-manager aggregates them).
func (r *run) aggregated(ctx context.Context) error {
	for _, role := range []string{"loom-watcher-aggregated", "loom:renderer", "loom-binder-aggregated"} {
		cr, err := r.kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("cannot get ClusterRole %s: %w", role, err)
		}
		found := false
		for _, rule := range cr.Rules {
			for _, g := range rule.APIGroups {
				found = found || g == claimGVR.Group
			}
		}
		if !found {
			return fmt.Errorf("ClusterRole %s does not cover %s yet", role, claimGVR.Group)
		}
	}
	return nil
}

// benchClaim is claim name in namespace ns.
func benchClaim(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": claimGVR.GroupVersion().String(),
		"kind":       "BenchDB",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"parameters":                 map[string]any{"storageGB": int64(20), "size": "small"},
			"writeConnectionSecretToRef": map[string]any{"name": name + "-conn"},
		},
	}}
}

// claims creates the claims, waits until each is Ready, and computes the
// figures of issue 10 from the counters and the objects.
func (r *run) claims(ctx context.Context) error {
	n := r.cfg.Claims
	claims := r.dyn.Resource(claimGVR).Namespace(Namespace)

	// Observers: claims, their XRs and composed resources, first seen Ready.
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	claimT, xrT, nopT := newTracker("claims", nil), newTracker("XRs", nil), newTracker("NopResources", nil)
	// The end state is complete once, beyond every claim being Ready, every
	// database has its resolved reference and every claim its Secret (a
	// claim may turn Ready before either).
	refT := newTracker("resolved references", func(o *unstructured.Unstructured) bool {
		v, _, _ := unstructured.NestedString(o.Object, "spec", "forProvider", "fields", "network")
		return o.GetLabels()[labelRole] == "database" && v != ""
	})
	secT := newTracker("claim Secrets", func(o *unstructured.Unstructured) bool {
		d, _, _ := unstructured.NestedMap(o.Object, "data")
		return strings.HasSuffix(o.GetName(), "-conn") && len(d) > 0
	})
	ownNS := labelClaimNamespace + "=" + Namespace
	obsErr := make(chan error, 4)
	for _, o := range []struct {
		ri   dynamic.ResourceInterface
		sel  string
		what string
		ts   []*tracker
	}{
		{claims, "", "claims", []*tracker{claimT}},
		{r.dyn.Resource(xrGVR), ownNS, "XRs", []*tracker{xrT}},
		{r.dyn.Resource(nopGVR), ownNS, "NopResources", []*tracker{nopT, refT}},
		{r.dyn.Resource(secretGVR).Namespace(Namespace), "", "Secrets", []*tracker{secT}},
	} {
		go func() { obsErr <- watchInto(obsCtx, o.ri, o.sel, o.what, o.ts...) }()
	}
	refT.expect(n)
	secT.expect(n)
	claimT.expect(n)

	before, err := r.read(ctx)
	if err != nil {
		return err
	}
	m := marks{start: before.at}
	r.logf("creating %d claims with %d creators", n, r.cfg.Creators)
	created := make([]time.Time, n)
	next := make(chan int)
	errs := make(chan error, r.cfg.Creators)
	for range r.cfg.Creators {
		go func() {
			// A creator that fails keeps draining next, so that the
			// feeder never blocks; the first error is returned.
			var first error
			for i := range next {
				if first != nil {
					continue
				}
				c := benchClaim(Namespace, claimName(i))
				var err error
				for attempt := range 10 {
					if _, err = claims.Create(ctx, c, metav1.CreateOptions{}); err == nil {
						break
					}
					time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
				}
				if err != nil {
					first = fmt.Errorf("cannot create claim %s: %w", c.GetName(), err)
					continue
				}
				created[i] = time.Now()
			}
			errs <- first
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	var createErr error
	for range r.cfg.Creators {
		if err := <-errs; err != nil && createErr == nil {
			createErr = err
		}
	}
	if createErr != nil {
		return createErr
	}
	createdAll := time.Now()
	r.res.CreateSeconds = round(createdAll.Sub(m.start).Seconds(), 2)
	r.res.CreatesPerS = round(float64(n)/createdAll.Sub(m.start).Seconds(), 1)
	r.logf("created %d claims in %s (%.0f/s)", n, createdAll.Sub(m.start).Round(time.Millisecond), r.res.CreatesPerS)

	// Wait until every claim is Ready and the end state complete,
	// reporting progress and the bus's backlog, which shows which service
	// the work queues up for.
	r.res.BusMaxPending = map[string]uint64{}
	timeout := time.NewTimer(r.cfg.ReadyTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	claimsDone := claimT.done
	var ready reading
	for claimsDone != nil || !closed(refT.done) || !closed(secT.done) {
		select {
		case <-claimsDone:
			claimsDone = nil
			var last time.Time
			for _, t := range claimT.snapshot() {
				if t.After(last) {
					last = t
				}
			}
			if ready, err = r.read(ctx); err != nil {
				return err
			}
			m.allReady = last
			r.res.ClaimsReady = claimT.count()
			all := last.Sub(m.start).Seconds()
			r.res.SecondsToAllReady = round(all, 2)
			r.res.ClaimsPerS = round(float64(n)/all, 2)
			r.logf("all %d claims Ready after %.1fs (%.1f claims/s)", n, all, r.res.ClaimsPerS)
		case <-refT.done:
		case <-secT.done:
		case err := <-obsErr:
			if err != nil {
				return err
			}
		case <-tick.C:
			backlog := ""
			if b, err := r.bus.read(ctx); err == nil {
				for _, name := range sortedKeys(b.PendingByStream) {
					v := b.PendingByStream[name]
					backlog += fmt.Sprintf(" %s=%d", name, v)
					if v > r.res.BusMaxPending[name] {
						r.res.BusMaxPending[name] = v
					}
				}
			}
			r.logf("%d/%d claims Ready, %d XRs, %d composed resources, %d references, %d claim Secrets; bus backlog%s",
				claimT.count(), n, xrT.count(), nopT.count(), refT.count(), secT.count(), backlog)
		case <-timeout.C:
			r.res.ClaimsReady = claimT.count()
			return fmt.Errorf("after %s, %d of %d claims were Ready, %d references resolved, %d claim Secrets published; %s",
				r.cfg.ReadyTimeout, claimT.count(), n, refT.count(), secT.count(), r.diagnose(ctx, claimT))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	complete := time.Now()
	r.res.SecondsToComplete = round(complete.Sub(m.start).Seconds(), 2)
	r.logf("complete after %.1fs: every reference resolved, every claim Secret published", r.res.SecondsToComplete)
	claimReady := claimT.snapshot()
	all := m.allReady.Sub(m.start).Seconds()

	if err := r.waitQuiet(ctx, "after every claim was Ready"); err != nil {
		return err
	}
	quiet, err := r.read(ctx)
	if err != nil {
		return err
	}
	m.quiet = quiet.at
	stopObs()
	if r.res.PeriodicResyncsDuringRun = r.periodicResyncs(m.start, m.quiet); r.res.PeriodicResyncsDuringRun > 0 {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("the watcher published %d periodic full resyncs during the run; their events and reads are in the per-claim figures", r.res.PeriodicResyncsDuringRun))
	}

	// Requests from the API server's counters.
	runReqs := ready.reqs.sub(before.reqs)
	allReqs := quiet.reqs.sub(before.reqs)
	fg := func(k requestKey) bool { return isWrite(k) && !isBackgroundWrite(k) }
	systemRun := runReqs.sum(fg)
	systemAll := allReqs.sum(fg)
	r.res.AllWritesPerClaimMetrics = round(systemAll/float64(n), 2)
	r.res.MetricsWritesPerClaimByVerb = perClaim(allReqs.byResource(fg), n)
	r.res.SystemWritesPerS = round(systemRun/all, 1)
	r.res.Throttled = allReqs.sum(func(k requestKey) bool { return k.Code == "429" })
	r.res.ServerErrors = allReqs.sum(func(k requestKey) bool { return strings.HasPrefix(k.Code, "5") })
	// Without an audit log Loom's share is everything but the load
	// generator's creates; attribute replaces these with exact figures.
	r.res.Attribution = "metrics"
	r.res.LoadGeneratorWritesPerClaim = 1
	loomAll := systemAll - float64(n)
	r.res.APIWritesPerClaim = round(loomAll/float64(n), 2)
	r.res.APIReadsPerClaim = round(allReqs.sum(isRead)/float64(n), 2)
	byVerb := allReqs.byVerb(fg, writeVerbs)
	byVerb["create"] -= float64(n)
	r.res.APIWritesPerClaimByVerb = perClaim(byVerb, n)
	r.res.APIReadsPerClaimByVerb = perClaim(allReqs.byVerb(isRead, readVerbs), n)
	r.res.LoomWritesPerS = round((systemRun-float64(n))/all, 1)
	r.res.Conflicts = map[string]float64{"all": allReqs.sum(func(k requestKey) bool { return k.Code == "409" })}
	if r.res.RawCeilingWritesPerS > 0 {
		r.res.Efficiency = round(r.res.LoomWritesPerS/r.res.RawCeilingWritesPerS, 3)
		r.res.SystemEfficiency = round(r.res.SystemWritesPerS/r.res.RawCeilingWritesPerS, 3)
	}

	// Bus and CPU.
	byStream, total := quiet.bus.published(before.bus)
	r.res.BusMsgsByStream = byStream
	r.res.BusMsgsPerClaim = round(float64(total)/float64(n), 2)
	r.res.CPUSecondsByProcess = map[string]float64{}
	r.res.CPUMsPerClaim = map[string]float64{}
	for p, v := range quiet.cpu {
		d := v - before.cpu[p]
		if d > 0 {
			r.res.CPUSecondsByProcess[p] = round(d, 2)
			r.res.CPUMsPerClaim[p] = round(d*1000/float64(n), 2)
		}
	}
	var used float64
	for _, v := range r.res.CPUSecondsByProcess {
		used += v
	}
	r.res.CPUShare = round(used/(quiet.at.Sub(before.at).Seconds()*float64(r.res.Machine.NProc)), 3)
	r.res.LoadAvgDuringRun = loadAvg()

	// Latencies and correctness from the objects.
	if err := r.latencies(ctx, created, claimReady, xrT.snapshot(), nopT.snapshot()); err != nil {
		return err
	}
	r.marks = m
	return nil
}

func claimName(i int) string { return fmt.Sprintf("db-%05d", i) }

// shapes counts the composed resources of each XR (byXR, by XR name; uids
// maps XR names to UIDs) by shape (see Result.ComposedShapes): the names of
// the XR's composed resources become <role>, then the XR's name <xr> and
// its UID <uid>.
func shapes(byXR map[string][]*unstructured.Unstructured, uids map[string]string) map[string]int {
	out := map[string]int{}
	for xr, composed := range byXR {
		var names []string
		for _, o := range composed {
			names = append(names, o.GetName(), "<"+o.GetLabels()[labelRole]+">")
		}
		rn := strings.NewReplacer(names...)
		for _, o := range composed {
			fp, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "forProvider")
			wc, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "writeConnectionSecretToRef")
			b, err := json.Marshal(map[string]any{"forProvider": fp, "writeConnectionSecretToRef": wc})
			s := string(b)
			if err != nil {
				s = "unencodable: " + err.Error()
			}
			s = rn.Replace(s)
			if uid := uids[xr]; uid != "" {
				s = strings.ReplaceAll(s, uid, "<uid>")
			}
			s = strings.ReplaceAll(s, xr, "<xr>")
			out[o.GetLabels()[labelRole]+" "+s]++
		}
	}
	return out
}

// latencies lists the claims, XRs, composed resources and claim Secrets
// and computes the latency figures and the correctness checks.
func (r *run) latencies(ctx context.Context, created []time.Time, claimSeen, xrSeen, nopSeen map[string]time.Time) error {
	claims, err := listAll(ctx, r.dyn.Resource(claimGVR).Namespace(Namespace), "")
	if err != nil {
		return err
	}
	xrs, err := listAll(ctx, r.dyn.Resource(xrGVR), "crossplane.io/claim-namespace="+Namespace)
	if err != nil {
		return err
	}
	nops, err := listAll(ctx, r.dyn.Resource(nopGVR), labelComposite)
	if err != nil {
		return err
	}
	measured := map[string]bool{}
	uids := map[string]string{}
	for _, x := range xrs {
		measured[x.GetName()] = true
		uids[x.GetName()] = string(x.GetUID())
	}
	byXR := map[string][]*unstructured.Unstructured{}
	for _, o := range nops {
		x := o.GetLabels()[labelComposite]
		if !measured[x] {
			continue // the warm-up claim's
		}
		byXR[x] = append(byXR[x], o)
		if o.GetLabels()["bench.loom.dev/role"] == "database" {
			if v, _, _ := unstructured.NestedString(o.Object, "spec", "forProvider", "fields", "network"); v != "" {
				r.res.ResolvedReferences++
			}
		}
	}

	var ready, readyObs, engine, engineObs, claimAfterXR []float64
	type named struct {
		name string
		v    float64
	}
	var slowest []named
	for _, c := range claims {
		s, t := readyCondition(c)
		if s == "True" {
			ready = append(ready, t.Sub(c.GetCreationTimestamp().Time).Seconds())
		}
		var i int
		if _, err := fmt.Sscanf(c.GetName(), "db-%05d", &i); err == nil && i < len(created) {
			if seen, ok := claimSeen[c.GetName()]; ok {
				readyObs = append(readyObs, seen.Sub(created[i]).Seconds())
			}
		}
		xrName, _, _ := unstructured.NestedString(c.Object, "spec", "resourceRef", "name")
		if xrSeenAt, ok := xrSeen[xrName]; ok {
			if seen, ok := claimSeen[c.GetName()]; ok {
				claimAfterXR = append(claimAfterXR, seen.Sub(xrSeenAt).Seconds())
			}
		}
	}
	r.res.ComposedShapes = shapes(byXR, uids)
	for _, x := range xrs {
		composed := byXR[x.GetName()]
		if len(composed) == 3 {
			r.res.CompleteXRs++
		}
		xs, xt := readyCondition(x)
		if xs != "True" || len(composed) == 0 {
			continue
		}
		var latest, latestObs time.Time
		obsOK := true
		for _, o := range composed {
			if _, t := readyCondition(o); t.After(latest) {
				latest = t
			}
			seen, ok := nopSeen[o.GetName()]
			obsOK = obsOK && ok
			if seen.After(latestObs) {
				latestObs = seen
			}
		}
		engine = append(engine, xt.Sub(latest).Seconds())
		if xSeen, ok := xrSeen[x.GetName()]; ok && obsOK {
			engineObs = append(engineObs, xSeen.Sub(latestObs).Seconds())
			slowest = append(slowest, named{x.GetName(), xSeen.Sub(latestObs).Seconds()})
		}
	}
	slices.SortFunc(slowest, func(a, b named) int { return cmp.Compare(b.v, a.v) })
	r.res.EngineAddedObservedSlowest = map[string]float64{}
	for _, n := range slowest[:min(len(slowest), 5)] {
		r.res.EngineAddedObservedSlowest[n.name] = round(n.v, 3)
	}
	r.res.ReadyP50S = round(percentile(ready, 0.50), 3)
	r.res.ReadyP99S = round(percentile(ready, 0.99), 3)
	r.res.ReadyMaxS = round(percentile(ready, 1), 3)
	r.res.ReadyObservedP50S = round(percentile(readyObs, 0.50), 3)
	r.res.ReadyObservedP99S = round(percentile(readyObs, 0.99), 3)
	r.res.EngineAddedP50S = round(percentile(engine, 0.50), 3)
	r.res.EngineAddedP99S = round(percentile(engine, 0.99), 3)
	r.res.EngineAddedObservedP50S = round(percentile(engineObs, 0.50), 3)
	r.res.EngineAddedObservedP99S = round(percentile(engineObs, 0.99), 3)
	r.res.ClaimAfterXRObservedP99S = round(percentile(claimAfterXR, 0.99), 3)

	secrets, err := r.kube.CoreV1().Secrets(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("cannot list the claims' Secrets: %w", err)
	}
	have := map[string]bool{}
	for _, s := range secrets.Items {
		have[s.Name] = len(s.Data) > 0
	}
	for _, c := range claims {
		if have[c.GetName()+"-conn"] {
			r.res.ClaimSecrets++
		}
	}
	if r.res.ClaimSecrets < len(claims) {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("%d of %d claims have no connection Secret with data", len(claims)-r.res.ClaimSecrets, len(claims)))
	}
	if r.res.CompleteXRs < len(claims) {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("%d of %d XRs do not have exactly three composed resources", len(claims)-r.res.CompleteXRs, len(claims)))
	}
	if r.res.ResolvedReferences < len(claims) {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("%d of %d database references are unresolved", len(claims)-r.res.ResolvedReferences, len(claims)))
	}
	return nil
}

// listAll lists every object of ri matching selector, a page at a time.
func listAll(ctx context.Context, ri dynamic.ResourceInterface, selector string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	opts := metav1.ListOptions{LabelSelector: selector, Limit: 500}
	for {
		l, err := ri.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("cannot list: %w", err)
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		if l.GetContinue() == "" {
			return out, nil
		}
		opts.Continue = l.GetContinue()
	}
}

// diagnose describes a few claims that are not Ready.
func (r *run) diagnose(ctx context.Context, t *tracker) string {
	seen := t.snapshot()
	var lines []string
	for i := 0; i < r.cfg.Claims && len(lines) < 5; i++ {
		name := claimName(i)
		if _, ok := seen[name]; ok {
			continue
		}
		c, err := r.dyn.Resource(claimGVR).Namespace(Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			lines = append(lines, fmt.Sprintf("claim %s: %v", name, err))
			continue
		}
		line := fmt.Sprintf("claim %s: %s", name, conditionSummary(c))
		if xr, _, _ := unstructured.NestedString(c.Object, "spec", "resourceRef", "name"); xr != "" {
			if x, err := r.dyn.Resource(xrGVR).Get(ctx, xr, metav1.GetOptions{}); err == nil {
				line += fmt.Sprintf("; XR %s: %s", xr, conditionSummary(x))
			} else {
				line += fmt.Sprintf("; XR %s: %v", xr, err)
			}
		}
		lines = append(lines, line)
	}
	return "not Ready: " + strings.Join(lines, "; ")
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
