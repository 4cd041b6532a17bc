// Command watcher is Loom's watcher service: it lists and watches the API server and publishes change events to JetStream.
// main only wires the shared runtime (pkg/service); behaviour lives in
// internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"sync/atomic"
	"time"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/mirror"
	"github.com/loomxr/loom/pkg/service"
	"github.com/loomxr/loom/services/watcher/internal/watch"
)

// flags are the watcher's own flags, beyond the standard ones.
type flags struct {
	resyncPeriod time.Duration
	syncTimeout  time.Duration
	composedWait time.Duration
	mirror       bool
	crashFile    string
	bus          bus.Flags
	kube         service.KubeFlags
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.resyncPeriod, "resync-period", service.EnvDuration("LOOM_RESYNC_PERIOD", watch.DefaultResyncPeriod),
		"mean time between full resyncs, varied by ±20%; 0 disables them (env LOOM_RESYNC_PERIOD)")
	fs.DurationVar(&f.syncTimeout, "sync-timeout", service.EnvDuration("LOOM_SYNC_TIMEOUT", watch.DefaultSyncTimeout),
		"how long to wait for initial lists before publishing the initial resync (env LOOM_SYNC_TIMEOUT)")
	fs.DurationVar(&f.composedWait, "composed-wait", service.EnvDuration("LOOM_WATCHER_COMPOSED_WAIT", watch.DefaultComposedWait),
		"with --mirror: how long, at most, a change of an XR's spec waits for the composed resources it names to be mirrored before it reaches the secrets service and the binder; 0 for not at all (env LOOM_WATCHER_COMPOSED_WAIT)")
	fs.BoolVar(&f.mirror, "mirror", service.EnvBool("LOOM_WATCHER_MIRROR", false),
		"write every watched object but Secrets to the object mirror (JetStream bucket "+mirror.Bucket+") before publishing its events (env LOOM_WATCHER_MIRROR)")
	fs.StringVar(&f.crashFile, "fault-crash-file", os.Getenv("LOOM_WATCHER_FAULT_CRASH_FILE"),
		"for chaos tests only: whenever this file exists as a live change has been written to the mirror and not yet published, remove it and exit at once (env LOOM_WATCHER_FAULT_CRASH_FILE)")
	f.bus.Register(fs)
	f.kube.Register(fs, "LOOM_WATCHER", 200, 400)
}

func main() {
	var f flags
	service.Main("watcher", f.run, f.register)
}

// run wires the service from the parsed flags and runs it until ctx ends.
func (f *flags) run(ctx context.Context, rt *service.Runtime) error {
	// Not ready until the watcher has synced and published its initial resync;
	// registered first, so that /readyz never answers 200 before.
	var w atomic.Pointer[watch.Watcher]
	rt.AddReadinessCheck("watcher", func(ctx context.Context) error {
		if p := w.Load(); p != nil {
			return p.Ready(ctx)
		}
		return errors.New("not started")
	})

	b, err := rt.Bus(ctx, f.bus.Config())
	if err != nil {
		return err
	}
	kv, err := b.WatchRequests(ctx)
	if err != nil {
		return err
	}
	kc, err := kube.NewClients(f.kube.Config(rt.REST))
	if err != nil {
		return err
	}

	opts := []watch.Option{
		watch.WithLogger(rt.Log),
		watch.WithResyncPeriod(f.resyncPeriod),
		watch.WithSyncTimeout(f.syncTimeout),
		watch.WithComposedWait(f.composedWait),
		watch.WithWatchRequests(kv),
		watch.WithCrashFile(f.crashFile),
	}
	if f.mirror {
		mkv, err := b.Mirror(ctx)
		if err != nil {
			return err
		}
		opts = append(opts, watch.WithMirror(mirror.NewWriter(b.JS, mkv)))
	}
	wt := watch.New(kc.Dynamic, kc.Metadata, kc.Discovery, b.Publisher, opts...)
	w.Store(wt)
	return wt.Run(ctx)
}
