// Package object reads and writes Kubernetes objects of any kind as
// unstructured data: claims and composite resources whose kinds come from
// XRDs, and composed resources whose kinds come from reference rules. Kinds
// are mapped and objects read (lists in pages) by pkg/kube's Resources,
// which Client embeds.
//
// Every write carries the binder's field manager. Server-side applies are
// made with the intent's resourceVersion, if it has one, as a precondition.
package object

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
	"k8s.io/client-go/metadata"

	kitkube "github.com/loomxr/loom/pkg/kube"
)

// Client reads and writes objects of any kind. It is safe for concurrent use.
type Client struct {
	*kitkube.Resources
	meta    metadata.Interface
	manager string
}

// New returns a client that writes as field manager manager. meta may be nil
// if ListMetadata is never called. opts configure the reads (see
// kitkube.WithMirror); the client reports every write to them.
func New(dyn dynamic.Interface, md metadata.Interface, mapper meta.ResettableRESTMapper, manager string, opts ...kitkube.Option) *Client {
	return &Client{Resources: kitkube.NewResources(dyn, mapper, opts...), meta: md, manager: manager}
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

// Create creates obj; an object of that name that already exists fails it
// with an error for which kerrors.IsAlreadyExists is true.
func (c *Client) Create(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r, err := c.Resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	out, err := r.Create(ctx, obj, metav1.CreateOptions{FieldManager: c.manager})
	return c.Written(obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName(), out, err)
}

// Update replaces obj, with obj's resourceVersion as a precondition: a stale
// obj fails with an error for which kerrors.IsConflict is true.
func (c *Client) Update(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r, err := c.Resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	out, err := r.Update(ctx, obj, metav1.UpdateOptions{FieldManager: c.manager})
	return c.Written(obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName(), out, err)
}

// Apply server-side applies intent. Without force a field another manager
// owns with another value fails the apply with a conflict. An intent with a
// resourceVersion applies only to that version of the object.
func (c *Client) Apply(ctx context.Context, intent *unstructured.Unstructured, force bool) (*unstructured.Unstructured, error) {
	r, err := c.Resource(intent.GroupVersionKind(), intent.GetNamespace())
	if err != nil {
		return nil, err
	}
	out, err := r.Apply(ctx, intent.GetName(), intent, metav1.ApplyOptions{FieldManager: c.manager, Force: force})
	return c.Written(intent.GroupVersionKind(), intent.GetNamespace(), intent.GetName(), out, err)
}

// ApplyStatus server-side applies intent to the status subresource, forcing
// ownership of the fields it sets.
func (c *Client) ApplyStatus(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r, err := c.Resource(intent.GroupVersionKind(), intent.GetNamespace())
	if err != nil {
		return nil, err
	}
	out, err := r.ApplyStatus(ctx, intent.GetName(), intent, metav1.ApplyOptions{FieldManager: c.manager, Force: true})
	return c.Written(intent.GroupVersionKind(), intent.GetNamespace(), intent.GetName(), out, err)
}

// MergePatch sends a JSON merge patch; a nil value in patch removes a field
// whoever owns it.
func (c *Client) MergePatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch map[string]any) (*unstructured.Unstructured, error) {
	r, err := c.Resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("cannot encode patch: %w", err)
	}
	out, err := r.Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: c.manager})
	return c.Written(gvk, namespace, name, out, err)
}

// JSONPatch sends a JSON patch (RFC 6902).
func (c *Client) JSONPatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch []byte) (*unstructured.Unstructured, error) {
	r, err := c.Resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	out, err := r.Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: c.manager})
	return c.Written(gvk, namespace, name, out, err)
}

// Delete deletes the object with the supplied propagation policy (nil for
// the kind's default) and, if uid is not empty, only if it still has that
// UID. An object that is already gone is not an error.
func (c *Client) Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, uid types.UID, propagation *metav1.DeletionPropagation) error {
	r, err := c.Resource(gvk, namespace)
	if err != nil {
		return err
	}
	c.Forget(gvk, namespace, name)
	opts := metav1.DeleteOptions{PropagationPolicy: propagation}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	if err := r.Delete(ctx, name, opts); err != nil && !kerrors.IsNotFound(err) {
		return err
	}
	return nil
}
