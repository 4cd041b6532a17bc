//go:build e2e

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/loomxr/loom/pkg/stack"
)

// Engines compared by RunVS.
const (
	EngineCrossplane = "crossplane"
	EngineLoom       = "loom"
)

// The side-by-side workload's kinds (testdata/vs/workload.yaml).
var vsClaimGVR = schema.GroupVersionResource{Group: "bench.example.org", Version: "v1alpha1", Resource: "nopstacks"}

// Namespaces of the side-by-side run: the measured claims, the warm-up
// claim, the claims created one at a time at rest, the burst, and the
// claims created one at a time during the burst.
const (
	vsNamespace            = "bench"
	vsWarmupNamespace      = "bench-warmup"
	vsSteadyNamespace      = "bench-steady"
	vsBurstNamespace       = "bench-burst"
	vsInteractiveNamespace = "bench-interactive"
	vsComposition          = "xnopstacks-nop3"
)

// VSConfig configures RunVS. Zero fields take the defaults below.
type VSConfig struct {
	// Claims created by the main phase, and by the burst. Default 1000.
	Claims int
	// Creators is the number of concurrent creators. Default 32.
	Creators int
	// Rounds is how many times each engine runs, alternating, Crossplane
	// first. Default 2.
	Rounds int
	// OneAtATime is how many claims the steady and burst phases create
	// one at a time. Default 20; negative skips both phases.
	OneAtATime int
	// NoBurst skips the burst phase.
	NoBurst bool
	// Engines to run, in order each round. Default both (Crossplane,
	// then Loom); one engine alone is for diagnosis: its report has no
	// ratios.
	Engines []string
	// CrossplaneDir holds the crossplane binary and its CRDs (crds/), as
	// `make crossplane` builds them; its name is the release.
	CrossplaneDir string
	// RepoRoot is the Loom checkout. Default: found from the working
	// directory.
	RepoRoot string
	// KeepState keeps each stack's state folder (logs, audit log).
	KeepState bool
	// ServiceFlags are extra command-line flags of Loom's services, by
	// service, for experiments; Crossplane's side is never changed.
	ServiceFlags map[string][]string
	// ReadyTimeout bounds each wait for a phase's claims to be Ready.
	// Default 10 minutes plus a second per claim.
	ReadyTimeout time.Duration
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

func (c VSConfig) withDefaults() (VSConfig, error) {
	if c.Claims <= 0 {
		c.Claims = 1000
	}
	if c.Creators <= 0 {
		c.Creators = 32
	}
	if c.Rounds <= 0 {
		c.Rounds = 2
	}
	if c.OneAtATime == 0 {
		c.OneAtATime = 20
	}
	if len(c.Engines) == 0 {
		c.Engines = []string{EngineCrossplane, EngineLoom}
	}
	for _, e := range c.Engines {
		if e != EngineCrossplane && e != EngineLoom {
			return c, fmt.Errorf("cannot run engine %q: want %q or %q", e, EngineCrossplane, EngineLoom)
		}
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = 10*time.Minute + time.Duration(c.Claims)*time.Second
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
	if c.CrossplaneDir == "" {
		return c, errors.New("cannot compare with Crossplane: no Crossplane directory (make crossplane builds one)")
	}
	for _, p := range []string{filepath.Join(c.CrossplaneDir, "crossplane"), filepath.Join(c.CrossplaneDir, "crds")} {
		if _, err := os.Stat(p); err != nil {
			return c, fmt.Errorf("cannot compare with Crossplane: %w (make crossplane builds it)", err)
		}
	}
	return c, nil
}

// An EngineResult is what one engine's run of RunVS measured.
type EngineResult struct {
	Engine    string    `json:"engine"`
	Round     int       `json:"round"`
	StartedAt time.Time `json:"started_at"`
	// ServiceFlags are the extra flags Loom's services ran with (an
	// experiment's, VSConfig.ServiceFlags); none for Crossplane.
	ServiceFlags map[string][]string `json:"service_flags,omitempty"`
	// LoadAvg is the machine's load average at the start and at the end of
	// the main phase (other work on a shared machine shows here).
	LoadAvgAtStart string `json:"load_avg_at_start"`
	LoadAvgAtEnd   string `json:"load_avg_at_end"`

	// The main phase: Claims created by Creators, until every one is Ready.
	Claims            int     `json:"claims"`
	ClaimsReady       int     `json:"claims_ready"`
	CreateSeconds     float64 `json:"create_seconds"`
	SecondsToAllReady float64 `json:"seconds_to_all_ready"`
	ClaimsPerS        float64 `json:"claims_per_s"`
	// Start of each claim's create call to its Ready first seen by a watch.
	ReadyP50S float64 `json:"ready_p50_s"`
	ReadyP99S float64 `json:"ready_p99_s"`
	ReadyMaxS float64 `json:"ready_max_s"`
	// CalmAfterS is how long after the last claim turned Ready the API
	// writes took to calm down (see waitCalm), and CalmNote says so when
	// they did not.
	CalmAfterS float64 `json:"calm_after_s"`
	CalmNote   string  `json:"calm_note,omitempty"`

	// API requests of the main phase (first create until calm), from the
	// API server's audit log, divided by Claims. The engine's clients are
	// Crossplane core, or Loom's four services.
	EngineRequestsPerClaim       float64            `json:"engine_requests_per_claim"`
	EngineWritesPerClaim         float64            `json:"engine_writes_per_claim"`
	EngineRequestsPerClaimByVerb map[string]float64 `json:"engine_requests_per_claim_by_verb"`
	ProviderRequestsPerClaim     float64            `json:"provider_requests_per_claim"`
	AllRequestsPerClaim          float64            `json:"all_requests_per_claim"`
	// RequestsPerClaimByClient is by "client: verb resource".
	RequestsPerClaimByClient map[string]float64 `json:"requests_per_claim_by_client"`
	// Conflicts are the HTTP 409 responses, by "client: verb resource".
	Conflicts      map[string]float64 `json:"conflicts"`
	ConflictsTotal float64            `json:"conflicts_total"`

	// CPU seconds of each process during the main phase, and of
	// kube-apiserver per claim.
	CPUSecondsByProcess    map[string]float64 `json:"cpu_seconds_by_process"`
	APIServerCPUPerClaimMs float64            `json:"apiserver_cpu_ms_per_claim"`
	EngineCPUPerClaimMs    float64            `json:"engine_cpu_ms_per_claim"`
	// Peak resident memory of each process over the whole run (burst
	// included), MiB.
	PeakRSSMiBByProcess map[string]float64 `json:"peak_rss_mib_by_process"`
	EnginePeakRSSMiB    float64            `json:"engine_peak_rss_mib"`

	// SteadyNewClaim*: after the main phase, with the system calm, claims
	// created one at a time (each awaited before the next), create call
	// to Ready seen.
	SteadyNewClaims    int     `json:"steady_new_claims"`
	SteadyNewClaimP50S float64 `json:"steady_new_claim_p50_s"`
	SteadyNewClaimP99S float64 `json:"steady_new_claim_p99_s"`

	// The burst: another Claims claims in one namespace by Creators
	// creators, while claims in another namespace are created one at a
	// time, paced over the burst's expected length (the main phase's time
	// to all Ready), each timed from its create call to its Ready seen.
	BurstClaims            int     `json:"burst_claims"`
	BurstSecondsToAllReady float64 `json:"burst_seconds_to_all_ready"`
	BurstClaimsPerS        float64 `json:"burst_claims_per_s"`
	BurstReadyP50S         float64 `json:"burst_ready_p50_s"`
	BurstReadyP99S         float64 `json:"burst_ready_p99_s"`
	BurstNewClaims         int     `json:"burst_new_claims"`
	// BurstNewClaimsMidBurst of them were created before the burst's last
	// claim was Ready.
	BurstNewClaimsMidBurst int     `json:"burst_new_claims_mid_burst"`
	BurstNewClaimIntervalS float64 `json:"burst_new_claim_interval_s"`
	BurstNewClaimP50S      float64 `json:"burst_new_claim_p50_s"`
	BurstNewClaimP99S      float64 `json:"burst_new_claim_p99_s"`

	Notes []string `json:"notes,omitempty"`
}

// A Spread is a figure's minimum, median and maximum across rounds.
type Spread struct {
	Min    float64   `json:"min"`
	Median float64   `json:"median"`
	Max    float64   `json:"max"`
	Values []float64 `json:"values"`
}

func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Min: s[0], Median: round(med, 3), Max: s[len(s)-1], Values: xs}
}

// An EngineSummary is one engine's figures across rounds.
type EngineSummary struct {
	ClaimsPerS               Spread `json:"claims_per_s"`
	ReadyP50S                Spread `json:"ready_p50_s"`
	ReadyP99S                Spread `json:"ready_p99_s"`
	EngineRequestsPerClaim   Spread `json:"engine_requests_per_claim"`
	ConflictsTotal           Spread `json:"conflicts_total"`
	APIServerCPUPerClaimMs   Spread `json:"apiserver_cpu_ms_per_claim"`
	EngineCPUPerClaimMs      Spread `json:"engine_cpu_ms_per_claim"`
	EnginePeakRSSMiB         Spread `json:"engine_peak_rss_mib"`
	SteadyNewClaimP50S       Spread `json:"steady_new_claim_p50_s"`
	SteadyNewClaimP99S       Spread `json:"steady_new_claim_p99_s"`
	BurstClaimsPerS          Spread `json:"burst_claims_per_s"`
	BurstNewClaimP50S        Spread `json:"burst_new_claim_p50_s"`
	BurstNewClaimP99S        Spread `json:"burst_new_claim_p99_s"`
	BurstNewClaimsMidBurst   Spread `json:"burst_new_claims_mid_burst"`
	BurstReadyP99S           Spread `json:"burst_ready_p99_s"`
	ProviderRequestsPerClaim Spread `json:"provider_requests_per_claim"`
}

// A VSReport is what `make bench VS=crossplane` writes.
type VSReport struct {
	StartedAt         time.Time `json:"started_at"`
	Commit            string    `json:"commit"`
	Machine           Machine   `json:"machine"`
	CrossplaneVersion string    `json:"crossplane_version"`
	KubernetesVersion string    `json:"kubernetes_version"`
	Workload          string    `json:"workload"`
	Claims            int       `json:"claims"`
	Creators          int       `json:"creators"`
	Rounds            int       `json:"rounds"`
	// Runs in the order they ran (alternating, Crossplane first).
	Runs    []EngineResult           `json:"runs"`
	Summary map[string]EngineSummary `json:"summary"`
	// ClaimsPerSRatio is Loom's claims/s divided by Crossplane's, per
	// round; the other ratios are Crossplane's figure divided by Loom's
	// (above 1: Loom is better), from the medians.
	ClaimsPerSRatio        Spread   `json:"claims_per_s_ratio"`
	EngineRequestsRatio    float64  `json:"engine_requests_ratio"`
	APIServerCPURatio      float64  `json:"apiserver_cpu_ratio"`
	SteadyNewClaimP99Ratio float64  `json:"steady_new_claim_p99_ratio"`
	BurstNewClaimP99Ratio  float64  `json:"burst_new_claim_p99_ratio"`
	Notes                  []string `json:"notes,omitempty"`
}

// RunVS runs both engines cfg.Rounds times, alternating, each on a fresh
// stack, and returns the report. On error the report holds the runs that
// completed.
func RunVS(ctx context.Context, cfg VSConfig) (*VSReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rep := &VSReport{
		StartedAt: time.Now(), Commit: commitOf(cfg.RepoRoot), Machine: machineInfo(),
		CrossplaneVersion: filepath.Base(cfg.CrossplaneDir),
		Workload:          "e2e/bench/testdata/vs/workload.yaml (shared/reference/baseline-workload)",
		Claims:            cfg.Claims, Creators: cfg.Creators, Rounds: cfg.Rounds,
	}
	if rep.KubernetesVersion, err = stack.KubernetesVersion(cfg.RepoRoot); err != nil {
		return nil, err
	}
	for round := 1; round <= cfg.Rounds; round++ {
		for _, engine := range cfg.Engines {
			res, err := runEngine(ctx, cfg, engine, round)
			if res != nil {
				rep.Runs = append(rep.Runs, *res)
			}
			if err != nil {
				rep.summarize()
				return rep, fmt.Errorf("%s, round %d: %w", engine, round, err)
			}
		}
	}
	rep.summarize()
	return rep, nil
}

// summarize computes the summaries and ratios from the runs.
func (rep *VSReport) summarize() {
	rep.Summary = map[string]EngineSummary{}
	for _, engine := range []string{EngineCrossplane, EngineLoom} {
		var runs []EngineResult
		for _, r := range rep.Runs {
			if r.Engine == engine {
				runs = append(runs, r)
			}
		}
		if len(runs) == 0 {
			continue
		}
		f := func(get func(EngineResult) float64) Spread {
			xs := make([]float64, len(runs))
			for i, r := range runs {
				xs[i] = get(r)
			}
			return spreadOf(xs)
		}
		rep.Summary[engine] = EngineSummary{
			ClaimsPerS:               f(func(r EngineResult) float64 { return r.ClaimsPerS }),
			ReadyP50S:                f(func(r EngineResult) float64 { return r.ReadyP50S }),
			ReadyP99S:                f(func(r EngineResult) float64 { return r.ReadyP99S }),
			EngineRequestsPerClaim:   f(func(r EngineResult) float64 { return r.EngineRequestsPerClaim }),
			ConflictsTotal:           f(func(r EngineResult) float64 { return r.ConflictsTotal }),
			APIServerCPUPerClaimMs:   f(func(r EngineResult) float64 { return r.APIServerCPUPerClaimMs }),
			EngineCPUPerClaimMs:      f(func(r EngineResult) float64 { return r.EngineCPUPerClaimMs }),
			EnginePeakRSSMiB:         f(func(r EngineResult) float64 { return r.EnginePeakRSSMiB }),
			SteadyNewClaimP50S:       f(func(r EngineResult) float64 { return r.SteadyNewClaimP50S }),
			SteadyNewClaimP99S:       f(func(r EngineResult) float64 { return r.SteadyNewClaimP99S }),
			BurstClaimsPerS:          f(func(r EngineResult) float64 { return r.BurstClaimsPerS }),
			BurstNewClaimP50S:        f(func(r EngineResult) float64 { return r.BurstNewClaimP50S }),
			BurstNewClaimP99S:        f(func(r EngineResult) float64 { return r.BurstNewClaimP99S }),
			BurstNewClaimsMidBurst:   f(func(r EngineResult) float64 { return float64(r.BurstNewClaimsMidBurst) }),
			BurstReadyP99S:           f(func(r EngineResult) float64 { return r.BurstReadyP99S }),
			ProviderRequestsPerClaim: f(func(r EngineResult) float64 { return r.ProviderRequestsPerClaim }),
		}
	}
	// Claims/s ratio per round, Loom over Crossplane.
	byRound := map[int]map[string]float64{}
	for _, r := range rep.Runs {
		if byRound[r.Round] == nil {
			byRound[r.Round] = map[string]float64{}
		}
		byRound[r.Round][r.Engine] = r.ClaimsPerS
	}
	var ratios []float64
	for round := 1; round <= rep.Rounds; round++ {
		m := byRound[round]
		if m[EngineCrossplane] > 0 && m[EngineLoom] > 0 {
			ratios = append(ratios, round3(m[EngineLoom]/m[EngineCrossplane]))
		}
	}
	rep.ClaimsPerSRatio = spreadOf(ratios)
	xp, lm := rep.Summary[EngineCrossplane], rep.Summary[EngineLoom]
	ratio := func(a, b Spread) float64 {
		if b.Median <= 0 {
			return 0
		}
		return round3(a.Median / b.Median)
	}
	rep.EngineRequestsRatio = ratio(xp.EngineRequestsPerClaim, lm.EngineRequestsPerClaim)
	rep.APIServerCPURatio = ratio(xp.APIServerCPUPerClaimMs, lm.APIServerCPUPerClaimMs)
	rep.SteadyNewClaimP99Ratio = ratio(xp.SteadyNewClaimP99S, lm.SteadyNewClaimP99S)
	rep.BurstNewClaimP99Ratio = ratio(xp.BurstNewClaimP99S, lm.BurstNewClaimP99S)
}

func round3(f float64) float64 { return round(f, 3) }

// vsRun is one engine's run in progress.
type vsRun struct {
	cfg           VSConfig
	engine        string
	s             *stack.Stack
	kube          kubernetes.Interface
	dyn           dynamic.Interface
	procs         *procMonitor
	audit         string
	res           *EngineResult
	logw          io.Writer
	t0            time.Time
	xp            *crossplaneProcess
	engineClients map[string]bool
}

func (r *vsRun) logf(format string, args ...any) {
	fmt.Fprintf(r.logw, "[vs %s#%d %6s] %s\n", r.engine, r.res.Round, time.Since(r.t0).Round(100*time.Millisecond), fmt.Sprintf(format, args...))
}

// runEngine runs one engine on a fresh stack: install, warm-up, the main
// phase, the steady phase, the burst.
func runEngine(ctx context.Context, cfg VSConfig, engine string, rnd int) (*EngineResult, error) {
	r := &vsRun{cfg: cfg, engine: engine, logw: cfg.Log, t0: time.Now(), procs: newProcMonitor()}
	r.res = &EngineResult{Engine: engine, Round: rnd, StartedAt: r.t0, LoadAvgAtStart: loadAvg(), Claims: cfg.Claims}
	if engine == EngineCrossplane {
		r.engineClients = map[string]bool{ClientCrossplane: true}
	} else {
		r.engineClients = loomServices
	}
	base := filepath.Join(cfg.RepoRoot, "bench", "results", "tmp")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", base, err)
	}
	stateDir, err := os.MkdirTemp(base, "vs-"+engine+"-")
	if err != nil {
		return nil, fmt.Errorf("cannot create a state folder: %w", err)
	}
	opts := stack.Options{RepoRoot: cfg.RepoRoot, StateDir: stateDir, Log: prefixed(cfg.Log, "[stack] ")}
	if engine == EngineCrossplane {
		// Only the control plane and the test provider; upstream's CRDs
		// instead of Loom's.
		opts.Services = []string{"provider-nop"}
		opts.CRDDirs = []string{filepath.Join(cfg.CrossplaneDir, "crds")}
	} else {
		if err := applyServiceFlags(&opts, cfg.RepoRoot, stateDir, cfg.ServiceFlags); err != nil {
			return r.res, err
		}
		r.res.ServiceFlags = cfg.ServiceFlags // none: omitted
	}
	flags, path, err := auditFlags(filepath.Join(stateDir, "audit"))
	if err != nil {
		return nil, err
	}
	opts.APIServerArgs, r.audit = flags, path
	r.logf("starting the stack in %s", stateDir)
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

	var win auditWindow
	err = r.measure(ctx, stateDir, &win)

	if r.xp != nil {
		if serr := r.xp.stop(); serr != nil && err == nil {
			err = serr
		}
	}
	stopMon()
	<-monDone
	r.res.PeakRSSMiBByProcess = r.procs.peakMiB()
	for p, v := range r.res.PeakRSSMiBByProcess {
		if r.engineClients[serviceOf(p)] || p == ClientCrossplane {
			r.res.EnginePeakRSSMiB = max(r.res.EnginePeakRSSMiB, v)
		}
	}
	if engine == EngineLoom {
		// Loom's services are several processes: their sum.
		r.res.EnginePeakRSSMiB = 0
		for p, v := range r.res.PeakRSSMiBByProcess {
			if loomServices[serviceOf(p)] {
				r.res.EnginePeakRSSMiB += v
			}
		}
		r.res.EnginePeakRSSMiB = round(r.res.EnginePeakRSSMiB, 1)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if serr := s.Stop(stopCtx); serr != nil && err == nil {
		err = fmt.Errorf("cannot stop the stack: %w", serr)
	}
	if !win.from.IsZero() && !win.to.IsZero() {
		if aerr := r.attribute(win); aerr != nil && err == nil {
			err = aerr
		}
	}
	if err != nil || cfg.KeepState {
		r.logf("state and logs kept in %s", stateDir)
		return r.res, err
	}
	_ = os.RemoveAll(stateDir)
	return r.res, nil
}

type auditWindow struct{ from, to time.Time }

func (r *vsRun) measure(ctx context.Context, stateDir string, win *auditWindow) error {
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
	if r.engine == EngineCrossplane {
		if r.xp, err = startCrossplane(ctx, r.s, r.kube, r.cfg.CrossplaneDir, stateDir, r.logf); err != nil {
			return err
		}
	}
	if err := r.install(ctx); err != nil {
		return err
	}
	if err := r.mainPhase(ctx, win); err != nil {
		return err
	}
	if r.cfg.OneAtATime > 0 {
		if err := r.steady(ctx); err != nil {
			return err
		}
		if !r.cfg.NoBurst {
			if err := r.burst(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// vsClaim is claim name in namespace ns, as in
// shared/reference/baseline-workload/30-claim-example.yaml.
func vsClaim(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": vsClaimGVR.GroupVersion().String(),
		"kind":       "NopStack",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"parameters":                 map[string]any{"size": "small"},
			"compositionRef":             map[string]any{"name": vsComposition},
			"writeConnectionSecretToRef": map[string]any{"name": name + "-conn"},
		},
	}}
}

// install applies the workload (and, for Loom, the services' rights on
// its kinds) and runs one warm-up claim to Ready.
func (r *vsRun) install(ctx context.Context) error {
	dir := filepath.Join(r.cfg.RepoRoot, "e2e", "bench", "testdata", "vs")
	paths := []string{filepath.Join(dir, "workload.yaml")}
	if r.engine == EngineLoom {
		paths = append(paths, filepath.Join(dir, "loom-rbac.yaml"))
	}
	objs, err := stack.ReadManifests(paths...)
	if err != nil {
		return err
	}
	for _, ns := range []string{vsNamespace, vsWarmupNamespace, vsSteadyNamespace, vsBurstNamespace, vsInteractiveNamespace} {
		n := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
		objs = append([]*unstructured.Unstructured{n}, objs...)
	}
	r.logf("installing the workload")
	actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if _, err := r.s.ApplyObjects(actx, objs...); err != nil {
		return fmt.Errorf("cannot install the workload: %w", err)
	}
	if r.engine == EngineLoom {
		if err := poll(ctx, 2*time.Minute, 200*time.Millisecond, func() error { return r.aggregated(ctx) }); err != nil {
			return err
		}
	}
	r.logf("warm-up claim")
	claims := r.dyn.Resource(vsClaimGVR).Namespace(vsWarmupNamespace)
	if _, err := claims.Create(ctx, vsClaim(vsWarmupNamespace, "warmup"), metav1.CreateOptions{}); err != nil {
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
	_, note, err := r.waitCalm(ctx, 0)
	if note != "" {
		r.res.Notes = append(r.res.Notes, "after the warm-up: "+note)
	}
	return err
}

// aggregated checks that Loom's services' aggregated roles cover the
// workload's group.
func (r *vsRun) aggregated(ctx context.Context) error {
	for _, role := range []string{"loom-watcher-aggregated", "loom:renderer", "loom-binder-aggregated"} {
		cr, err := r.kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("cannot get ClusterRole %s: %w", role, err)
		}
		found := false
		for _, rule := range cr.Rules {
			for _, g := range rule.APIGroups {
				found = found || g == vsClaimGVR.Group
			}
		}
		if !found {
			return fmt.Errorf("ClusterRole %s does not cover %s yet", role, vsClaimGVR.Group)
		}
	}
	return nil
}

// waitCalm waits until the API server's writes (lease renewals aside)
// calm down: at most max(2, 20 % of rate) writes per second over three
// seconds, where rate is the writes per second of the phase before (0:
// none). An engine that polls writes on its own by design, so calm is not
// silence; after a minute it settles and says so. It returns how long it
// waited.
func (r *vsRun) waitCalm(ctx context.Context, rate float64) (time.Duration, string, error) {
	limit := max(2, rate/5)
	start := time.Now()
	const span = 3 * time.Second
	type sample struct {
		at time.Time
		w  float64
	}
	var samples []sample
	var last float64
	deadline := start.Add(time.Minute)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		reqs, err := readRequests(ctx, r.kube)
		if err != nil {
			return 0, "", err
		}
		now := time.Now()
		w := reqs.sum(func(k requestKey) bool { return isWrite(k) && !isBackgroundWrite(k) })
		samples = append(samples, sample{now, w})
		for len(samples) > 1 && now.Sub(samples[1].at) >= span {
			samples = samples[1:]
		}
		if d := now.Sub(samples[0].at); d >= span {
			last = (w - samples[0].w) / d.Seconds()
			if last <= limit {
				r.logf("calm after %s (%.1f writes/s)", now.Sub(start).Round(100*time.Millisecond), last)
				return now.Sub(start), "", nil
			}
		}
		if now.After(deadline) {
			note := fmt.Sprintf("API writes did not calm below %.0f/s within %s (%.0f/s at the end)", limit, now.Sub(start).Round(time.Second), last)
			r.logf("%s", note)
			return now.Sub(start), note, nil
		}
		select {
		case <-ctx.Done():
			return 0, "", ctx.Err()
		case <-t.C:
		}
	}
}

// A wave is claims created concurrently in one namespace and tracked to
// Ready by a watch.
type wave struct {
	ns       string
	n        int
	start    time.Time
	created  time.Time            // the last create returned
	begun    map[string]time.Time // each create call's start
	ready    *tracker
	allReady time.Time
}

// startWatch starts a tracker of Ready claims in ns; it runs until ctx ends.
func (r *vsRun) startWatch(ctx context.Context, ns string, errc chan<- error) *tracker {
	t := newTracker("claims in "+ns, nil)
	go func() {
		if err := watchInto(ctx, r.dyn.Resource(vsClaimGVR).Namespace(ns), "", "claims in "+ns, t); err != nil {
			select {
			case errc <- err:
			default:
			}
		}
	}()
	return t
}

// createConcurrently creates n claims named prefix-00000... in ns with
// cfg.Creators creators and records when each create began.
func (r *vsRun) createConcurrently(ctx context.Context, w *wave, prefix string) error {
	claims := r.dyn.Resource(vsClaimGVR).Namespace(w.ns)
	var mu sync.Mutex
	w.begun = make(map[string]time.Time, w.n)
	next := make(chan int)
	errs := make(chan error, r.cfg.Creators)
	for range r.cfg.Creators {
		go func() {
			var first error
			for i := range next {
				if first != nil {
					continue
				}
				name := fmt.Sprintf("%s-%05d", prefix, i)
				c := vsClaim(w.ns, name)
				began := time.Now()
				var err error
				for attempt := range 10 {
					if _, err = claims.Create(ctx, c, metav1.CreateOptions{}); err == nil {
						break
					}
					time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
				}
				if err != nil {
					first = fmt.Errorf("cannot create claim %s/%s: %w", w.ns, name, err)
					continue
				}
				mu.Lock()
				w.begun[name] = began
				mu.Unlock()
			}
			errs <- first
		}()
	}
	for i := range w.n {
		next <- i
	}
	close(next)
	var err error
	for range r.cfg.Creators {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	w.created = time.Now()
	return err
}

// awaitReady waits until every claim of w is Ready, logging progress.
func (r *vsRun) awaitReady(ctx context.Context, w *wave, errc <-chan error) error {
	timeout := time.NewTimer(r.cfg.ReadyTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	w.ready.expect(w.n)
	for {
		select {
		case <-w.ready.done:
			for _, t := range w.ready.snapshot() {
				if t.After(w.allReady) {
					w.allReady = t
				}
			}
			return nil
		case err := <-errc:
			return err
		case <-tick.C:
			r.logf("%d/%d claims in %s Ready", w.ready.count(), w.n, w.ns)
		case <-timeout.C:
			return fmt.Errorf("after %s, %d of %d claims in %s were Ready", r.cfg.ReadyTimeout, w.ready.count(), w.n, w.ns)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// latencies returns each claim's create call start to Ready seen, seconds.
func (w *wave) latencies() []float64 {
	seen := w.ready.snapshot()
	var out []float64
	for name, b := range w.begun {
		if t, ok := seen[name]; ok {
			out = append(out, t.Sub(b).Seconds())
		}
	}
	return out
}

// mainPhase creates cfg.Claims claims, waits until each is Ready and the
// writes calm down, and records the figures of the phase.
func (r *vsRun) mainPhase(ctx context.Context, win *auditWindow) error {
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	errc := make(chan error, 1)
	w := &wave{ns: vsNamespace, n: r.cfg.Claims}
	w.ready = r.startWatch(wctx, w.ns, errc)

	r.procs.sample()
	cpuBefore := r.procs.cpuSeconds()
	before, err := readRequests(ctx, r.kube)
	if err != nil {
		return err
	}
	w.start = time.Now()
	win.from = w.start
	r.logf("creating %d claims in %s with %d creators", w.n, w.ns, r.cfg.Creators)
	if err := r.createConcurrently(ctx, w, "s"); err != nil {
		return err
	}
	r.res.CreateSeconds = round(w.created.Sub(w.start).Seconds(), 2)
	r.logf("created %d claims in %.1fs", w.n, r.res.CreateSeconds)
	err = r.awaitReady(ctx, w, errc)
	r.res.ClaimsReady = w.ready.count()
	if err != nil {
		return err
	}
	all := w.allReady.Sub(w.start).Seconds()
	r.res.SecondsToAllReady = round(all, 2)
	r.res.ClaimsPerS = round(float64(w.n)/all, 2)
	lat := w.latencies()
	r.res.ReadyP50S = round(percentile(lat, 0.50), 3)
	r.res.ReadyP99S = round(percentile(lat, 0.99), 3)
	r.res.ReadyMaxS = round(percentile(lat, 1), 3)
	r.logf("all %d claims Ready after %.1fs (%.2f claims/s, p50 %.1fs, p99 %.1fs)", w.n, all, r.res.ClaimsPerS, r.res.ReadyP50S, r.res.ReadyP99S)
	r.res.LoadAvgAtEnd = loadAvg()

	after, err := readRequests(ctx, r.kube)
	if err != nil {
		return err
	}
	writes := after.sub(before).sum(func(k requestKey) bool { return isWrite(k) && !isBackgroundWrite(k) })
	_, note, err := r.waitCalm(ctx, writes/all)
	if err != nil {
		return err
	}
	r.res.CalmAfterS = round(time.Since(w.allReady).Seconds(), 1)
	r.res.CalmNote = note
	win.to = time.Now()
	r.procs.sample()
	cpuAfter := r.procs.cpuSeconds()
	r.res.CPUSecondsByProcess = map[string]float64{}
	var engineCPU float64
	for p, v := range cpuAfter {
		d := v - cpuBefore[p]
		if d <= 0 {
			continue
		}
		r.res.CPUSecondsByProcess[p] = round(d, 2)
		if r.engineClients[serviceOf(p)] || p == ClientCrossplane {
			engineCPU += d
		}
	}
	r.res.APIServerCPUPerClaimMs = round(r.res.CPUSecondsByProcess["kube-apiserver"]*1000/float64(w.n), 1)
	r.res.EngineCPUPerClaimMs = round(engineCPU*1000/float64(w.n), 1)
	return nil
}

// steady creates cfg.OneAtATime claims one at a time, each awaited before
// the next, with the system calm.
func (r *vsRun) steady(ctx context.Context) error {
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	errc := make(chan error, 1)
	t := r.startWatch(wctx, vsSteadyNamespace, errc)
	claims := r.dyn.Resource(vsClaimGVR).Namespace(vsSteadyNamespace)
	var lat []float64
	r.logf("steady: %d claims one at a time", r.cfg.OneAtATime)
	for i := range r.cfg.OneAtATime {
		name := fmt.Sprintf("steady-%05d", i)
		began := time.Now()
		if _, err := claims.Create(ctx, vsClaim(vsSteadyNamespace, name), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("cannot create claim %s/%s: %w", vsSteadyNamespace, name, err)
		}
		err := poll(ctx, 3*time.Minute, 5*time.Millisecond, func() error {
			select {
			case err := <-errc:
				return err
			default:
			}
			if _, ok := t.snapshot()[name]; !ok {
				return fmt.Errorf("claim %s/%s is not Ready", vsSteadyNamespace, name)
			}
			return nil
		})
		if err != nil {
			return err
		}
		lat = append(lat, t.snapshot()[name].Sub(began).Seconds())
	}
	r.res.SteadyNewClaims = len(lat)
	r.res.SteadyNewClaimP50S = round(percentile(lat, 0.50), 3)
	r.res.SteadyNewClaimP99S = round(percentile(lat, 0.99), 3)
	r.logf("steady: p50 %.2fs, p99 %.2fs", r.res.SteadyNewClaimP50S, r.res.SteadyNewClaimP99S)
	return nil
}

// burst creates cfg.Claims claims in one namespace and, meanwhile, claims
// one at a time in another, paced over the burst's expected length (the
// main phase's time to all Ready on the same stack), each timed
// independently of the others. They are paced rather than awaited one
// after the other so that each arrives while the burst is in progress,
// whatever the engine's latency.
func (r *vsRun) burst(ctx context.Context) error {
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	errc := make(chan error, 2)
	w := &wave{ns: vsBurstNamespace, n: r.cfg.Claims}
	w.ready = r.startWatch(wctx, w.ns, errc)
	it := r.startWatch(wctx, vsInteractiveNamespace, errc)
	n := r.cfg.OneAtATime
	interval := time.Duration(r.res.SecondsToAllReady * float64(time.Second) / float64(n+1))
	interval = max(interval, 100*time.Millisecond)
	r.res.BurstNewClaimIntervalS = round(interval.Seconds(), 2)

	type made struct {
		name     string
		began    time.Time
		midBurst bool
	}
	madec := make(chan []made, 1)
	interactiveErr := make(chan error, 1)
	burstDone := make(chan struct{})
	r.logf("burst: %d claims in %s; %d claims in %s one every %.1fs", w.n, w.ns, n, vsInteractiveNamespace, interval.Seconds())
	w.start = time.Now()
	go func() {
		claims := r.dyn.Resource(vsClaimGVR).Namespace(vsInteractiveNamespace)
		var out []made
		defer func() { madec <- out }()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := range n {
			name := fmt.Sprintf("one-%05d", i)
			began := time.Now()
			if _, err := claims.Create(wctx, vsClaim(vsInteractiveNamespace, name), metav1.CreateOptions{}); err != nil {
				interactiveErr <- fmt.Errorf("cannot create claim %s/%s: %w", vsInteractiveNamespace, name, err)
				return
			}
			out = append(out, made{name: name, began: began, midBurst: !closed(burstDone)})
			select {
			case <-tick.C:
			case <-wctx.Done():
				return
			}
		}
	}()
	if err := r.createConcurrently(ctx, w, "b"); err != nil {
		return err
	}
	err := r.awaitReady(ctx, w, errc)
	close(burstDone)
	if err != nil {
		return err
	}
	all := w.allReady.Sub(w.start).Seconds()
	r.res.BurstClaims = w.n
	r.res.BurstSecondsToAllReady = round(all, 2)
	r.res.BurstClaimsPerS = round(float64(w.n)/all, 2)
	lat := w.latencies()
	r.res.BurstReadyP50S = round(percentile(lat, 0.50), 3)
	r.res.BurstReadyP99S = round(percentile(lat, 0.99), 3)
	r.logf("burst: all %d Ready after %.1fs (%.2f claims/s)", w.n, all, r.res.BurstClaimsPerS)

	ms := <-madec
	select {
	case err := <-interactiveErr:
		return err
	default:
	}
	it.expect(len(ms))
	select {
	case <-it.done:
	case err := <-errc:
		return err
	case <-time.After(r.cfg.ReadyTimeout):
		return fmt.Errorf("after %s, %d of %d claims in %s were Ready", r.cfg.ReadyTimeout, it.count(), len(ms), vsInteractiveNamespace)
	case <-ctx.Done():
		return ctx.Err()
	}
	seen := it.snapshot()
	var ilat []float64
	for _, m := range ms {
		ilat = append(ilat, seen[m.name].Sub(m.began).Seconds())
		if m.midBurst {
			r.res.BurstNewClaimsMidBurst++
		}
	}
	r.res.BurstNewClaims = len(ms)
	r.res.BurstNewClaimP50S = round(percentile(ilat, 0.50), 3)
	r.res.BurstNewClaimP99S = round(percentile(ilat, 0.99), 3)
	r.logf("burst: claims one at a time meanwhile: p50 %.2fs, p99 %.2fs (%d of %d created mid-burst)",
		r.res.BurstNewClaimP50S, r.res.BurstNewClaimP99S, r.res.BurstNewClaimsMidBurst, len(ms))
	return nil
}

// attribute reads the audit log's main-phase window: requests per claim
// by client, verb and resource, and the conflicts.
func (r *vsRun) attribute(win auditWindow) error {
	counts, err := readAudit(r.audit, []window{{name: "main", from: win.from, to: win.to}})
	if err != nil {
		return err
	}
	c := counts["main"]
	n := r.cfg.Claims
	isEngine := func(k auditKey) bool { return r.engineClients[k.Client] }
	all := func(auditKey) bool { return true }
	r.res.EngineRequestsPerClaim = round(c.sum(isEngine)/float64(n), 2)
	r.res.EngineWritesPerClaim = round(c.sum(func(k auditKey) bool { return isEngine(k) && isAuditWrite(k) })/float64(n), 2)
	r.res.EngineRequestsPerClaimByVerb = perClaim(c.by(isEngine, verbLabel), n)
	r.res.ProviderRequestsPerClaim = round(c.sum(func(k auditKey) bool { return k.Client == ClientProvider })/float64(n), 2)
	r.res.AllRequestsPerClaim = round(c.sum(all)/float64(n), 2)
	r.res.RequestsPerClaimByClient = perClaim(c.by(all, clientVerbRes), n)
	r.res.Conflicts = c.by(func(k auditKey) bool { return k.Code == 409 }, clientVerbRes)
	r.res.ConflictsTotal = c.sum(func(k auditKey) bool { return k.Code == 409 })
	return nil
}

// vsTable starts the side-by-side table of BENCHMARKS.md; rows are
// inserted below its last row.
const vsTableHeader = "| date | machine, load | commit | N | rounds | Crossplane claims/s | Loom claims/s | ratio (Loom/Crossplane) | p99 s X/L | engine requests/claim X/L | 409s X/L | apiserver CPU ms/claim X/L | engine RSS MiB X/L | steady new claim p99 s X/L | burst new claim p99 s X/L |"

// AppendVSRow adds rep's row to the side-by-side table of the Markdown
// file at path (which must have the table's header).
func AppendVSRow(path string, rep VSReport) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", path, err)
	}
	lines := strings.Split(string(b), "\n")
	at := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == vsTableHeader {
			at = i + 1
			for at < len(lines) && strings.HasPrefix(lines[at], "|") {
				at++
			}
			break
		}
	}
	if at < 0 {
		return fmt.Errorf("cannot add the side-by-side row to %s: no table with header %q", path, vsTableHeader)
	}
	lines = append(lines[:at], append([]string{vsRow(rep)}, lines[at:]...)...)
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644)
}

func vsRow(rep VSReport) string {
	x, l := rep.Summary[EngineCrossplane], rep.Summary[EngineLoom]
	sp := func(s Spread, digits int) string {
		f := fmt.Sprintf("%%.%df", digits)
		if s.Min == s.Max {
			return fmt.Sprintf(f, s.Min)
		}
		return fmt.Sprintf(f+"–"+f, s.Min, s.Max)
	}
	pair := func(a, b Spread, digits int) string { return sp(a, digits) + " / " + sp(b, digits) }
	var loads []string
	for _, r := range rep.Runs {
		if f := strings.Fields(r.LoadAvgAtStart); len(f) > 0 {
			loads = append(loads, f[0])
		}
	}
	m := rep.Machine
	return fmt.Sprintf("| %s | %d CPU, %.0f GiB, load %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |",
		rep.StartedAt.UTC().Format("2006-01-02 15:04"), m.NProc, m.MemoryGiB, strings.Join(loads, "/"), rep.Commit, rep.Claims, rep.Rounds,
		sp(x.ClaimsPerS, 2), sp(l.ClaimsPerS, 2), sp(rep.ClaimsPerSRatio, 2),
		pair(x.ReadyP99S, l.ReadyP99S, 1), pair(x.EngineRequestsPerClaim, l.EngineRequestsPerClaim, 1),
		pair(x.ConflictsTotal, l.ConflictsTotal, 0), pair(x.APIServerCPUPerClaimMs, l.APIServerCPUPerClaimMs, 0),
		pair(x.EnginePeakRSSMiB, l.EnginePeakRSSMiB, 0), pair(x.SteadyNewClaimP99S, l.SteadyNewClaimP99S, 2),
		pair(x.BurstNewClaimP99S, l.BurstNewClaimP99S, 2))
}
