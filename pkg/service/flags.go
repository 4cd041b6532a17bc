package service

import (
	"flag"
	"os"
	"runtime/debug"

	"k8s.io/client-go/rest"

	"github.com/loomxr/loom/pkg/bus"
)

// KubeFlags are the rate limits of a service's Kubernetes clients:
// --kube-qps and --kube-burst, whose environment variables carry the
// service's prefix (LOOM_BINDER_KUBE_QPS, ...).
type KubeFlags struct {
	QPS   float64
	Burst int
}

// Register adds the flags to fs, defaulting to the environment variables
// <env>_KUBE_QPS and <env>_KUBE_BURST, then to qps and burst.
func (f *KubeFlags) Register(fs *flag.FlagSet, env string, qps float64, burst int) {
	fs.Float64Var(&f.QPS, "kube-qps", EnvFloat(env+"_KUBE_QPS", qps), "Kubernetes client queries per second (env "+env+"_KUBE_QPS)")
	fs.IntVar(&f.Burst, "kube-burst", EnvInt(env+"_KUBE_BURST", burst), "Kubernetes client burst (env "+env+"_KUBE_BURST)")
}

// Config returns a copy of base with the flags' rate limits; base is not
// changed.
func (f KubeFlags) Config(base *rest.Config) *rest.Config {
	rc := rest.CopyConfig(base)
	rc.QPS, rc.Burst = float32(f.QPS), f.Burst
	return rc
}

// WorkerFlags are the flags of a service that consumes work from the bus:
// the bus's layout (bus.Flags), the worker's scheduling
// (bus.SchedulingFlags), --concurrency, whose environment variable
// carries the service's prefix (LOOM_BINDER_CONCURRENCY, ...), and --mirror
// (env LOOM_MIRROR, shared by every worker, like the bus's layout).
type WorkerFlags struct {
	Bus         bus.Flags
	Scheduling  bus.SchedulingFlags
	Concurrency int
	// Mirror reads objects through the object mirror (Bus.ReadOptions).
	// Off by default: the watcher must run with --mirror too, or every
	// read falls back to the API server after a wasted look at an empty
	// bucket.
	Mirror bool
	// GOGC is the garbage collector's target percentage (runtime/debug
	// SetGCPercent), applied by Options: --gogc, env GOGC, default
	// DefaultWorkerGOGC; negative turns the collector off, 0 (the zero
	// value) leaves the runtime's setting alone.
	GOGC int
}

// DefaultWorkerGOGC is a worker's default garbage collection target. A
// worker's live heap is small (its caches are bounded) and most of what it
// allocates, decoded objects and rendered intents, is garbage a moment
// later: at Go's default of 100 the collector was 13–20 % of each worker's
// CPU under `make bench`. Collecting half as often costs a few MiB.
const DefaultWorkerGOGC = 200

// Register adds the flags to fs; --concurrency defaults to the environment
// variable <env>_CONCURRENCY, then to concurrency.
func (f *WorkerFlags) Register(fs *flag.FlagSet, env string, concurrency int) {
	f.Bus.Register(fs)
	f.Scheduling.Register(fs)
	fs.IntVar(&f.Concurrency, "concurrency", EnvInt(env+"_CONCURRENCY", concurrency),
		"targets handled at once by this replica (env "+env+"_CONCURRENCY)")
	fs.BoolVar(&f.Mirror, "mirror", EnvBool("LOOM_MIRROR", false),
		"read objects from this replica's own writes and the object mirror the watcher writes (watcher --mirror) before asking the API server (env LOOM_MIRROR)")
	fs.IntVar(&f.GOGC, "gogc", envGOGC(DefaultWorkerGOGC),
		"garbage collection target percentage; negative turns the collector off, 0 leaves the Go runtime's (env GOGC, as the Go runtime reads it: a number or off)")
}

// envGOGC returns the environment's GOGC as the Go runtime reads it ("off"
// is -1), or def when it is unset or not a number.
func envGOGC(def int) int {
	if os.Getenv("GOGC") == "off" {
		return -1
	}
	return EnvInt("GOGC", def)
}

// Options returns the Worker options the flags ask for, or an error naming
// the flag that is invalid. It also sets the process's garbage collection
// target (--gogc): a worker calls it once, at start.
func (f WorkerFlags) Options() ([]bus.WorkerOption, error) {
	opts, err := f.Scheduling.Options()
	if err != nil {
		return nil, err
	}
	if f.GOGC != 0 {
		debug.SetGCPercent(f.GOGC)
	}
	return append(opts, bus.WithConcurrency(f.Concurrency)), nil
}
