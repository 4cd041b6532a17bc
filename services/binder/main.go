// Command binder is Loom's binder service: it binds claims to composite resources and resolves references between composed resources.
// main only wires the shared runtime (pkg/service); behaviour lives in
// internal/.
//
// An XRD may name a ServiceAccount (spec.serviceAccountRef): the binder then
// writes the resolved references of its XRs' composed resources while
// impersonating that account (object.Impersonator, one client per account),
// so RBAC decides what may be written; it reads, and writes claims and XRs,
// as itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/events"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/event"
	"github.com/loomxr/loom/pkg/service"
	"github.com/loomxr/loom/pkg/xrd"
	"github.com/loomxr/loom/services/binder/internal/claim"
	"github.com/loomxr/loom/services/binder/internal/object"
	"github.com/loomxr/loom/services/binder/internal/reference"
	"github.com/loomxr/loom/services/binder/internal/route"
)

// flags are the binder's own flags, beyond the standard ones.
type flags struct {
	busReplicas  int
	partitions   int
	sched        bus.SchedulingFlags
	concurrency  int
	qps          float64
	burst        int
	ruleTTL      time.Duration
	externalPoll time.Duration
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.busReplicas, "bus-replicas", service.EnvInt("LOOM_BUS_REPLICAS", bus.DefaultReplicas),
		"replicas of JetStream streams and buckets: 1 on a single server, 3 on a cluster (env LOOM_BUS_REPLICAS)")
	fs.IntVar(&f.partitions, "bus-partitions", service.EnvInt("LOOM_BUS_PARTITIONS", bus.DefaultPartitions),
		"partitions of each work stream; the same for every service (env LOOM_BUS_PARTITIONS)")
	f.sched.Register(fs)
	fs.IntVar(&f.concurrency, "concurrency", service.EnvInt("LOOM_BINDER_CONCURRENCY", 16),
		"targets handled at once by this replica (env LOOM_BINDER_CONCURRENCY)")
	fs.Float64Var(&f.qps, "kube-qps", service.EnvFloat("LOOM_BINDER_KUBE_QPS", 200), "Kubernetes client queries per second (env LOOM_BINDER_KUBE_QPS)")
	fs.IntVar(&f.burst, "kube-burst", service.EnvInt("LOOM_BINDER_KUBE_BURST", 400), "Kubernetes client burst (env LOOM_BINDER_KUBE_BURST)")
	fs.DurationVar(&f.ruleTTL, "rule-ttl", service.EnvDuration("LOOM_BINDER_RULE_TTL", time.Minute),
		"how long cached reference rules are used before they are listed again; a rule change reloads them at once (env LOOM_BINDER_RULE_TTL)")
	fs.DurationVar(&f.externalPoll, "external-poll", service.EnvDuration("LOOM_BINDER_EXTERNAL_POLL", 30*time.Second),
		"how long to wait before looking again at a reference that waits for a resource the composite resource does not control (env LOOM_BINDER_EXTERNAL_POLL)")
}

func main() {
	var f flags
	service.Main("binder", func(ctx context.Context, rt *service.Runtime) error {
		return run(ctx, rt, f)
	}, f.register)
}

func run(ctx context.Context, rt *service.Runtime, f flags) error {
	js, err := jetstream.New(rt.NATS)
	if err != nil {
		return fmt.Errorf("cannot create JetStream context: %w", err)
	}
	cfg := bus.Config{Replicas: f.busReplicas, Partitions: f.partitions}
	err = retry(ctx, func() error { return bus.EnsureStreams(ctx, js, cfg) }, func(err error, d time.Duration) {
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
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("cannot create clientset: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	c := object.New(dyn, md, mapper, claim.FieldManager)
	imp := object.NewImpersonator(rc, mapper, claim.FieldManager)

	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("cannot start recording events: %w", err)
	}
	defer broadcaster.Shutdown()
	rec := event.NewAPIRecorder(broadcaster.NewRecorder(runtime.NewScheme(), claim.FieldManager))

	defs := xrd.NewIndex(c)
	rules := reference.NewRules(c, f.ruleTTL)
	pub := bus.NewPublisher(js, bus.WithConfig(cfg), bus.WithLogger(rt.Log), bus.WithSource("binder/"+rt.Config.ReplicaID))
	h := route.NewHandler(defs,
		claim.NewReconciler(c, defs, claim.WithLogger(rt.Log), claim.WithRecorder(rec)),
		reference.NewReconciler(c, rules, reference.WithLogger(rt.Log), reference.WithRecorder(rec), reference.WithExternalPoll(f.externalPoll),
			reference.WithImpersonation(defs, func(user string) (reference.Writer, error) {
				w, err := imp.As(user)
				if err != nil {
					return nil, err
				}
				return w, nil
			})),
		reference.NewFanOut(rules, c, pub, bus.Binder),
		rt.Log,
	)
	schedOpts, err := f.sched.Options()
	if err != nil {
		return err
	}
	w, err := bus.NewWorker(rt.NATS, js, bus.Binder, rt.Config.ReplicaID, h,
		append([]bus.WorkerOption{bus.WithConfig(cfg), bus.WithLogger(rt.Log), bus.WithConcurrency(f.concurrency)}, schedOpts...)...)
	if err != nil {
		return err
	}
	rt.AddReadinessCheck("worker", func(context.Context) error {
		if !w.Ready() {
			return errors.New("the bus worker is not running")
		}
		return nil
	})
	rt.Log.Info("ready")
	err = w.Run(ctx)

	// Let requeues published by the last handlers reach JetStream before the
	// runtime drains NATS.
	fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ferr := pub.Flush(fctx); ferr != nil {
		rt.Log.Warn("some requeue events may not have been stored", "err", ferr)
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
