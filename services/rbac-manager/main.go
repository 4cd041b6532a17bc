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

	"github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/service"
	"github.com/loomxr/loom/services/rbac-manager/internal/manager"
)

type flags struct {
	watcherUser string
	kube        service.KubeFlags
}

func (f *flags) register(fs *flag.FlagSet) {
	ns := service.EnvString("LOOM_NAMESPACE", "loom-system")
	fs.StringVar(&f.watcherUser, "watcher-user", service.EnvString("LOOM_RBAC_MANAGER_WATCHER_USER", "system:serviceaccount:"+ns+":loom-watcher"),
		"user name of Loom's watcher, whose rights the XRDs' Watchable condition reports (env LOOM_RBAC_MANAGER_WATCHER_USER; default the loom-watcher ServiceAccount of LOOM_NAMESPACE, else of loom-system)")
	f.kube.Register(fs, "LOOM_RBAC_MANAGER", 20, 40)
}

func main() {
	var f flags
	service.MainWithoutBus("rbac-manager", f.run, f.register)
}

// run wires the service from the parsed flags and runs it until ctx ends.
func (f *flags) run(ctx context.Context, rt *service.Runtime) error {
	kc, err := kube.NewClients(f.kube.Config(rt.REST))
	if err != nil {
		return err
	}
	m := manager.New(kc.Kubernetes, kc.Dynamic, f.watcherUser, manager.WithLogger(rt.Log))
	rt.AddReadinessCheck("xrds", func(context.Context) error {
		if !m.Synced() {
			return errors.New("composite resource definitions not listed yet")
		}
		return nil
	})
	rt.Log.Info("managing roles", "watcher", f.watcherUser)
	return m.Run(ctx)
}
