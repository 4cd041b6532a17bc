// Package object reads and writes Kubernetes objects of any kind as
// unstructured data: claims and composite resources whose kinds come from
// XRDs, and composed resources whose kinds come from reference rules. Kinds
// are mapped to resources through discovery; a kind discovery does not know
// yet (a CRD created a moment ago) makes the mapper reload once, at most once
// per second.
//
// Every write carries the binder's field manager. Server-side applies are
// made with the intent's resourceVersion, if it has one, as a precondition.
package object

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

// Client reads and writes objects of any kind. It is safe for concurrent use.
type Client struct {
	dyn     dynamic.Interface
	meta    metadata.Interface
	mapper  meta.ResettableRESTMapper
	manager string

	mu        sync.Mutex
	lastReset time.Time
}

// New returns a client that writes as field manager manager. meta may be nil
// if ListMetadata is never called.
func New(dyn dynamic.Interface, md metadata.Interface, mapper meta.ResettableRESTMapper, manager string) *Client {
	return &Client{dyn: dyn, meta: md, mapper: mapper, manager: manager}
}

// Mapping returns the REST mapping of gvk, reloading discovery once if the
// kind is unknown.
func (c *Client) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil || !meta.IsNoMatchError(err) {
		return m, err
	}
	c.mu.Lock()
	if time.Since(c.lastReset) > time.Second {
		c.mapper.Reset()
		c.lastReset = time.Now()
	}
	c.mu.Unlock()
	return c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
}

// Namespaced reports whether gvk is a namespaced kind.
func (c *Client) Namespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := c.Mapping(gvk)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func (c *Client) resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error) {
	m, err := c.Mapping(gvk)
	if err != nil {
		return nil, err
	}
	r := c.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.Namespace(namespace), nil
	}
	return r, nil
}

// Get returns the object, or an error for which kerrors.IsNotFound is true.
func (c *Client) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	r, err := c.resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	return r.Get(ctx, name, metav1.GetOptions{})
}

// List returns the objects of kind gvk in namespace ("" for all namespaces or
// a cluster-scoped kind) that match sel (nil for all).
func (c *Client) List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]unstructured.Unstructured, error) {
	r, err := c.resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	opts := metav1.ListOptions{}
	if sel != nil {
		opts.LabelSelector = sel.String()
	}
	l, err := r.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	return l.Items, nil
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
	r, err := c.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	return r.Create(ctx, obj, metav1.CreateOptions{FieldManager: c.manager})
}

// Update replaces obj, with obj's resourceVersion as a precondition: a stale
// obj fails with an error for which kerrors.IsConflict is true.
func (c *Client) Update(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r, err := c.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	return r.Update(ctx, obj, metav1.UpdateOptions{FieldManager: c.manager})
}

// Apply server-side applies intent. Without force a field another manager
// owns with another value fails the apply with a conflict. An intent with a
// resourceVersion applies only to that version of the object.
func (c *Client) Apply(ctx context.Context, intent *unstructured.Unstructured, force bool) (*unstructured.Unstructured, error) {
	r, err := c.resource(intent.GroupVersionKind(), intent.GetNamespace())
	if err != nil {
		return nil, err
	}
	return r.Apply(ctx, intent.GetName(), intent, metav1.ApplyOptions{FieldManager: c.manager, Force: force})
}

// ApplyStatus server-side applies intent to the status subresource, forcing
// ownership of the fields it sets.
func (c *Client) ApplyStatus(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r, err := c.resource(intent.GroupVersionKind(), intent.GetNamespace())
	if err != nil {
		return nil, err
	}
	return r.ApplyStatus(ctx, intent.GetName(), intent, metav1.ApplyOptions{FieldManager: c.manager, Force: true})
}

// MergePatch sends a JSON merge patch; a nil value in patch removes a field
// whoever owns it.
func (c *Client) MergePatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch map[string]any) (*unstructured.Unstructured, error) {
	r, err := c.resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("cannot encode patch: %w", err)
	}
	return r.Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: c.manager})
}

// JSONPatch sends a JSON patch (RFC 6902).
func (c *Client) JSONPatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch []byte) (*unstructured.Unstructured, error) {
	r, err := c.resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	return r.Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: c.manager})
}

// Delete deletes the object with the supplied propagation policy (nil for
// the kind's default) and, if uid is not empty, only if it still has that
// UID. An object that is already gone is not an error.
func (c *Client) Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, uid types.UID, propagation *metav1.DeletionPropagation) error {
	r, err := c.resource(gvk, namespace)
	if err != nil {
		return err
	}
	opts := metav1.DeleteOptions{PropagationPolicy: propagation}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	if err := r.Delete(ctx, name, opts); err != nil && !kerrors.IsNotFound(err) {
		return err
	}
	return nil
}
