// Command secrets is Loom's secrets service: it builds connection Secrets of composite resources and copies them to their claims.
// main only wires the shared runtime (pkg/service); behaviour lives in
// internal/.
//
// # Connection details of Pipeline XRs
//
// The renderer hands the service the connection details that the functions
// of Pipeline XRs return over gRPC with mutual TLS (proto/secrets/v1,
// package staging); they never travel on the bus. The endpoint is off
// unless --grpc-addr is set:
//
//	--grpc-addr             address to serve on, e.g. :9443; empty: off
//	                        (env LOOM_SECRETS_GRPC_ADDR)
//	--grpc-tls-cert-file    PEM server certificate (env LOOM_SECRETS_GRPC_TLS_CERT_FILE)
//	--grpc-tls-key-file     PEM key of the server certificate (env LOOM_SECRETS_GRPC_TLS_KEY_FILE)
//	--grpc-client-ca-file   PEM CA(s) that sign client certificates (env LOOM_SECRETS_GRPC_CLIENT_CA_FILE)
//	--grpc-client-identity  the one client identity allowed, matched against
//	                        the client certificate's common name and DNS
//	                        names (default loom-renderer; env
//	                        LOOM_SECRETS_GRPC_CLIENT_IDENTITY); others get
//	                        PermissionDenied
//	--namespace             the service's own namespace, where the staging
//	                        Secrets loom-fn-<XR UID> live (default
//	                        loom-system; env LOOM_SECRETS_NAMESPACE)
//
// The files are read once at start. Any replica may serve any XR's
// details: they are stored in the XR's staging Secret, which requeues the
// XR on the bus for the replica that owns it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/event"
	"github.com/loomxr/loom/pkg/service"
	"github.com/loomxr/loom/services/secrets/internal/composite"
	"github.com/loomxr/loom/services/secrets/internal/definition"
	"github.com/loomxr/loom/services/secrets/internal/kube"
	"github.com/loomxr/loom/services/secrets/internal/route"
	"github.com/loomxr/loom/services/secrets/internal/secret"
	"github.com/loomxr/loom/services/secrets/internal/staging"
	"github.com/loomxr/loom/services/secrets/internal/tracker"
)

// flags are the secrets service's own flags, beyond the standard ones.
type flags struct {
	memoSize      int
	busReplicas   int
	partitions    int
	sched         bus.SchedulingFlags
	concurrency   int
	qps           float64
	burst         int
	definitionTTL time.Duration
	grpc          grpcFlags
}

// grpcFlags configure the endpoint that receives the connection details of
// Pipeline XRs from the renderer.
type grpcFlags struct {
	addr, certFile, keyFile, clientCAFile, clientIdentity, namespace string
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.busReplicas, "bus-replicas", service.EnvInt("LOOM_BUS_REPLICAS", bus.DefaultReplicas),
		"replicas of JetStream streams and buckets: 1 on a single server, 3 on a cluster (env LOOM_BUS_REPLICAS)")
	fs.IntVar(&f.partitions, "bus-partitions", service.EnvInt("LOOM_BUS_PARTITIONS", bus.DefaultPartitions),
		"partitions of each work stream; the same for every service (env LOOM_BUS_PARTITIONS)")
	f.sched.Register(fs)
	fs.IntVar(&f.memoSize, "memo-size", service.EnvInt("LOOM_SECRETS_MEMO_SIZE", secret.DefaultMemoSize),
		"connection Secrets whose last write this replica remembers; beyond it the least recently used cost a read again (env LOOM_SECRETS_MEMO_SIZE)")
	fs.IntVar(&f.concurrency, "concurrency", service.EnvInt("LOOM_SECRETS_CONCURRENCY", 16),
		"targets handled at once by this replica (env LOOM_SECRETS_CONCURRENCY)")
	fs.Float64Var(&f.qps, "kube-qps", service.EnvFloat("LOOM_SECRETS_KUBE_QPS", 200), "Kubernetes client queries per second (env LOOM_SECRETS_KUBE_QPS)")
	fs.IntVar(&f.burst, "kube-burst", service.EnvInt("LOOM_SECRETS_KUBE_BURST", 400), "Kubernetes client burst (env LOOM_SECRETS_KUBE_BURST)")
	fs.DurationVar(&f.definitionTTL, "definition-ttl", service.EnvDuration("LOOM_SECRETS_DEFINITION_TTL", definition.DefaultTTL),
		"how long XRDs and Compositions are cached; a changed connectionSecretKeys applies within it (env LOOM_SECRETS_DEFINITION_TTL)")
	fs.StringVar(&f.grpc.addr, "grpc-addr", os.Getenv("LOOM_SECRETS_GRPC_ADDR"),
		"address of the gRPC endpoint (mutual TLS) on which the renderer hands over the connection details that functions return; empty disables it (env LOOM_SECRETS_GRPC_ADDR)")
	fs.StringVar(&f.grpc.certFile, "grpc-tls-cert-file", os.Getenv("LOOM_SECRETS_GRPC_TLS_CERT_FILE"),
		"PEM server certificate of the gRPC endpoint (env LOOM_SECRETS_GRPC_TLS_CERT_FILE)")
	fs.StringVar(&f.grpc.keyFile, "grpc-tls-key-file", os.Getenv("LOOM_SECRETS_GRPC_TLS_KEY_FILE"),
		"PEM key of the server certificate (env LOOM_SECRETS_GRPC_TLS_KEY_FILE)")
	fs.StringVar(&f.grpc.clientCAFile, "grpc-client-ca-file", os.Getenv("LOOM_SECRETS_GRPC_CLIENT_CA_FILE"),
		"PEM CA certificates that sign the renderer's client certificate (env LOOM_SECRETS_GRPC_CLIENT_CA_FILE)")
	fs.StringVar(&f.grpc.clientIdentity, "grpc-client-identity", envString("LOOM_SECRETS_GRPC_CLIENT_IDENTITY", staging.DefaultClientIdentity),
		"the only client allowed on the gRPC endpoint: common name or DNS name of its certificate (env LOOM_SECRETS_GRPC_CLIENT_IDENTITY)")
	fs.StringVar(&f.grpc.namespace, "namespace", envString("LOOM_SECRETS_NAMESPACE", staging.DefaultNamespace),
		"the service's own namespace, which holds the staging Secrets of Pipeline XRs' connection details (env LOOM_SECRETS_NAMESPACE)")
}

func main() {
	var f flags
	service.Main("secrets", func(ctx context.Context, rt *service.Runtime) error {
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
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("cannot create clientset: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return fmt.Errorf("cannot create discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	c := kube.New(dyn, md, cs, mapper)

	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("cannot start recording events: %w", err)
	}
	defer broadcaster.Shutdown()
	rec := event.NewAPIRecorder(broadcaster.NewRecorder(runtime.NewScheme(), kube.FieldManager))

	source := "secrets/" + rt.Config.ReplicaID
	pub := bus.NewPublisher(js, bus.WithConfig(cfg), bus.WithLogger(rt.Log), bus.WithSource(source))

	// The worker is created after the tracker, which asks it which
	// partitions this replica owns.
	var worker atomic.Pointer[bus.Worker]
	owns := func(uid types.UID) bool {
		w := worker.Load()
		return w != nil && slices.Contains(w.Owned(), bus.Partition(string(uid), cfg.Partitions))
	}
	var store *secret.Store
	trk := tracker.New(md, pub, tracker.Services{Secrets: bus.Secrets, Renderer: bus.Renderer},
		tracker.WithLogger(rt.Log),
		tracker.WithSource(source),
		tracker.WithOwnWrites(func(k secret.Key, rv string) bool { return store.Written(k, rv) }),
		tracker.WithOwnerTracing(c, owns),
	)
	store = secret.New(c, trk, secret.WithMemoSize(f.memoSize))

	xrs := composite.NewReconciler(c, definition.New(c, f.definitionTTL), store, trk,
		composite.WithLogger(rt.Log), composite.WithRecorder(rec), composite.WithStagingNamespace(f.grpc.namespace))
	h := route.NewHandler(xrs, c, pub, bus.Secrets, rt.Log, source)
	schedOpts, err := f.sched.Options()
	if err != nil {
		return err
	}
	w, err := bus.NewWorker(rt.NATS, js, bus.Secrets, rt.Config.ReplicaID, h,
		append([]bus.WorkerOption{bus.WithConfig(cfg), bus.WithLogger(rt.Log), bus.WithConcurrency(f.concurrency)}, schedOpts...)...)
	if err != nil {
		return err
	}
	worker.Store(w)
	rt.AddReadinessCheck("worker", func(context.Context) error {
		if !w.Ready() {
			return errors.New("the bus worker is not running")
		}
		return nil
	})
	rt.AddReadinessCheck("secrets", func(context.Context) error {
		if !trk.HasSynced() {
			return errors.New("the connection Secrets are not listed yet")
		}
		return nil
	})

	tctx, stopTracker := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { trk.Run(tctx) })
	defer func() {
		stopTracker()
		wg.Wait()
	}()
	// Handlers read the tracker's cache: they must not run before it holds
	// every connection Secret.
	if !cache.WaitForCacheSync(ctx.Done(), trk.HasSynced) {
		return nil
	}
	if f.grpc.addr != "" {
		// Its own Store: the tracker must see the staging Secrets it writes.
		srv := staging.NewServer(secret.New(c, staging.ReadThrough(trk)), pub, bus.Secrets, f.grpc.namespace, staging.WithLogger(rt.Log), staging.WithSource(source))
		stop, err := serveGRPC(rt, srv, f.grpc)
		if err != nil {
			return err
		}
		defer stop()
	}
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

// serveGRPC serves srv on the configured address in the background and
// returns a function that stops it, letting calls in flight finish for a
// few seconds.
func serveGRPC(rt *service.Runtime, srv *staging.Server, f grpcFlags) (func(), error) {
	if f.certFile == "" || f.keyFile == "" || f.clientCAFile == "" {
		return nil, errors.New("cannot serve gRPC: --grpc-addr needs --grpc-tls-cert-file, --grpc-tls-key-file and --grpc-client-ca-file (mutual TLS is required)")
	}
	cfg, err := staging.ServerTLS(f.certFile, f.keyFile, f.clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("cannot serve gRPC: %w", err)
	}
	l, err := net.Listen("tcp", f.addr)
	if err != nil {
		return nil, fmt.Errorf("cannot serve gRPC: %w", err)
	}
	g := staging.NewGRPCServer(srv, cfg, f.clientIdentity)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := g.Serve(l); err != nil {
			rt.Log.Error("gRPC endpoint failed", "addr", f.addr, "err", err)
		}
	}()
	rt.Log.Info("serving connection details of Pipeline XRs over gRPC", "addr", l.Addr().String(), "clientIdentity", f.clientIdentity)
	return func() {
		stopped := make(chan struct{})
		go func() {
			g.GracefulStop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			g.Stop()
		}
		<-done
	}, nil
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

// envString returns environment variable k, or def when it is unset or
// empty.
func envString(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
