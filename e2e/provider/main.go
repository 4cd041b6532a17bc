// Command provider-nop is Loom's test provider. It serves Crossplane
// provider-nop's NopResource API (nop.crossplane.io/v1alpha1) so that
// manifests written for Crossplane's own tests run unchanged against Loom;
// see package internal/nop for its behaviour.
//
// Flags follow the contract of pkg/service that the stack relies on, each
// with an environment-variable fallback used when the flag is not given:
// --kubeconfig (KUBECONFIG; empty means in-cluster), --health-addr
// (LOOM_HEALTH_ADDR; serves /healthz, and /readyz once the NopResource
// informer has synced; "0" disables), --metrics-addr (LOOM_METRICS_ADDR;
// "0" disables), --replica-id (LOOM_REPLICA_ID; names this process in logs
// and in its user agent) and --nats-url (LOOM_NATS_URL; accepted and
// ignored: the provider does not use the bus). Its own flags are
// --max-reconcile-rate (LOOM_MAX_RECONCILE_RATE; reconciles per second, 0
// means unlimited) and --max-concurrent-reconciles
// (LOOM_MAX_CONCURRENT_RECONCILES). Leader election is off: run one replica
// per cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/loomxr/loom/e2e/provider/internal/nop"
)

// The client's rate limits are far above anything the API server sustains on
// a small machine, so that the provider is never what a benchmark measures.
const (
	clientQPS   = 500
	clientBurst = 1000
)

type config struct {
	kubeconfig       string
	healthAddr       string
	metricsAddr      string
	replicaID        string
	maxReconcileRate float64
	concurrency      int
	natsURL          string
}

func main() {
	log := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		log.Error(err, "provider-nop failed")
		os.Exit(1)
	}
}

func parse(args []string) (config, error) {
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("provider-nop", flag.ContinueOnError)
	c := config{}
	fs.StringVar(&c.kubeconfig, "kubeconfig", env("KUBECONFIG", ""), "kubeconfig file; empty means in-cluster configuration")
	fs.StringVar(&c.healthAddr, "health-addr", env("LOOM_HEALTH_ADDR", "127.0.0.1:8081"), `address serving /healthz and /readyz; "0" disables`)
	fs.StringVar(&c.metricsAddr, "metrics-addr", env("LOOM_METRICS_ADDR", "0"), `address serving Prometheus metrics; "0" disables`)
	fs.StringVar(&c.replicaID, "replica-id", env("LOOM_REPLICA_ID", host), "name of this process in logs and in its user agent")
	rateDefault, err := strconv.ParseFloat(env("LOOM_MAX_RECONCILE_RATE", "0"), 64)
	if err != nil {
		return config{}, fmt.Errorf("cannot parse LOOM_MAX_RECONCILE_RATE: %w", err)
	}
	fs.Float64Var(&c.maxReconcileRate, "max-reconcile-rate", rateDefault, "maximum reconciles per second; 0 means unlimited")
	concurrencyDefault, err := strconv.Atoi(env("LOOM_MAX_CONCURRENT_RECONCILES", "16"))
	if err != nil {
		return config{}, fmt.Errorf("cannot parse LOOM_MAX_CONCURRENT_RECONCILES: %w", err)
	}
	fs.StringVar(&c.natsURL, "nats-url", env("LOOM_NATS_URL", ""), "ignored: the provider does not use the bus (accepted because the stack passes it to every service)")
	fs.IntVar(&c.concurrency, "max-concurrent-reconciles", concurrencyDefault, "NopResources reconciled at once")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if c.concurrency < 1 {
		return config{}, errors.New("--max-concurrent-reconciles must be at least 1")
	}
	return c, nil
}

func run(log logr.Logger, args []string) error {
	c, err := parse(args)
	if err != nil {
		return err
	}
	log = log.WithValues("replica", c.replicaID)
	ctrl.SetLogger(log)
	klog.SetLogger(log)

	rc, err := restConfig(c.kubeconfig)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = clientQPS, clientBurst
	rc.UserAgent = "provider-nop/" + c.replicaID

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("cannot register Kubernetes types: %w", err)
	}
	if err := nop.AddToScheme(scheme); err != nil {
		return fmt.Errorf("cannot register NopResource types: %w", err)
	}

	mgr, err := ctrl.NewManager(rc, ctrl.Options{
		Scheme: scheme,
		Logger: log,
		// Secrets are read and written one by one: the provider may not
		// list or watch them.
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Cache:                  cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
		Metrics:                metricsserver.Options{BindAddress: c.metricsAddr},
		HealthProbeBindAddress: c.healthAddr,
		LeaderElection:         false,
	})
	if err != nil {
		return fmt.Errorf("cannot create controller manager: %w", err)
	}

	ctx := ctrl.SetupSignalHandler()
	inf, err := mgr.GetCache().GetInformer(ctx, &nop.NopResource{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("cannot get NopResource informer: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("cannot add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informer", func(*http.Request) error {
		if !inf.HasSynced() {
			return errors.New("NopResource informer has not synced")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("cannot add readiness check: %w", err)
	}

	if err := nop.Setup(mgr, nop.Options{
		MaxConcurrentReconciles: c.concurrency,
		MaxReconcileRate:        c.maxReconcileRate,
	}); err != nil {
		return fmt.Errorf("cannot set up NopResource controller: %w", err)
	}

	log.Info("starting", "concurrency", c.concurrency, "maxReconcileRate", c.maxReconcileRate, "healthAddr", c.healthAddr)
	if err := mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("cannot run controller manager: %w", err)
	}
	return nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("cannot load in-cluster configuration (set --kubeconfig): %w", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cannot load kubeconfig %s: %w", kubeconfig, err)
	}
	return rc, nil
}

func env(key, fallback string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return fallback
}
