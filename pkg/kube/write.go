package kube

import (
	"context"
	"fmt"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/loomxr/loom/pkg/objjson"
)

// Client reads objects of any kind through Resources and writes them as one
// field manager, reporting every write to the read path (Resources.Written)
// so that the service reads its own writes back without a GET. It is safe
// for concurrent use.
type Client struct {
	*Resources
	manager string
}

// NewClient returns a Client that writes as field manager manager. opts
// configure the reads (see WithMirror).
func NewClient(dyn dynamic.Interface, mapper meta.ResettableRESTMapper, manager string, opts ...Option) *Client {
	return &Client{Resources: NewResources(dyn, mapper, opts...), manager: manager}
}

// Manager is the field manager of the client's writes.
func (c *Client) Manager() string { return c.manager }

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
// owns with another value fails the apply with a conflict; with it the
// client takes ownership of the fields intent sets, and only of those. An
// intent with a resourceVersion applies only to that version of the object.
func (c *Client) Apply(ctx context.Context, intent *unstructured.Unstructured, force bool) (*unstructured.Unstructured, error) {
	r, err := c.Resource(intent.GroupVersionKind(), intent.GetNamespace())
	if err != nil {
		return nil, err
	}
	out, err := apply(ctx, r, intent, metav1.ApplyOptions{FieldManager: c.manager, Force: force})
	return c.Written(intent.GroupVersionKind(), intent.GetNamespace(), intent.GetName(), out, err)
}

// apply is the dynamic client's Apply with the body encoded by package
// objjson: an apply patch of JSON, which is YAML.
func apply(ctx context.Context, r dynamic.ResourceInterface, intent *unstructured.Unstructured, opts metav1.ApplyOptions, subresources ...string) (*unstructured.Unstructured, error) {
	body, err := objjson.Append(make([]byte, 0, 2048), intent.Object)
	if err != nil {
		return nil, fmt.Errorf("cannot encode %s %s: %w", intent.GetKind(), intent.GetName(), err)
	}
	return r.Patch(ctx, intent.GetName(), types.ApplyYAMLPatchType, body, opts.ToPatchOptions(), subresources...)
}

// ApplyStatus server-side applies intent to the status subresource, forcing
// ownership of the fields it sets.
func (c *Client) ApplyStatus(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r, err := c.Resource(intent.GroupVersionKind(), intent.GetNamespace())
	if err != nil {
		return nil, err
	}
	out, err := apply(ctx, r, intent, metav1.ApplyOptions{FieldManager: c.manager, Force: true}, "status")
	return c.Written(intent.GroupVersionKind(), intent.GetNamespace(), intent.GetName(), out, err)
}

// MergePatch sends a JSON merge patch (RFC 7386): lists in patch replace the
// object's lists whole, and a nil value removes a field whoever owns it.
func (c *Client) MergePatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch map[string]any) (*unstructured.Unstructured, error) {
	b, err := objjson.Append(nil, patch)
	if err != nil {
		return nil, fmt.Errorf("cannot encode patch: %w", err)
	}
	return c.patch(ctx, gvk, namespace, name, types.MergePatchType, b)
}

// JSONPatch sends a JSON patch (RFC 6902).
func (c *Client) JSONPatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch []byte) (*unstructured.Unstructured, error) {
	return c.patch(ctx, gvk, namespace, name, types.JSONPatchType, patch)
}

func (c *Client) patch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, pt types.PatchType, patch []byte) (*unstructured.Unstructured, error) {
	r, err := c.Resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	out, err := r.Patch(ctx, name, pt, patch, metav1.PatchOptions{FieldManager: c.manager})
	return c.Written(gvk, namespace, name, out, err)
}

// Delete deletes the object with the given propagation policy (nil for the
// kind's default) and, if uid is not empty, only if it still has that UID.
// An object that is already gone is not an error.
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
