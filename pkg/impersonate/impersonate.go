// Package impersonate hands out Kubernetes clients that act as another user,
// in practice the ServiceAccount an XRD's serviceAccountRef names: one client
// per user, made on first use and kept for the life of the process, so that
// RBAC decides which kinds an XR may compose or reference.
//
// Impersonating needs the impersonate verb on the impersonated user (see
// the renderer's and binder's roles in deploy/helm/loom/files/rbac).
package impersonate

import (
	"fmt"
	"sync"

	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/rest"
)

// ServiceAccountUser returns the user name the ServiceAccount namespace/name
// authenticates as, which is what impersonating it sends.
func ServiceAccountUser(namespace, name string) string {
	return serviceaccount.MakeUsername(namespace, name)
}

// Clients hands out a client of type C per impersonated user. Each derives
// from a copy of the base configuration (rate limits, request accounting)
// with the user set. It is safe for concurrent use.
type Clients[C any] struct {
	cfg   *rest.Config
	build func(*rest.Config) (C, error)

	mu      sync.Mutex
	clients map[string]C
}

// New returns Clients that derive from cfg and are made by build.
func New[C any](cfg *rest.Config, build func(*rest.Config) (C, error)) *Clients[C] {
	return &Clients[C]{cfg: cfg, build: build, clients: map[string]C{}}
}

// As returns the client that acts as user, making it on first use.
func (i *Clients[C]) As(user string) (C, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if c, ok := i.clients[user]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(i.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := i.build(cfg)
	if err != nil {
		var zero C
		return zero, fmt.Errorf("cannot create a client that impersonates %q: %w", user, err)
	}
	i.clients[user] = c
	return c, nil
}
