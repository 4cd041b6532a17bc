package kube

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Clients are the Kubernetes clients a service makes from one client
// configuration, so that they share its rate limits and transport. Making
// them sends no request.
type Clients struct {
	// REST is the configuration they were made from, for clients made
	// later (impersonating ones, say).
	REST *rest.Config
	// Dynamic reads and writes objects of any kind as unstructured data.
	Dynamic dynamic.Interface
	// Metadata reads objects' metadata only.
	Metadata metadata.Interface
	// Discovery answers which kinds the API server serves.
	Discovery discovery.DiscoveryInterface
	// Kubernetes is the typed clientset (events, Secrets, RBAC, ...).
	Kubernetes kubernetes.Interface
	// Mapper maps kinds to resources through Discovery, cached in memory
	// until Reset (Resources.Mapping resets it for a kind it does not
	// know yet).
	Mapper meta.ResettableRESTMapper
}

// NewClients makes the clients from rc, which it keeps and does not copy.
func NewClients(rc *rest.Config) (*Clients, error) {
	dyn, err := NewDynamic(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create dynamic client: %w", err)
	}
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create metadata client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create discovery client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create clientset: %w", err)
	}
	return &Clients{
		REST:       rc,
		Dynamic:    dyn,
		Metadata:   md,
		Discovery:  disc,
		Kubernetes: cs,
		Mapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
	}, nil
}
