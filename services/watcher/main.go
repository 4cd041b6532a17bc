// Command watcher is Loom's watcher service: it lists and watches the API server and publishes change events to JetStream.
// main only wires the shared runtime (pkg/service); behaviour lives in
// internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/service"
	"github.com/loomxr/loom/pkg/watchreq"
	"github.com/loomxr/loom/services/watcher/internal/watch"
)

// flags are the watcher's own flags, beyond the standard ones.
type flags struct {
	resyncPeriod time.Duration
	syncTimeout  time.Duration
	busReplicas  int
	partitions   int
	qps          float64
	burst        int
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.resyncPeriod, "resync-period", service.EnvDuration("LOOM_RESYNC_PERIOD", watch.DefaultResyncPeriod),
		"mean time between full resyncs, varied by ±20%; 0 disables them (env LOOM_RESYNC_PERIOD)")
	fs.DurationVar(&f.syncTimeout, "sync-timeout", service.EnvDuration("LOOM_SYNC_TIMEOUT", watch.DefaultSyncTimeout),
		"how long to wait for initial lists before publishing the initial resync (env LOOM_SYNC_TIMEOUT)")
	fs.IntVar(&f.busReplicas, "bus-replicas", service.EnvInt("LOOM_BUS_REPLICAS", bus.DefaultReplicas),
		"replicas of JetStream streams and buckets: 1 on a single server, 3 on a cluster (env LOOM_BUS_REPLICAS)")
	fs.IntVar(&f.partitions, "bus-partitions", service.EnvInt("LOOM_BUS_PARTITIONS", bus.DefaultPartitions),
		"partitions of each work stream; the same for every service (env LOOM_BUS_PARTITIONS)")
	fs.Float64Var(&f.qps, "kube-qps", service.EnvFloat("LOOM_WATCHER_KUBE_QPS", 200), "Kubernetes client queries per second (env LOOM_WATCHER_KUBE_QPS)")
	fs.IntVar(&f.burst, "kube-burst", service.EnvInt("LOOM_WATCHER_KUBE_BURST", 400), "Kubernetes client burst (env LOOM_WATCHER_KUBE_BURST)")
}

func main() {
	var f flags
	service.Main("watcher", func(ctx context.Context, rt *service.Runtime) error {
		return run(ctx, rt, f)
	}, f.register)
}

func run(ctx context.Context, rt *service.Runtime, f flags) error {
	// Not ready until the watcher has synced and published its initial resync;
	// registered first, so that /readyz never answers 200 before.
	var w atomic.Pointer[watch.Watcher]
	rt.AddReadinessCheck("watcher", func(ctx context.Context) error {
		if p := w.Load(); p != nil {
			return p.Ready(ctx)
		}
		return errors.New("not started")
	})

	js, err := jetstream.New(rt.NATS)
	if err != nil {
		return fmt.Errorf("cannot create JetStream context: %w", err)
	}
	cfg := bus.Config{Replicas: f.busReplicas, Partitions: f.partitions}
	var kv jetstream.KeyValue
	err = retry(ctx, func() error {
		if err := bus.EnsureStreams(ctx, js, cfg); err != nil {
			return err
		}
		kv, err = watchreq.EnsureBucket(ctx, js, f.busReplicas)
		return err
	}, func(err error, d time.Duration) {
		rt.Log.Warn("cannot set up JetStream yet; retrying", "err", err, "retryIn", d)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	rc := rest.CopyConfig(rt.REST)
	rc.QPS, rc.Burst = float32(f.qps), f.burst
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("cannot create dynamic client: %w", err)
	}
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("cannot create metadata client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return fmt.Errorf("cannot create discovery client: %w", err)
	}

	pub := bus.NewPublisher(js, bus.WithConfig(cfg), bus.WithLogger(rt.Log),
		bus.WithSource("watcher/"+rt.Config.ReplicaID))
	wt := watch.New(dyn, md, disc, pub,
		watch.WithLogger(rt.Log),
		watch.WithResyncPeriod(f.resyncPeriod),
		watch.WithSyncTimeout(f.syncTimeout),
		watch.WithWatchRequests(kv),
	)
	w.Store(wt)
	err = wt.Run(ctx)

	// Let what was published reach JetStream before the runtime drains NATS.
	fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ferr := pub.Flush(fctx); ferr != nil {
		rt.Log.Warn("some events may not have been stored", "err", ferr)
	}
	return err
}

// retry calls f with exponential backoff until it succeeds or ctx ends.
func retry(ctx context.Context, f func() error, notify func(error, time.Duration)) error {
	bo := backoff.NewExponentialBackOff(backoff.WithMaxInterval(5*time.Second), backoff.WithMaxElapsedTime(0))
	err := backoff.RetryNotify(f, backoff.WithContext(bo, ctx), notify)
	if err != nil && ctx.Err() != nil {
		return errors.Join(err, ctx.Err())
	}
	return err
}
