// Package object reads and writes Kubernetes objects of any kind as
// unstructured data: claims and composite resources whose kinds come from
// XRDs, and composed resources whose kinds come from reference rules. Kinds
// are mapped and objects read (lists in pages) by pkg/kube's Resources,
// which Client embeds.
//
// Writes are pkg/kube's Client's: every one carries the binder's field
// manager, and server-side applies are made with the intent's
// resourceVersion, if it has one, as a precondition.
package object

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	kitkube "github.com/loomxr/loom/pkg/kube"
)

// Client reads and writes objects of any kind: pkg/kube's Client, plus
// lists of metadata. It is safe for concurrent use.
type Client struct {
	*kitkube.Client
	meta metadata.Interface
}

// New returns a client that writes as field manager manager. meta may be nil
// if ListMetadata is never called. opts configure the reads (see
// kitkube.WithMirror); the client reports every write to them.
func New(dyn dynamic.Interface, md metadata.Interface, mapper meta.ResettableRESTMapper, manager string, opts ...kitkube.Option) *Client {
	return &Client{Client: kitkube.NewClient(dyn, mapper, manager, opts...), meta: md}
}

// ListMetadata returns the metadata of every object of kind gk, at its
// preferred version, in all namespaces.
func (c *Client) ListMetadata(ctx context.Context, gk schema.GroupKind) ([]metav1.PartialObjectMetadata, error) {
	m, err := c.Mapping(gk.WithVersion(""))
	if err != nil {
		return nil, err
	}
	l, err := c.meta.Resource(m.Resource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}
