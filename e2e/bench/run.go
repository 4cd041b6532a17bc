//go:build e2e

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/loomxr/loom/pkg/stack"
)

// The benchmark's kinds (testdata/setup.yaml).
var (
	claimGVR = schema.GroupVersionResource{Group: "bench.loom.dev", Version: "v1alpha1", Resource: "benchdbs"}
	xrGVR    = schema.GroupVersionResource{Group: "bench.loom.dev", Version: "v1alpha1", Resource: "xbenchdbs"}
	nopGVR   = schema.GroupVersionResource{Group: "nop.crossplane.io", Version: "v1alpha1", Resource: "nopresources"}
)

const (
	// Namespace holds the measured claims and their connection Secrets.
	Namespace = "bench"
	// warmupNamespace holds the one claim created and awaited before
	// measuring, so that every kind is watched and every role aggregated.
	warmupNamespace = "bench-warmup"
	// labelComposite is the label composed resources carry with their XR's name.
	labelComposite = "crossplane.io/composite"
	// labelCeiling marks the raw-ceiling phase's NopResources.
	labelCeiling = "bench.loom.dev/ceiling"
)

// Config configures Run. Zero fields take the defaults below.
type Config struct {
	// Claims to create. Default 1000.
	Claims int
	// Creators is the number of concurrent creators of claims and of the
	// raw ceiling's NopResources. Default 32.
	Creators int
	// Ceiling is how long the raw ceiling is measured. Default 20s;
	// negative skips it.
	Ceiling time.Duration
	// Replicas of each service (see stack.Options.Replicas).
	Replicas map[string]int
	// NATSServers is passed to stack.Options.NATSServers.
	NATSServers int
	// NoAudit turns the API server's audit log off: requests are then
	// attributed from the API server's counters only.
	NoAudit bool
	// NoResync skips the steady-state resync check.
	NoResync bool
	// RepoRoot is the Loom checkout. Default: found from the working
	// directory.
	RepoRoot string
	// StateDir is the stack's state folder; it is removed after a
	// successful run unless KeepState. Default: a new folder in
	// <RepoRoot>/bench/results/tmp.
	StateDir  string
	KeepState bool
	// ReadyTimeout bounds the wait for every claim to be Ready. Default 20m.
	ReadyTimeout time.Duration
	// Quiet is how long API writes must stay unchanged, with the bus
	// drained, for the system to count as quiet. Default 3s.
	Quiet time.Duration
	// Name labels the run in its Result.
	Name string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

func (c Config) withDefaults() (Config, error) {
	if c.Claims <= 0 {
		c.Claims = 1000
	}
	if c.Creators <= 0 {
		c.Creators = 32
	}
	if c.Ceiling == 0 {
		c.Ceiling = 20 * time.Second
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = 20 * time.Minute
	}
	if c.Quiet <= 0 {
		c.Quiet = 3 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.RepoRoot == "" {
		wd, err := os.Getwd()
		if err != nil {
			return c, fmt.Errorf("cannot get working directory: %w", err)
		}
		if c.RepoRoot, err = stack.FindRepoRoot(wd); err != nil {
			return c, err
		}
	}
	if c.Name == "" {
		c.Name = fmt.Sprintf("renderer=%d binder=%d", replicasOf(c.Replicas, "renderer"), replicasOf(c.Replicas, "binder"))
	}
	return c, nil
}

func replicasOf(m map[string]int, svc string) int {
	if n, ok := m[svc]; ok {
		return n
	}
	return 1
}

// run is one benchmark run in progress.
type run struct {
	cfg   Config
	s     *stack.Stack
	kube  kubernetes.Interface
	dyn   dynamic.Interface
	bus   *busStats
	procs *procMonitor
	audit string // audit log path, "" without one
	res   *Result
	marks marks
	logw  io.Writer
	t0    time.Time
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.logw, "[bench %6s] %s\n", time.Since(r.t0).Round(100*time.Millisecond), fmt.Sprintf(format, args...))
}

// Run starts a stack of its own, measures the raw ceiling, installs the
// benchmark's kinds, creates cfg.Claims claims, waits until each is Ready,
// checks that a full resync writes nothing, and stops the stack. It returns
// what it measured; on error the Result holds what was measured so far.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, logw: cfg.Log, t0: time.Now(), procs: newProcMonitor()}
	r.res = &Result{
		Name: cfg.Name, StartedAt: r.t0, Replicas: cfg.Replicas, NATSServers: max(cfg.NATSServers, 1),
		Claims: cfg.Claims, Creators: cfg.Creators,
		Machine: machineInfo(), Commit: commitOf(cfg.RepoRoot),
	}
	if r.res.Replicas == nil {
		r.res.Replicas = map[string]int{}
	}
	stateDir := cfg.StateDir
	if stateDir == "" {
		base := filepath.Join(cfg.RepoRoot, "bench", "results", "tmp")
		if err := os.MkdirAll(base, 0o755); err != nil {
			return nil, fmt.Errorf("cannot create %s: %w", base, err)
		}
		if stateDir, err = os.MkdirTemp(base, "stack-"); err != nil {
			return nil, fmt.Errorf("cannot create a state folder: %w", err)
		}
	}
	opts := stack.Options{
		RepoRoot:    cfg.RepoRoot,
		StateDir:    stateDir,
		Replicas:    cfg.Replicas,
		NATSServers: cfg.NATSServers,
		Log:         prefixed(cfg.Log, "[stack] "),
	}
	if !cfg.NoAudit {
		auditDir := filepath.Join(stateDir, "audit")
		_ = os.RemoveAll(auditDir)
		flags, path, err := auditFlags(auditDir)
		if err != nil {
			return nil, err
		}
		opts.APIServerArgs, r.audit = flags, path
	}
	r.logf("starting the stack in %s (%s)", stateDir, cfg.Name)
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	s, err := stack.Start(startCtx, opts)
	cancel()
	if err != nil {
		return r.res, fmt.Errorf("cannot start the stack: %w", err)
	}
	r.s = s
	monCtx, stopMon := context.WithCancel(ctx)
	monDone := make(chan struct{})
	go func() { defer close(monDone); r.procs.run(monCtx, time.Second) }()

	err = r.measure(ctx)

	stopMon()
	<-monDone
	if r.bus != nil {
		r.bus.close()
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if serr := s.Stop(stopCtx); serr != nil && err == nil {
		err = fmt.Errorf("cannot stop the stack: %w", serr)
	}
	if err == nil && r.audit != "" {
		err = r.attribute()
	}
	if err != nil {
		r.logf("state and logs kept in %s", stateDir)
		return r.res, err
	}
	if !cfg.KeepState && cfg.StateDir == "" {
		_ = os.RemoveAll(stateDir)
	} else {
		r.logf("state and logs kept in %s", stateDir)
	}
	return r.res, nil
}

// Marks of the run's phases, for the audit log's windows.
type marks struct {
	start, allReady, quiet time.Time
	resyncFrom, resyncTo   time.Time
}

func (r *run) measure(ctx context.Context) error {
	rc := rest.CopyConfig(r.s.RESTConfig())
	rc.QPS, rc.Burst = -1, 0 // the load generator must not throttle itself
	rc.UserAgent = "loom-bench"
	var err error
	if r.kube, err = kubernetes.NewForConfig(rc); err != nil {
		return fmt.Errorf("cannot create Kubernetes client: %w", err)
	}
	if r.dyn, err = dynamic.NewForConfig(rc); err != nil {
		return fmt.Errorf("cannot create dynamic client: %w", err)
	}
	if r.bus, err = newBusStats(r.s.NATSURL()); err != nil {
		return err
	}
	if r.cfg.Ceiling > 0 {
		if err := r.ceiling(ctx); err != nil {
			return err
		}
	}
	if err := r.install(ctx); err != nil {
		return err
	}
	if err := r.claims(ctx); err != nil {
		return err
	}
	if !r.cfg.NoResync {
		if err := r.resync(ctx); err != nil {
			return err
		}
	}
	r.res.PeakRSSMBByProcess = r.procs.peakMiB()
	r.res.PeakRSSMB = map[string]float64{}
	for p, v := range r.res.PeakRSSMBByProcess {
		svc := serviceOf(p)
		if v > r.res.PeakRSSMB[svc] {
			r.res.PeakRSSMB[svc] = v
		}
	}
	return nil
}

// ceiling measures how many NopResource creates per second the API server
// accepts from cfg.Creators clients with nothing else writing: the test
// provider is stopped (SIGSTOP) meanwhile, and the NopResources carry no
// crossplane.io/composite label, so Loom's watcher ignores them. They are
// deleted, and the system is quiet again, before it returns.
func (r *run) ceiling(ctx context.Context) error {
	if err := r.waitQuiet(ctx, "before the ceiling"); err != nil {
		return err
	}
	nops := r.dyn.Resource(nopGVR)
	provider := r.pids("provider-nop")
	signal(provider, syscall.SIGSTOP)
	resumed := false
	resume := func() {
		if !resumed {
			signal(provider, syscall.SIGCONT)
			resumed = true
		}
	}
	defer resume()

	r.logf("raw ceiling: %d clients create NopResources for %s (provider stopped)", r.cfg.Creators, r.cfg.Ceiling)
	type tally struct{ ok, failed int }
	results := make(chan tally, r.cfg.Creators)
	start := time.Now()
	deadline := start.Add(r.cfg.Ceiling)
	for w := range r.cfg.Creators {
		go func() {
			// Requests in flight at the deadline finish; the rate counts
			// them over the time they took.
			var t tally
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				o := ceilingNop(fmt.Sprintf("ceiling-%02d-%06d", w, i))
				if _, err := nops.Create(ctx, o, metav1.CreateOptions{}); err != nil {
					t.failed++
					continue
				}
				t.ok++
			}
			results <- t
		}()
	}
	var total tally
	for range r.cfg.Creators {
		t := <-results
		total.ok += t.ok
		total.failed += t.failed
	}
	elapsed := time.Since(start)
	r.res.RawCeilingSeconds = round(elapsed.Seconds(), 1)
	r.res.RawCeilingCreators = r.cfg.Creators
	r.res.RawCeilingErrors = total.failed
	r.res.RawCeilingWritesPerS = round(float64(total.ok)/elapsed.Seconds(), 1)
	r.logf("raw ceiling: %d creates in %s = %.0f writes/s (%d errors)", total.ok, elapsed.Round(time.Millisecond), r.res.RawCeilingWritesPerS, total.failed)

	// Delete them while the provider is still stopped, so it has nothing
	// to do for them when it resumes.
	if err := nops.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: labelCeiling}); err != nil {
		return fmt.Errorf("cannot delete the ceiling's NopResources: %w", err)
	}
	if err := poll(ctx, 5*time.Minute, time.Second, func() error {
		l, err := nops.List(ctx, metav1.ListOptions{LabelSelector: labelCeiling, Limit: 1})
		if err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return errors.New("the ceiling's NopResources are still being deleted")
		}
		return nil
	}); err != nil {
		return err
	}
	resume()
	return r.waitQuiet(ctx, "after the ceiling")
}

// ceilingNop is a NopResource like the benchmark's composed ones, but not
// composed (no crossplane.io/composite label).
func ceilingNop(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nop.crossplane.io/v1alpha1",
		"kind":       "NopResource",
		"metadata": map[string]any{
			"name":   name,
			"labels": map[string]any{labelCeiling: "true"},
		},
		"spec": map[string]any{"forProvider": map[string]any{
			"conditionAfter": []any{map[string]any{"time": "0s", "conditionType": "Ready", "conditionStatus": "True"}},
			"fields":         map[string]any{"kind": "Database", "storageMB": int64(20480)},
		}},
	}}
}

// pids returns the process ids of every running replica of service.
func (r *run) pids(service string) []int {
	var out []int
	for i := 0; ; i++ {
		pid := r.s.ServicePID(service, i)
		if pid == 0 {
			return out
		}
		out = append(out, pid)
	}
}

func signal(pids []int, sig syscall.Signal) {
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}

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

// A reading is the state of the counters at one moment.
type reading struct {
	at   time.Time
	reqs requestCounts
	bus  busReading
	cpu  map[string]float64
}

func (r *run) read(ctx context.Context) (reading, error) {
	rd := reading{at: time.Now()}
	var err error
	if rd.reqs, err = readRequests(ctx, r.kube); err != nil {
		return rd, err
	}
	if rd.bus, err = r.bus.read(ctx); err != nil {
		return rd, err
	}
	r.procs.sample()
	rd.cpu = r.procs.cpuSeconds()
	return rd, nil
}

// claims creates the claims, waits until each is Ready, and computes the
// figures of issue 10 from the counters and the objects.
func (r *run) claims(ctx context.Context) error {
	n := r.cfg.Claims
	claims := r.dyn.Resource(claimGVR).Namespace(Namespace)

	// Observers: claims, their XRs and composed resources, first seen Ready.
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	claimT, xrT, nopT := newReadyTracker("claims"), newReadyTracker("XRs"), newReadyTracker("NopResources")
	obsErr := make(chan error, 3)
	for _, o := range []struct {
		t   *readyTracker
		ri  dynamic.ResourceInterface
		sel string
	}{
		{claimT, claims, ""},
		{xrT, r.dyn.Resource(xrGVR), "crossplane.io/claim-namespace=" + Namespace},
		{nopT, r.dyn.Resource(nopGVR), labelComposite},
	} {
		go func() { obsErr <- o.t.run(obsCtx, o.ri, metav1.ListOptions{LabelSelector: o.sel}) }()
	}
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
			for i := range next {
				c := benchClaim(Namespace, claimName(i))
				var err error
				for attempt := 0; attempt < 10; attempt++ {
					if _, err = claims.Create(ctx, c, metav1.CreateOptions{}); err == nil {
						break
					}
					time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
				}
				if err != nil {
					errs <- fmt.Errorf("cannot create claim %s: %w", c.GetName(), err)
					return
				}
				created[i] = time.Now()
			}
			errs <- nil
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	for range r.cfg.Creators {
		if err := <-errs; err != nil {
			return err
		}
	}
	createdAll := time.Now()
	r.res.CreateSeconds = round(createdAll.Sub(m.start).Seconds(), 2)
	r.res.CreatesPerS = round(float64(n)/createdAll.Sub(m.start).Seconds(), 1)
	r.logf("created %d claims in %s (%.0f/s)", n, createdAll.Sub(m.start).Round(time.Millisecond), r.res.CreatesPerS)

	// Wait until every claim is Ready, reporting progress.
	timeout := time.NewTimer(r.cfg.ReadyTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-claimT.done:
			break wait
		case err := <-obsErr:
			if err != nil {
				return err
			}
		case <-tick.C:
			r.logf("%d/%d claims Ready, %d XRs, %d composed resources", claimT.count(), n, xrT.count(), nopT.count())
		case <-timeout.C:
			r.res.ClaimsReady = claimT.count()
			return fmt.Errorf("only %d of %d claims were Ready after %s; %s", claimT.count(), n, r.cfg.ReadyTimeout, r.diagnose(ctx, claimT))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	claimReady := claimT.snapshot()
	var last time.Time
	for _, t := range claimReady {
		if t.After(last) {
			last = t
		}
	}
	ready, err := r.read(ctx)
	if err != nil {
		return err
	}
	m.allReady = last
	r.res.ClaimsReady = len(claimReady)
	all := last.Sub(m.start).Seconds()
	r.res.SecondsToAllReady = round(all, 2)
	r.res.ClaimsPerS = round(float64(n)/all, 2)
	r.logf("all %d claims Ready after %.1fs (%.1f claims/s)", n, all, r.res.ClaimsPerS)

	if err := r.waitQuiet(ctx, "after every claim was Ready"); err != nil {
		return err
	}
	quiet, err := r.read(ctx)
	if err != nil {
		return err
	}
	m.quiet = quiet.at
	stopObs()

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

	// Latencies and correctness from the objects.
	if err := r.latencies(ctx, created, claimReady, xrT.snapshot(), nopT.snapshot()); err != nil {
		return err
	}
	r.marks = m
	return nil
}

func claimName(i int) string { return fmt.Sprintf("db-%05d", i) }

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
	for _, x := range xrs {
		measured[x.GetName()] = true
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
		}
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
func (r *run) diagnose(ctx context.Context, t *readyTracker) string {
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

// resync restarts the watcher, which publishes a full resync when it
// starts, waits until the bus is drained and the API server quiet, and
// counts the writes that caused.
func (r *run) resync(ctx context.Context) error {
	before, err := r.read(ctx)
	if err != nil {
		return err
	}
	r.marks.resyncFrom = before.at
	logPath := r.s.LogPath("watcher-0")
	var offset int64
	if fi, err := os.Stat(logPath); err == nil {
		offset = fi.Size()
	}
	old := r.s.ServicePID("watcher", 0)
	r.logf("steady state: restarting watcher-0 (pid %d) for a full resync", old)
	if err := r.s.KillService("watcher", 0); err != nil {
		return err
	}
	if err := poll(ctx, time.Minute, 100*time.Millisecond, func() error {
		if p := r.s.ServicePID("watcher", 0); p == 0 || p == old {
			return errors.New("watcher-0 has not restarted")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := poll(ctx, 2*time.Minute, 200*time.Millisecond, func() error {
		b, err := readFrom(logPath, offset)
		if err != nil {
			return err
		}
		if !strings.Contains(b, "resync published") {
			return errors.New("the watcher has not published its initial resync")
		}
		return nil
	}); err != nil {
		r.res.Notes = append(r.res.Notes, "the restarted watcher never logged its resync; waited for quiet instead")
	}
	if err := r.waitQuiet(ctx, "after the resync"); err != nil {
		return err
	}
	after, err := r.read(ctx)
	if err != nil {
		return err
	}
	r.marks.resyncTo = after.at
	d := after.reqs.sub(before.reqs)
	r.res.ResyncAPIWrites = d.sum(func(k requestKey) bool { return isWrite(k) && !isBackgroundWrite(k) })
	r.res.ResyncAPIReads = d.sum(isRead)
	_, r.res.ResyncEventsPublished = after.bus.published(before.bus)
	r.res.ResyncSeconds = round(after.at.Sub(before.at).Seconds(), 1)
	r.logf("resync: %d events published, %.0f API writes, %.0f reads", r.res.ResyncEventsPublished, r.res.ResyncAPIWrites, r.res.ResyncAPIReads)
	if r.res.ResyncEventsPublished == 0 {
		r.res.Notes = append(r.res.Notes, "the resync published no events: the steady-state check is vacuous")
	}
	return nil
}

func readFrom(path string, offset int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(f)
	return string(b), err
}

// waitQuiet waits until the API server's write counters (background lease
// renewals aside) stay unchanged for cfg.Quiet with Loom's work streams
// empty.
func (r *run) waitQuiet(ctx context.Context, what string) error {
	var last float64 = -1
	since := time.Now()
	start := time.Now()
	err := poll(ctx, 5*time.Minute, 500*time.Millisecond, func() error {
		reqs, err := readRequests(ctx, r.kube)
		if err != nil {
			return err
		}
		b, err := r.bus.read(ctx)
		if err != nil {
			return err
		}
		w := reqs.sum(func(k requestKey) bool { return isWrite(k) && !isBackgroundWrite(k) })
		if w != last || b.Pending > 0 {
			last, since = w, time.Now()
			return fmt.Errorf("not quiet: %d bus messages pending", b.Pending)
		}
		if time.Since(since) < r.cfg.Quiet {
			return errors.New("not quiet long enough")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the system did not become quiet %s: %w", what, err)
	}
	r.logf("quiet %s (waited %s)", what, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// poll calls f every interval until it returns nil, ctx ends, or timeout
// passes; it then returns f's last error.
func poll(ctx context.Context, timeout, interval time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not done within %s: %w", timeout, err)
		case <-t.C:
		}
	}
}

// attribute reads the audit log and replaces the per-claim request figures
// with exact ones by client.
func (r *run) attribute() error {
	m := r.marks
	if m.start.IsZero() || m.quiet.IsZero() {
		return nil
	}
	windows := []window{
		{name: "run", from: m.start, to: m.allReady},
		{name: "all", from: m.start, to: m.quiet},
	}
	if !m.resyncFrom.IsZero() {
		windows = append(windows, window{name: "resync", from: m.resyncFrom, to: m.resyncTo})
	}
	counts, err := readAudit(r.audit, windows)
	if err != nil {
		return err
	}
	n := r.cfg.Claims
	all, run := counts["all"], counts["run"]
	res := r.res
	res.Attribution = "audit"
	res.APIWritesPerClaim = round(all.sum(loomWrite)/float64(n), 2)
	res.APIReadsPerClaim = round(all.sum(loomRead)/float64(n), 2)
	res.APIWritesPerClaimByVerb = perClaim(all.by(loomWrite, verbLabel), n)
	res.APIReadsPerClaimByVerb = perClaim(all.by(loomRead, verbLabel), n)
	res.APIWritesPerClaimByClient = perClaim(all.by(isAuditWrite, clientVerbRes), n)
	res.APIReadsPerClaimByClient = perClaim(all.by(isAuditRead, clientVerbRes), n)
	res.LoadGeneratorWritesPerClaim = round(all.sum(harnessWrite)/float64(n), 2)
	res.ProviderWritesPerClaim = round(all.sum(providerWrite)/float64(n), 2)
	res.Conflicts = all.by(func(k auditKey) bool { return k.Code == 409 }, clientVerbRes)
	seconds := m.allReady.Sub(m.start).Seconds()
	res.LoomWritesPerS = round(run.sum(loomWrite)/seconds, 1)
	if res.RawCeilingWritesPerS > 0 {
		res.Efficiency = round(res.LoomWritesPerS/res.RawCeilingWritesPerS, 3)
	}
	if rs, ok := counts["resync"]; ok {
		res.ResyncAPIWritesByClient = rs.by(loomOrProvWrite, clientVerbRes)
		res.ResyncAPIWrites = rs.sum(loomOrProvWrite)
	}
	return nil
}

// prefixed returns a writer that prefixes each line written to w.
func prefixed(w io.Writer, prefix string) io.Writer {
	if w == io.Discard {
		return w
	}
	return &prefixWriter{w: w, prefix: prefix}
}

type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	lines := strings.SplitAfter(string(b), "\n")
	for _, l := range lines {
		if l == "" {
			continue
		}
		if _, err := io.WriteString(p.w, p.prefix+l); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}
