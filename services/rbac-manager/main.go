// Command rbac-manager is Loom's RBAC manager: for every XRD it grants
// Loom's services the rights they need on the XRD's XR and claim kinds, and
// namespace users (Kubernetes' admin, edit and view roles) the rights to
// author claims, by keeping the rules of a fixed set of ClusterRoles that
// aggregate into those roles (see internal/roles); and it tells each XRD,
// in its Watchable condition, whether Loom's watcher may watch its kinds.
//
// It runs as its own ServiceAccount, the only one of Loom's with the
// escalate verb, and only on the ClusterRoles it keeps (by name). It does
// not use the bus: the NATS flags are accepted and ignored, so that the
// local stack and the chart start it like the other services.
//
// main only wires the shared runtime (pkg/service); behaviour lives in
// internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/loomxr/loom/pkg/service"
	"github.com/loomxr/loom/services/rbac-manager/internal/manager"
)

type flags struct {
	watcherUser string
	qps         float64
	burst       int
}

func (f *flags) register(fs *flag.FlagSet) {
	ns := os.Getenv("LOOM_NAMESPACE")
	if ns == "" {
		ns = "loom-system"
	}
	def := os.Getenv("LOOM_RBAC_MANAGER_WATCHER_USER")
	if def == "" {
		def = "system:serviceaccount:" + ns + ":loom-watcher"
	}
	fs.StringVar(&f.watcherUser, "watcher-user", def,
		"user name of Loom's watcher, whose rights the XRDs' Watchable condition reports (env LOOM_RBAC_MANAGER_WATCHER_USER; default the loom-watcher ServiceAccount of LOOM_NAMESPACE, else of loom-system)")
	fs.Float64Var(&f.qps, "kube-qps", service.EnvFloat("LOOM_RBAC_MANAGER_KUBE_QPS", 20), "Kubernetes client queries per second (env LOOM_RBAC_MANAGER_KUBE_QPS)")
	fs.IntVar(&f.burst, "kube-burst", service.EnvInt("LOOM_RBAC_MANAGER_KUBE_BURST", 40), "Kubernetes client burst (env LOOM_RBAC_MANAGER_KUBE_BURST)")
}

func main() {
	var f flags
	service.MainWithoutBus("rbac-manager", func(ctx context.Context, rt *service.Runtime) error {
		return run(ctx, rt, f)
	}, f.register)
}

func run(ctx context.Context, rt *service.Runtime, f flags) error {
	rc := rt.REST
	rc.QPS, rc.Burst = float32(f.qps), f.burst
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("cannot create Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("cannot create dynamic client: %w", err)
	}
	m := manager.New(kube, dyn, f.watcherUser, manager.WithLogger(rt.Log))
	rt.AddReadinessCheck("xrds", func(context.Context) error {
		if !m.Synced() {
			return errors.New("composite resource definitions not listed yet")
		}
		return nil
	})
	rt.Log.Info("managing roles", "watcher", f.watcherUser)
	return m.Run(ctx)
}
