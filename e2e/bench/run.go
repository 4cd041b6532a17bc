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
	"time"

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
	// secretGVR is watched for the claims' connection Secrets.
	secretGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

const (
	// Namespace holds the measured claims and their connection Secrets.
	Namespace = "bench"
	// warmupNamespace holds the one claim created and awaited before
	// measuring, so that every kind is watched and every role aggregated.
	warmupNamespace = "bench-warmup"
	// labelComposite is the label composed resources carry with their XR's name.
	labelComposite = "crossplane.io/composite"
	// labelClaimNamespace is the label XRs and composed resources carry
	// with their claim's namespace.
	labelClaimNamespace = "crossplane.io/claim-namespace"
	// labelRole is the benchmark Composition's label naming a composed
	// resource's template.
	labelRole = "bench.loom.dev/role"
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
	// ServiceFlags are extra command-line flags of services, by service
	// name, for experiments (for example a client QPS limit): the stack
	// then runs each service through a wrapper that adds them.
	ServiceFlags map[string][]string
	// NoMirror is passed to stack.Options.NoMirror: the services run
	// without the state plane (it is on by default).
	NoMirror bool

	// NoAudit turns the API server's audit log off: requests are then
	// attributed from the API server's counters only.
	NoAudit bool
	// APIServerFlags are extra kube-apiserver flags for experiments, for
	// example --profiling=true to take a CPU profile during a run.
	APIServerFlags []string
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
	// ReadyTimeout bounds the wait for every claim to be Ready. Default
	// 10 minutes plus a second per claim.
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
		c.ReadyTimeout = 10*time.Minute + time.Duration(c.Claims)*time.Second
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
		NoMirror:    cfg.NoMirror,
		Log:         prefixed(cfg.Log, "[stack] "),
	}
	if err := applyServiceFlags(&opts, cfg.RepoRoot, stateDir, cfg.ServiceFlags); err != nil {
		return nil, err
	}
	r.res.ServiceFlags = cfg.ServiceFlags // none: omitted
	if !cfg.NoAudit {
		auditDir := filepath.Join(stateDir, "audit")
		_ = os.RemoveAll(auditDir)
		flags, path, err := auditFlags(auditDir)
		if err != nil {
			return nil, err
		}
		opts.APIServerArgs, r.audit = flags, path
	}
	opts.APIServerArgs = append(opts.APIServerArgs, cfg.APIServerFlags...)
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
	if r.audit != "" {
		// Also after a failure: the attribution up to it helps to see why.
		if aerr := r.attribute(); aerr != nil && err == nil {
			err = aerr
		}
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
	if u, err := r.bus.usage(ctx, filepath.Join(r.s.StateDir(), "nats")); err != nil {
		r.res.Notes = append(r.res.Notes, err.Error())
	} else {
		r.res.JetStream = &u
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

// waitQuiet waits until the API server's write counters (background lease
// renewals aside) stay unchanged for cfg.Quiet with Loom's work streams
// empty. Should the streams never empty (periodic resyncs that take the
// services longer than the resync period to read through), it settles for
// no write during ten times as long and says so in the notes.
func (r *run) waitQuiet(ctx context.Context, what string) error {
	var last float64 = -1
	var pending uint64
	writeSince, drainedSince := time.Now(), time.Now()
	start := time.Now()
	long := max(30*time.Second, 10*r.cfg.Quiet)
	busy := false
	// Draining the bus takes time in proportion to the claims (a resync
	// re-reads every one of them).
	timeout := 5*time.Minute + time.Duration(r.cfg.Claims)*600*time.Millisecond
	err := poll(ctx, timeout, 500*time.Millisecond, func() error {
		reqs, err := readRequests(ctx, r.kube)
		if err != nil {
			return err
		}
		b, err := r.bus.read(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		if w := reqs.sum(func(k requestKey) bool { return isWrite(k) && !isBackgroundWrite(k) }); w != last {
			last, writeSince = w, now
		}
		if pending = b.Pending; pending > 0 {
			drainedSince = now
		}
		quietFor := now.Sub(writeSince)
		switch {
		case quietFor >= r.cfg.Quiet && now.Sub(drainedSince) >= r.cfg.Quiet:
			return nil
		case quietFor >= long:
			busy = true
			return nil
		case pending > 0:
			return fmt.Errorf("not quiet: %d bus messages pending", pending)
		default:
			return errors.New("not quiet long enough")
		}
	})
	if err != nil {
		return fmt.Errorf("the system did not become quiet %s: %w", what, err)
	}
	if busy {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("%s: no API write for %s, but %d bus messages were still pending (the services were still reading)", what, long, pending))
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
		to := m.resyncTo
		if to.IsZero() {
			to = time.Now() // the resync did not finish
		}
		windows = append(windows, window{name: "resync", from: m.resyncFrom, to: to})
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
		if len(res.ResyncKubeEvents) == 0 {
			// No Event occurred (again) during the resync, so patches of
			// Events are client-go's event broadcaster closing a series
			// on its timer (six minutes after its last occurrence): not
			// caused by the resync.
			for k, v := range res.ResyncAPIWritesByClient {
				if strings.HasSuffix(k, ": patch events") {
					res.ResyncEventSeriesWrites += v
					res.ResyncAPIWrites -= v
				}
			}
		}
		res.ResyncAPIReadsByClient = perClaim(rs.by(loomRead, clientVerbRes), 1)
		res.ResyncAPIReads = rs.sum(loomRead)
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
