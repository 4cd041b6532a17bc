package object

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// ServiceAccountUser returns the user name a ServiceAccount authenticates
// as, which is what impersonating it sends.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// An Impersonator hands out Clients that act as another user (in practice
// the ServiceAccount an XRD names), one per user, made on first use and
// kept. They share the base configuration, the REST mapper and the field
// manager. It is safe for concurrent use.
//
// Impersonating needs the impersonate verb on the impersonated
// ServiceAccount (see deploy/helm/loom/files/rbac/binder.yaml).
type Impersonator struct {
	cfg     *rest.Config
	mapper  meta.ResettableRESTMapper
	manager string

	mu      sync.Mutex
	clients map[string]*Client
}

// NewImpersonator returns an Impersonator whose clients derive from cfg and
// write as field manager manager.
func NewImpersonator(cfg *rest.Config, mapper meta.ResettableRESTMapper, manager string) *Impersonator {
	return &Impersonator{cfg: cfg, mapper: mapper, manager: manager, clients: map[string]*Client{}}
}

// As returns the Client that acts as user. It cannot list metadata.
func (i *Impersonator) As(user string) (*Client, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if c, ok := i.clients[user]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(i.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot create a client that impersonates %q: %w", user, err)
	}
	c := New(dyn, nil, i.mapper, i.manager)
	i.clients[user] = c
	return c, nil
}
