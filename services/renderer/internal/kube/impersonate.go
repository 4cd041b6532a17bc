package kube

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"

	"github.com/loomxr/loom/pkg/impersonate"
	kitkube "github.com/loomxr/loom/pkg/kube"
)

// An Impersonator hands out Clients that act as another user (in practice
// the ServiceAccount an XRD names), one per user; see package impersonate.
// Impersonating needs the impersonate verb on the impersonated ServiceAccount
// (see deploy/helm/loom/files/rbac/renderer.yaml).
type Impersonator = impersonate.Clients[*Client]

// NewImpersonator returns an Impersonator whose Clients derive from cfg and
// share the REST mapper.
func NewImpersonator(cfg *rest.Config, mapper meta.ResettableRESTMapper) *Impersonator {
	return impersonate.New(cfg, func(cfg *rest.Config) (*Client, error) {
		dyn, err := kitkube.NewDynamic(cfg)
		if err != nil {
			return nil, err
		}
		return New(dyn, mapper), nil
	})
}
