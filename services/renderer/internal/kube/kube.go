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
	"encoding/json"
	"fmt"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
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

// Client reads and writes objects of any kind. It is safe for concurrent use.
type Client struct {
	*kitkube.Resources
}

// New returns a Client. opts configure the reads (see kitkube.WithMirror);
// the client reports every write to them.
func New(dyn dynamic.Interface, mapper meta.ResettableRESTMapper, opts ...kitkube.Option) *Client {
	return &Client{Resources: kitkube.NewResources(dyn, mapper, opts...)}
}

// Apply server-side applies intent, forcing ownership of the fields it sets.
func (c *Client) Apply(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r, err := c.Resource(intent.GroupVersionKind(), intent.GetNamespace())
	if err != nil {
		return nil, err
	}
	out, err := r.Apply(ctx, intent.GetName(), intent, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return c.Written(intent.GroupVersionKind(), intent.GetNamespace(), intent.GetName(), out, err)
}

// ApplyStatus server-side applies intent to the status subresource, forcing
// ownership of the fields it sets.
func (c *Client) ApplyStatus(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r, err := c.Resource(intent.GroupVersionKind(), intent.GetNamespace())
	if err != nil {
		return nil, err
	}
	out, err := r.ApplyStatus(ctx, intent.GetName(), intent, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return c.Written(intent.GroupVersionKind(), intent.GetNamespace(), intent.GetName(), out, err)
}

// MergePatch sends a JSON merge patch (RFC 7386): lists in patch replace the
// object's lists whole, and a nil value removes a field.
func (c *Client) MergePatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch map[string]any) (*unstructured.Unstructured, error) {
	r, err := c.Resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("cannot encode patch: %w", err)
	}
	out, err := r.Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: FieldManager})
	return c.Written(gvk, namespace, name, out, err)
}

// Create creates obj. An object that exists already fails with an error for
// which kerrors.IsAlreadyExists is true.
func (c *Client) Create(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r, err := c.Resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	out, err := r.Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
	return c.Written(obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName(), out, err)
}

// Update replaces obj, with obj's resourceVersion as a precondition: a stale
// obj fails with an error for which kerrors.IsConflict is true.
func (c *Client) Update(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r, err := c.Resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	out, err := r.Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
	return c.Written(obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName(), out, err)
}

// Delete deletes the object with background propagation and, if uid is not
// empty, only if it still has that UID. An object that is already gone is
// not an error.
func (c *Client) Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, uid types.UID) error {
	r, err := c.Resource(gvk, namespace)
	if err != nil {
		return err
	}
	c.Forget(gvk, namespace, name)
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	if err := r.Delete(ctx, name, opts); err != nil && !kerrors.IsNotFound(err) {
		return err
	}
	return nil
}

// A Tally counts API requests; see pkg/kube.
type Tally = kitkube.Tally

// WithTally and Count are pkg/kube's.
var (
	WithTally = kitkube.WithTally //nolint:gochecknoglobals // An alias of a function.
	Count     = kitkube.Count     //nolint:gochecknoglobals // An alias of a function.
)
