package stack

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Namespace is where the stack creates the services' ServiceAccounts.
const Namespace = "loom-system"

// CrossplaneNamespace is created too: Crossplane manifests commonly write
// connection Secrets to it, and Crossplane users expect it to exist.
const CrossplaneNamespace = "crossplane-system"

// FieldManager is the server-side-apply field manager of objects the stack
// applies (CRDs, RBAC, examples).
const FieldManager = "loom-stack"

// DefaultServices are the processes a stack runs unless Options.Services
// says otherwise: Loom's four services, the RBAC manager (which grants the
// services their rights on every XRD's kinds), the admission component
// (the validating webhooks of Compositions and Usages, and the Usage
// controller) and the test provider.
var DefaultServices = []string{"watcher", "renderer", "binder", "secrets", "rbac-manager", "admission", "provider-nop"} //nolint:gochecknoglobals // Treated as a constant.

// Options configure Start. The zero value starts a complete local stack for
// the checkout containing the working directory.
type Options struct {
	// RepoRoot is the Loom checkout. Default: the nearest directory at or
	// above the working directory that holds go.work.
	RepoRoot string

	// StateDir holds everything the stack writes: etcd and JetStream data,
	// certificates, kubeconfigs and logs. Start clears what a previous run
	// left there, and refuses a StateDir another live stack is using.
	// Default: <RepoRoot>/.loom.
	StateDir string

	// BinDir holds the Loom binaries, one per entry of Services.
	// Default: $LOOM_BIN_DIR, else <RepoRoot>/bin.
	BinDir string

	// K8sBinDir holds etcd, kube-apiserver and kube-controller-manager.
	// Default: $LOOM_K8S_BIN_DIR, else <RepoRoot>/.cache/k8s/<KubernetesVersion>.
	K8sBinDir string

	// Kubeconfig, if set, names an existing cluster: no control plane is
	// started and the services run against that cluster (its current
	// context must be allowed to install CRDs and RBAC).
	Kubeconfig string

	// Services to run, each from <BinDir>/<name> under the ServiceAccount
	// loom-<name> in Namespace. Nil means DefaultServices; an empty,
	// non-nil slice runs none.
	Services []string

	// Replicas maps a service name to its replica count. Missing entries
	// mean one replica; zero means none.
	Replicas map[string]int

	// CRDDirs are folders of CustomResourceDefinitions to install and wait
	// for. Nil means <RepoRoot>/deploy/helm/loom/crds.
	CRDDirs []string

	// ExtraCRDDirs are further CRD folders, installed after CRDDirs. Nil
	// means <RepoRoot>/e2e/provider/crds (the test provider's NopResource).
	// Folders that do not exist are skipped.
	ExtraCRDDirs []string

	// RBACDir holds the services' roles: each service is bound to the
	// ClusterRoles and Roles in <RBACDir>/<name>.yaml, and every other
	// role in the folder (for example one that aggregates rights on a
	// provider's kinds into a service's role) is installed as well.
	// Default: <RepoRoot>/deploy/helm/loom/files/rbac.
	RBACDir string

	// Log receives progress lines ("etcd ready on 127.0.0.1:2379 (0.8s)").
	// Nil discards them.
	Log io.Writer

	// ServiceLog, if not nil, also receives the output of every service
	// replica, each line prefixed with "<service>-<replica> | ". Output of
	// every process always goes to <StateDir>/logs/<name>.log.
	ServiceLog io.Writer

	// GracePeriod is how long a process may take to exit after SIGTERM
	// before it gets SIGKILL. Default 10s.
	GracePeriod time.Duration

	// ReadyTimeout bounds each wait of start-up (a component becoming
	// healthy, CRDs becoming Established). Default 2m. The context passed
	// to Start bounds start-up as a whole.
	ReadyTimeout time.Duration

	// NATSServers is how many embedded NATS servers to run: 0 or 1 runs a
	// single server; 3 to 5 run a JetStream cluster over loopback routes,
	// and the services then keep every stream, consumer and bucket with
	// three replicas (LOOM_BUS_REPLICAS=3). Two is refused: a two-server
	// cluster loses its quorum with either server.
	NATSServers int

	// NATSMonitoring turns on each NATS server's HTTP monitoring endpoint
	// (/varz, /jsz, ...) on a free loopback port; NATSMonitorURLs lists
	// them. For observing the stack (make observe) and for scalers that read
	// consumer lag from it, as KEDA's nats-jetstream scaler does.
	NATSMonitoring bool

	// Env is added to the environment of every service replica (after the
	// stack's own variables, so it may override them), for example
	// OTEL_EXPORTER_OTLP_ENDPOINT to collect the services' traces.
	Env []string

	// NoMirror runs the services without the state plane: every worker
	// read is a GET. By default the watcher writes every object it watches
	// to the object mirror (watcher --mirror) and the workers read through
	// it (--mirror of the binder, renderer and secrets service), so that
	// they ask the API server only what the mirror cannot answer (e2e/bench
	// TestBenchMirror: a third of the reads, no more writes). Env may
	// override either variable.
	NoMirror bool

	// APIServerArgs are extra kube-apiserver flags, appended after the
	// stack's own (for a repeated flag the last one wins), for example an
	// audit policy for a benchmark that attributes requests to clients.
	// RestartAPIServer keeps them. Ignored when Kubeconfig is set.
	APIServerArgs []string
}

// ErrStateDirInUse is returned by Start when another live stack holds the
// state folder.
var ErrStateDirInUse = errors.New("state folder is in use by another stack")

// withDefaults returns o with every unset field filled in.
func (o Options) withDefaults() (Options, error) {
	if o.RepoRoot == "" {
		wd, err := os.Getwd()
		if err != nil {
			return o, fmt.Errorf("cannot get working directory: %w", err)
		}
		root, err := FindRepoRoot(wd)
		if err != nil {
			return o, err
		}
		o.RepoRoot = root
	}
	abs := func(p string) (string, error) {
		a, err := filepath.Abs(p)
		if err != nil {
			return "", fmt.Errorf("cannot resolve %s: %w", p, err)
		}
		return a, nil
	}
	var err error
	if o.RepoRoot, err = abs(o.RepoRoot); err != nil {
		return o, err
	}
	def := func(p *string, env, fallback string) error {
		if *p == "" && env != "" {
			*p = os.Getenv(env)
		}
		if *p == "" {
			*p = fallback
		}
		a, err := abs(*p)
		*p = a
		return err
	}
	k8sBin := ""
	if o.K8sBinDir == "" && os.Getenv("LOOM_K8S_BIN_DIR") == "" {
		if k8sBin, err = DefaultK8sBinDir(o.RepoRoot); err != nil {
			// Not a full checkout: Start then reports the binaries missing
			// from this folder, naming make control-plane.
			k8sBin = filepath.Join(o.RepoRoot, ".cache", "k8s")
		}
	}
	for _, d := range []struct {
		p        *string
		env      string
		fallback string
	}{
		{&o.StateDir, "", filepath.Join(o.RepoRoot, ".loom")},
		{&o.BinDir, "LOOM_BIN_DIR", filepath.Join(o.RepoRoot, "bin")},
		{&o.K8sBinDir, "LOOM_K8S_BIN_DIR", k8sBin},
		{&o.RBACDir, "", filepath.Join(o.RepoRoot, "deploy", "helm", "loom", "files", "rbac")},
	} {
		if err := def(d.p, d.env, d.fallback); err != nil {
			return o, err
		}
	}
	if o.Services == nil {
		o.Services = DefaultServices
	}
	if o.CRDDirs == nil {
		o.CRDDirs = []string{filepath.Join(o.RepoRoot, "deploy", "helm", "loom", "crds")}
	}
	if o.ExtraCRDDirs == nil {
		o.ExtraCRDDirs = []string{filepath.Join(o.RepoRoot, "e2e", "provider", "crds")}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.GracePeriod <= 0 {
		o.GracePeriod = 10 * time.Second
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if o.NATSServers < 0 || o.NATSServers == 2 || o.NATSServers > 5 {
		return o, fmt.Errorf("cannot run %d NATS servers: want 1, or 3 to 5 for a cluster", o.NATSServers)
	}
	for name, n := range o.Replicas {
		if n < 0 {
			return o, fmt.Errorf("cannot run %d replicas of %s", n, name)
		}
	}
	return o, nil
}

// mirrorEnv returns the environment that turns the state plane on in every
// service (each reads only its own variable), or, with NoMirror, off
// whatever the stack's own environment says.
func (o Options) mirrorEnv() []string {
	on := strconv.FormatBool(!o.NoMirror)
	return []string{"LOOM_WATCHER_MIRROR=" + on, "LOOM_MIRROR=" + on}
}

// replicas returns how many replicas of service to run.
func (o Options) replicas(service string) int {
	if n, ok := o.Replicas[service]; ok {
		return n
	}
	return 1
}

// FindRepoRoot returns the nearest directory at or above dir that contains
// go.work, that is the root of a Loom checkout.
func FindRepoRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("cannot resolve %s: %w", dir, err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("cannot find the Loom checkout: no go.work at or above %s", dir)
		}
		d = parent
	}
}
