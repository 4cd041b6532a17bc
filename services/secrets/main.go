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

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/event"
	"github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/mirror"
	"github.com/loomxr/loom/pkg/service"
	"github.com/loomxr/loom/services/secrets/internal/composite"
	"github.com/loomxr/loom/services/secrets/internal/definition"
	secretskube "github.com/loomxr/loom/services/secrets/internal/kube"
	"github.com/loomxr/loom/services/secrets/internal/route"
	"github.com/loomxr/loom/services/secrets/internal/secret"
	"github.com/loomxr/loom/services/secrets/internal/staging"
	"github.com/loomxr/loom/services/secrets/internal/tracker"
)

// flags are the secrets service's own flags, beyond the standard ones.
type flags struct {
	worker        service.WorkerFlags
	kube          service.KubeFlags
	memoSize      int
	xrMemoSize    int
	definitionTTL time.Duration
	grpc          grpcFlags
}

// grpcFlags configure the endpoint that receives the connection details of
// Pipeline XRs from the renderer.
type grpcFlags struct {
	addr, certFile, keyFile, clientCAFile, clientIdentity, namespace string
}

func (f *flags) register(fs *flag.FlagSet) {
	f.worker.Register(fs, "LOOM_SECRETS", 16)
	f.kube.Register(fs, "LOOM_SECRETS", 200, 400)
	fs.IntVar(&f.memoSize, "memo-size", service.EnvInt("LOOM_SECRETS_MEMO_SIZE", secret.DefaultMemoSize),
		"connection Secrets whose last write this replica remembers; beyond it the least recently used cost a read again (env LOOM_SECRETS_MEMO_SIZE)")
	fs.IntVar(&f.xrMemoSize, "xr-memo-size", service.EnvInt("LOOM_SECRETS_XR_MEMO_SIZE", composite.DefaultMemoSize),
		"XRs and claims whose last reported key conflicts, composed-resource templates and claim generations this replica remembers, and composed resources' connection Secrets it keeps as last read; beyond it the least recently used are read or reported again (env LOOM_SECRETS_XR_MEMO_SIZE)")
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
	fs.StringVar(&f.grpc.clientIdentity, "grpc-client-identity", service.EnvString("LOOM_SECRETS_GRPC_CLIENT_IDENTITY", staging.DefaultClientIdentity),
		"the only client allowed on the gRPC endpoint: common name or DNS name of its certificate (env LOOM_SECRETS_GRPC_CLIENT_IDENTITY)")
	fs.StringVar(&f.grpc.namespace, "namespace", service.EnvString("LOOM_SECRETS_NAMESPACE", staging.DefaultNamespace),
		"the service's own namespace, which holds the staging Secrets of Pipeline XRs' connection details (env LOOM_SECRETS_NAMESPACE)")
}

func main() {
	var f flags
	service.Main("secrets", f.run, f.register)
}

// run wires the service from the parsed flags and runs it until ctx ends.
func (f *flags) run(ctx context.Context, rt *service.Runtime) error {
	b, err := rt.Bus(ctx, f.worker.Bus.Config())
	if err != nil {
		return err
	}

	rc := f.kube.Config(rt.REST)
	rc.Wrap(secretskube.Count(nil))
	kc, err := kube.NewClients(rc)
	if err != nil {
		return err
	}
	// The service writes Secrets only: it never applies what it reads from
	// the mirror, so it need not decode their managedFields.
	ro, err := b.ReadOptions(ctx, f.worker, mirror.WithoutManagedFields())
	if err != nil {
		return err
	}
	c := secretskube.New(kc.Dynamic, kc.Metadata, kc.Kubernetes, kc.Mapper, ro...)
	rec, stop, err := event.StartRecorder(ctx, kc.Kubernetes, secretskube.FieldManager)
	if err != nil {
		return err
	}
	defer stop()

	// The worker is created after the tracker, which asks it which
	// partitions this replica owns.
	var worker atomic.Pointer[bus.Worker]
	owns := func(uid types.UID) bool {
		w := worker.Load()
		return w != nil && slices.Contains(w.Owned(), bus.Partition(string(uid), b.Config.Partitions))
	}
	var store *secret.Store
	trk := tracker.New(kc.Metadata, b.Publisher, tracker.Services{Secrets: bus.Secrets, Renderer: bus.Renderer},
		tracker.WithLogger(rt.Log),
		tracker.WithSource(b.Source),
		tracker.WithOwnWrites(func(k secret.Key, rv string) bool { return store.Written(k, rv) }),
		tracker.WithOwnerTracing(c, owns),
	)
	store = secret.New(c, trk, secret.WithMemoSize(f.memoSize))

	xrs := composite.NewReconciler(c, definition.New(c, f.definitionTTL), store, trk,
		composite.WithLogger(rt.Log), composite.WithRecorder(rec), composite.WithStagingNamespace(f.grpc.namespace),
		composite.WithMemoSize(f.xrMemoSize))
	h := route.NewHandler(xrs, c, b.Publisher, bus.Secrets, rt.Log, b.Source, route.WithMemoSize(f.xrMemoSize))
	opts, err := f.worker.Options()
	if err != nil {
		return err
	}
	w, err := b.Worker(h, opts...)
	if err != nil {
		return err
	}
	worker.Store(w)
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
		srv := staging.NewServer(secret.New(c, staging.ReadThrough(trk)), b.Publisher, bus.Secrets, f.grpc.namespace, staging.WithLogger(rt.Log), staging.WithSource(b.Source))
		stopGRPC, err := serveGRPC(rt, srv, f.grpc)
		if err != nil {
			return err
		}
		defer stopGRPC()
	}
	rt.Log.Info("ready")
	return w.Run(ctx)
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
