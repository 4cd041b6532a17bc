//go:build e2e

package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A Result is what one benchmark run measured. Per-claim figures divide by
// Claims. JSON names are the ones issue 10 asks for.
type Result struct {
	// Name says which variant ran ("renderer=1 binder=1", ...).
	Name string `json:"name"`
	// StartedAt is when the run began.
	StartedAt time.Time `json:"started_at"`
	// Replicas of each service, as given to the stack (missing means 1).
	Replicas map[string]int `json:"replicas"`
	// NATSServers is the size of the NATS cluster (1: a single server).
	NATSServers int `json:"nats_servers"`
	// JetStream is what the NATS servers' JetStream held once every claim
	// was Ready and the system quiet: the store on disk, the object
	// mirror's entries and bytes.
	JetStream *JetStreamUsage `json:"jetstream,omitempty"`
	// ServiceFlags are extra flags the services ran with (experiments).
	ServiceFlags map[string][]string `json:"service_flags,omitempty"`

	// Claims created; ClaimsReady of them reached Ready.
	Claims      int `json:"claims"`
	ClaimsReady int `json:"claims_ready"`
	// Creators is the number of concurrent claim creators.
	Creators int `json:"creators"`
	// CreateSeconds is how long creating every claim took; CreatesPerS the
	// rate the API server accepted them at.
	CreateSeconds float64 `json:"create_seconds"`
	CreatesPerS   float64 `json:"creates_per_s"`
	// SecondsToAllReady runs from the first create to the last claim seen
	// Ready; ClaimsPerS is Claims divided by it.
	SecondsToAllReady float64 `json:"seconds_to_all_ready"`
	ClaimsPerS        float64 `json:"claims_per_s"`
	// SecondsToComplete runs from the first create until, beyond every
	// claim being Ready, every database's reference is resolved and every
	// claim's connection Secret published (a claim may turn Ready first).
	SecondsToComplete float64 `json:"seconds_to_complete"`

	// Claim creation to claim Ready from the objects (creationTimestamp to
	// the Ready condition's lastTransitionTime; whole seconds).
	ReadyP50S float64 `json:"ready_p50_s"`
	ReadyP99S float64 `json:"ready_p99_s"`
	ReadyMaxS float64 `json:"ready_max_s"`
	// The same from the harness's clock (create call returned to Ready
	// first seen by a watch; milliseconds).
	ReadyObservedP50S float64 `json:"ready_observed_p50_s"`
	ReadyObservedP99S float64 `json:"ready_observed_p99_s"`
	// XR Ready minus the latest Ready of its composed resources, from the
	// conditions (whole seconds, so each value is off by up to a second)
	// and from the harness's watches (milliseconds).
	EngineAddedP50S         float64 `json:"engine_added_p50_s"`
	EngineAddedP99S         float64 `json:"engine_added_p99_s"`
	EngineAddedObservedP50S float64 `json:"engine_added_observed_p50_s"`
	EngineAddedObservedP99S float64 `json:"engine_added_observed_p99_s"`
	// EngineAddedObservedSlowest are the five XRs whose engine-added time
	// (observed) was longest, by name: where to start a timeline
	// (loombench -timeline).
	EngineAddedObservedSlowest map[string]float64 `json:"engine_added_observed_slowest,omitempty"`
	// ClaimToXRReadyObservedP99S is the claim's Ready minus its XR's, both
	// seen by the harness's watches: the binder's share of the latency.
	ClaimAfterXRObservedP99S float64 `json:"claim_after_xr_observed_p99_s"`

	// Attribution says how requests were attributed to clients: "audit"
	// (the API server's audit log, by user) or "metrics" (only the API
	// server's counters, so Loom's figures include the provider's).
	Attribution string `json:"attribution"`
	// APIWritesPerClaim are Loom's writes (watcher, binder, renderer,
	// secrets) per claim, from the first create until the system was quiet
	// after every claim was Ready; APIReadsPerClaim its reads.
	APIWritesPerClaim       float64            `json:"api_writes_per_claim"`
	APIReadsPerClaim        float64            `json:"api_reads_per_claim"`
	APIWritesPerClaimByVerb map[string]float64 `json:"api_writes_per_claim_by_verb"`
	APIReadsPerClaimByVerb  map[string]float64 `json:"api_reads_per_claim_by_verb"`
	// APIWritesPerClaimByClient and APIReadsPerClaimByClient attribute
	// every client's requests ("<client>: <verb> <resource>"), the load
	// generator's claim creates and the provider's writes included.
	APIWritesPerClaimByClient map[string]float64 `json:"api_writes_per_claim_by_client"`
	APIReadsPerClaimByClient  map[string]float64 `json:"api_reads_per_claim_by_client"`
	// LoadGeneratorWritesPerClaim is the harness's own creates (1).
	LoadGeneratorWritesPerClaim float64 `json:"load_generator_writes_per_claim"`
	// ProviderWritesPerClaim are the test provider's writes.
	ProviderWritesPerClaim float64 `json:"provider_writes_per_claim"`
	// AllWritesPerClaimMetrics counts every write the API server's
	// counters saw in the same interval (background lease renewals
	// excluded), load generator and provider included: a cross-check.
	AllWritesPerClaimMetrics float64 `json:"all_writes_per_claim_metrics"`
	// MetricsWritesByVerb splits AllWritesPerClaimMetrics by the API
	// server's verb labels, which tell apply from other patches.
	MetricsWritesPerClaimByVerb map[string]float64 `json:"metrics_writes_per_claim_by_verb"`
	// Conflicts are 409 responses, by client and request; Throttled 429s;
	// ServerErrors 5xx, all in the same interval.
	Conflicts    map[string]float64 `json:"conflicts"`
	Throttled    float64            `json:"throttled"`
	ServerErrors float64            `json:"server_errors"`

	// RawCeilingWritesPerS is how many NopResource creates per second
	// RawCeilingCreators concurrent clients got from the API server over
	// RawCeilingSeconds, with nothing else writing.
	RawCeilingWritesPerS float64 `json:"raw_ceiling_writes_per_s"`
	RawCeilingSeconds    float64 `json:"raw_ceiling_seconds"`
	RawCeilingCreators   int     `json:"raw_ceiling_creators"`
	RawCeilingErrors     int     `json:"raw_ceiling_errors"`
	// RawCeilingCPUMsPerWrite is the CPU time kube-apiserver and etcd
	// spent per create during the ceiling: the cost of one write, to
	// compare with CPUMsPerClaim.
	RawCeilingCPUMsPerWrite map[string]float64 `json:"raw_ceiling_cpu_ms_per_write"`
	// RawCeilingCPUShare is the stack's share of the machine's CPU during
	// the ceiling (see CPUShare).
	RawCeilingCPUShare float64 `json:"raw_ceiling_cpu_share"`
	// LoomWritesPerS are Loom's writes per second from the first create
	// until every claim was Ready; Efficiency divides it by the ceiling.
	LoomWritesPerS float64 `json:"loom_writes_per_s"`
	Efficiency     float64 `json:"efficiency"`
	// SystemWritesPerS and SystemEfficiency count every write in the same
	// interval: Loom's, the provider's and the load generator's.
	SystemWritesPerS float64 `json:"system_writes_per_s"`
	SystemEfficiency float64 `json:"system_efficiency"`

	// PeakRSSMB is the peak resident memory (VmHWM) of each service, the
	// largest of its replicas, in MiB; PeakRSSMBByProcess per process
	// (replica), the control plane and the harness included.
	PeakRSSMB          map[string]float64 `json:"peak_rss_mb"`
	PeakRSSMBByProcess map[string]float64 `json:"peak_rss_mb_by_process"`
	// CPUSecondsByProcess is the CPU time each process used from the first
	// create until the system was quiet; CPUMsPerClaim the same per claim.
	CPUSecondsByProcess map[string]float64 `json:"cpu_seconds_by_process"`
	CPUMsPerClaim       map[string]float64 `json:"cpu_ms_per_claim"`
	// CPUShare is the CPU time of the stack's processes (harness
	// included) over the same interval divided by the machine's capacity
	// (seconds × nproc): well below 1 while the machine sat idle, or while
	// other programs took the rest; LoadAvgDuringRun (1, 5 and 15 minutes,
	// read when the system was quiet) tells which.
	CPUShare         float64 `json:"cpu_share"`
	LoadAvgDuringRun string  `json:"load_avg_during_run"`

	// BusMsgsPerClaim are the messages Loom's work streams stored per
	// claim (deduplicated publishes not counted); BusMsgsByStream in total.
	BusMsgsPerClaim float64           `json:"bus_msgs_per_claim"`
	BusMsgsByStream map[string]uint64 `json:"bus_msgs_by_stream"`
	// BusMaxPending is the largest backlog of each work stream seen while
	// waiting for the claims (sampled every 5 s): where the work queued.
	BusMaxPending map[string]uint64 `json:"bus_max_pending"`
	// PeriodicResyncsDuringRun counts the watcher's periodic full resyncs
	// (every 10 minutes ± 20 % by default) between the first create and
	// the quiet after the last Ready; each adds events and reads.
	PeriodicResyncsDuringRun int `json:"periodic_resyncs_during_run"`

	// ResyncAPIWrites are the writes of Loom and the provider caused by a
	// full resync (the watcher restarted) once every claim was Ready; it
	// must be 0. ResyncEventsPublished says how many events the resync put
	// on the bus (0 would make the check vacuous).
	ResyncAPIWrites         float64            `json:"resync_api_writes"`
	ResyncAPIWritesByClient map[string]float64 `json:"resync_api_writes_by_client,omitempty"`
	// ResyncEventSeriesWrites are patches of Events during the resync
	// while no Event occurred: client-go's broadcaster closing a series
	// on its own timer. They are listed by client but not counted in
	// ResyncAPIWrites.
	ResyncEventSeriesWrites float64            `json:"resync_event_series_writes,omitempty"`
	ResyncAPIReads          float64            `json:"resync_api_reads"`
	ResyncAPIReadsByClient  map[string]float64 `json:"resync_api_reads_by_client,omitempty"`
	ResyncEventsPublished   uint64             `json:"resync_events_published"`
	// ResyncEventsConsumed are the events the services handled in the
	// resync's window: those published, plus those a periodic resync had
	// left queued (whose duplicates the restart's are), minus those still
	// queued at its end.
	ResyncEventsConsumed int64 `json:"resync_events_consumed"`
	// ResyncKubeEvents are the Kubernetes Events recorded during the
	// resync (each one a write).
	ResyncKubeEvents []string `json:"resync_kube_events,omitempty"`
	ResyncSeconds    float64  `json:"resync_seconds"`
	// ResyncCPUMsPerRead is the CPU time kube-apiserver and etcd spent
	// during the resync divided by the reads in it: the cost of one read
	// (the resync writes nothing), to compare with RawCeilingCPUMsPerWrite.
	// The reads counted are all of the API server's (its counters), so
	// that the figure does not depend on the audit log.
	ResyncCPUMsPerRead map[string]float64 `json:"resync_cpu_ms_per_read,omitempty"`

	// Correctness checks at the end: claims with their connection Secret,
	// XRs with three composed resources, databases whose network
	// reference was resolved.
	ClaimSecrets       int `json:"claim_secrets"`
	CompleteXRs        int `json:"complete_xrs"`
	ResolvedReferences int `json:"resolved_references"`
	// ComposedShapes counts the composed resources of the measured XRs by
	// shape: the template's role and the resource's spec.forProvider and
	// spec.writeConnectionSecretToRef as JSON, with the XR's name and UID
	// replaced by <xr> and <uid>. Two runs that composed the same
	// resources have the same shapes, whatever the generated names.
	ComposedShapes map[string]int `json:"composed_shapes,omitempty"`

	// Machine, commit and toolchain.
	Machine Machine `json:"machine"`
	Commit  string  `json:"commit"`
	// Notes are what the harness noticed that qualifies the figures.
	Notes []string `json:"notes,omitempty"`
}

// Machine describes where the benchmark ran.
type Machine struct {
	NProc          int     `json:"nproc"`
	MemoryGiB      float64 `json:"memory_gib"`
	CPUModel       string  `json:"cpu_model"`
	Kernel         string  `json:"kernel"`
	GoVersion      string  `json:"go_version"`
	LoadAvgAtStart string  `json:"load_avg_at_start"`
}

// A Report is what `make bench` writes: the first run's figures at the top
// level, every run, and the ratios between runs when there are several.
type Report struct {
	Result
	Runs []Result `json:"runs,omitempty"`
	// ScaleRatio is claims/s with renderer and binder at 3 replicas divided
	// by claims/s at 1 (make bench SCALE=1).
	ScaleRatio float64 `json:"scale_ratio,omitempty"`
	// NATSClusterRatio is claims/s on a NATS cluster divided by claims/s on
	// one server.
	NATSClusterRatio float64 `json:"nats_cluster_ratio,omitempty"`
}

// machineInfo describes this machine.
func machineInfo() Machine {
	m := Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kib, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
				m.MemoryGiB = round(kib/1024/1024, 1)
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.LoadAvgAtStart = loadAvg()
	return m
}

// loadAvg returns the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// commitOf returns the checked-out commit of repo, with "-dirty" when
// tracked files differ from it.
func commitOf(repo string) string {
	out, err := exec.Command("git", "-C", repo, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", repo, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "-dirty"
	}
	return c
}

// WriteJSON writes v, indented, to path (through a temporary file).
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode results: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path+".tmp", append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

// benchmarksTable starts the results table of BENCHMARKS.md when the file
// does not exist yet; rows are appended below it.
const benchmarksTable = `# Benchmarks

| date | machine | commit | N | r/b | all Ready s | claims/s | p50/p99 s | engine p99 s | writes/claim | reads/claim | ceiling w/s | efficiency | watcher MiB | bus msgs/claim | resync writes | CPU share, load | notes |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
`

// AppendBenchmarksRow appends r's row to the table of the Markdown file at
// path, creating the file with its header if needed.
func AppendBenchmarksRow(path string, r Result) error {
	if _, err := os.Stat(path); os.IsNotExist(err) {
		if err := os.WriteFile(path, []byte(benchmarksTable), 0o644); err != nil {
			return fmt.Errorf("cannot create %s: %w", path, err)
		}
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("cannot open %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.WriteString(benchmarksRow(r) + "\n"); err != nil {
		return fmt.Errorf("cannot append to %s: %w", path, err)
	}
	return nil
}

func benchmarksRow(r Result) string {
	rep := func(s string) int {
		if n, ok := r.Replicas[s]; ok {
			return n
		}
		return 1
	}
	m := r.Machine
	machine := fmt.Sprintf("%d CPU, %.0f GiB, %s", m.NProc, m.MemoryGiB, m.GoVersion)
	if r.NATSServers > 1 {
		machine += fmt.Sprintf(", NATS×%d", r.NATSServers)
	}
	var notes []string
	for _, svc := range sortedKeys(r.ServiceFlags) {
		notes = append(notes, svc+" "+strings.Join(r.ServiceFlags[svc], " "))
	}
	if r.SecondsToComplete > r.SecondsToAllReady {
		notes = append(notes, fmt.Sprintf("references and claim Secrets complete after %.0f s", r.SecondsToComplete))
	}
	if r.Attribution != "audit" {
		notes = append(notes, "no audit log: writes/claim include the provider's")
	}
	return fmt.Sprintf("| %s | %s | %s | %d | %d/%d | %.1f | %.2f | %.0f/%.0f | %.2f | %.2f | %.1f | %.0f | %.3f | %.0f | %.1f | %.0f | %.2f, %s | %s |",
		r.StartedAt.UTC().Format("2006-01-02 15:04"), machine, r.Commit, r.Claims, rep("renderer"), rep("binder"),
		r.SecondsToAllReady, r.ClaimsPerS, r.ReadyP50S, r.ReadyP99S, r.EngineAddedObservedP99S,
		r.APIWritesPerClaim, r.APIReadsPerClaim, r.RawCeilingWritesPerS, r.Efficiency,
		r.PeakRSSMB["watcher"], r.BusMsgsPerClaim, r.ResyncAPIWrites, r.CPUShare, r.LoadAvgDuringRun, strings.Join(notes, "; "))
}

// percentile returns the p-th percentile (0 < p <= 1, nearest rank) of xs,
// or 0 for none.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// round rounds f to digits decimal places.
func round(f float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(f*p) / p
}

// perClaim divides every value of m by n, rounded to two places, dropping
// zeros.
func perClaim(m map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if r := round(v/float64(n), 2); r != 0 {
			out[k] = r
		}
	}
	return out
}
