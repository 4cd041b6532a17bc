// Package kube is the renderer's access to the Kubernetes API: objects of
// any kind read and written as unstructured data, and an accounting of every
// request the renderer sends.
//
// Kinds are mapped and objects read (lists in pages) by pkg/kube's
// Resources, which Client embeds; request accounting is pkg/kube's Tally.
// Every write carries the renderer's field
// manager, loom-renderer; server-side applies force ownership of the fields
// they send, and only of those.
//
// The renderer never LISTs or WATCHes composed resources: it GETs each one an
// XR references. It LISTs only CompositionRevisions of one Composition,
// Compositions (to select one by labels), EnvironmentConfigs, the XRs of one
// kind (to requeue them after a Composition changed) and the XRs and claims of
// an XRD that is being deleted.
package kube

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	kitkube "github.com/loomxr/loom/pkg/kube"
)

// FieldManager is the server-side apply field manager of every write the
// renderer makes.
const FieldManager = "loom-renderer"

// Client reads and writes objects of any kind: pkg/kube's Client, writing
// as FieldManager, with the renderer's defaults for applies (always forced)
// and deletions (background propagation). It is safe for concurrent use.
type Client struct {
	*kitkube.Client
}

// New returns a Client. opts configure the reads (see kitkube.WithMirror);
// the client reports every write to them.
func New(dyn dynamic.Interface, mapper meta.ResettableRESTMapper, opts ...kitkube.Option) *Client {
	return &Client{Client: kitkube.NewClient(dyn, mapper, FieldManager, opts...)}
}

// Apply server-side applies intent, forcing ownership of the fields it sets.
func (c *Client) Apply(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return c.Client.Apply(ctx, intent, true)
}

// Delete deletes the object with background propagation and, if uid is not
// empty, only if it still has that UID. An object that is already gone is
// not an error.
func (c *Client) Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, uid types.UID) error {
	bg := metav1.DeletePropagationBackground
	return c.Client.Delete(ctx, gvk, namespace, name, uid, &bg)
}

// A Tally counts API requests; see pkg/kube.
type Tally = kitkube.Tally

// WithTally and Count are pkg/kube's.
var (
	WithTally = kitkube.WithTally //nolint:gochecknoglobals // An alias of a function.
	Count     = kitkube.Count     //nolint:gochecknoglobals // An alias of a function.
)
