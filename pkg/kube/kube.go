// Package kube is what every Loom service's Kubernetes client shares: kinds
// mapped to resources through discovery, and the reads of objects of any
// kind as unstructured data. A service's client embeds Resources and adds
// its writes, which carry its own field manager.
//
// A kind discovery does not know yet (the CRD of an XRD established a
// moment ago) makes the mapper reload, at most once per second. Lists are
// read in pages of ListPageSize, so that the API server never builds one
// huge response.
package kube

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ListPageSize bounds the objects one LIST request returns.
const ListPageSize = 500

// Resources maps kinds to resources and reads objects of any kind. It is
// safe for concurrent use.
type Resources struct {
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper

	mu        sync.Mutex
	lastReset time.Time

	// The read path (read.go); mirror nil means off.
	mirror    Mirror
	cacheSize int
	read      readPath
}

// NewResources returns Resources that read through dyn and map kinds with
// mapper. By default Get always GETs; see WithMirror.
func NewResources(dyn dynamic.Interface, mapper meta.ResettableRESTMapper, opts ...Option) *Resources {
	r := &Resources{dyn: dyn, mapper: mapper}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Mapping returns the REST mapping of gvk, reloading discovery once if the
// kind is unknown (at most once per second).
func (r *Resources) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil || !meta.IsNoMatchError(err) {
		return m, err
	}
	r.mu.Lock()
	if time.Since(r.lastReset) > time.Second {
		r.mapper.Reset()
		r.lastReset = time.Now()
	}
	r.mu.Unlock()
	return r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
}

// Namespaced reports whether gvk is a namespaced kind.
func (r *Resources) Namespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := r.Mapping(gvk)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// Resource returns the dynamic client of kind gvk in namespace (ignored for
// a cluster-scoped kind).
func (r *Resources) Resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error) {
	m, err := r.Mapping(gvk)
	if err != nil {
		return nil, err
	}
	ri := r.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return ri.Namespace(namespace), nil
	}
	return ri, nil
}

// Get returns the object, or an error for which kerrors.IsNotFound is true.
// With WithMirror it reads through the read path (see read.go): the
// object may come from this replica's last write or read of it, or from the
// object mirror, as new as the handled event needs or, under Guarded, as
// new as they hold; a GET otherwise. The object is the caller's to change.
func (r *Resources) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	if r.usesMirror(gvk) {
		return r.get(ctx, gvk, namespace, name)
	}
	ri, err := r.Resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, name, metav1.GetOptions{})
}

// List returns the objects of kind gvk in namespace ("" for all namespaces
// or a cluster-scoped kind) that match sel (nil for all), reading them in
// pages of ListPageSize. With WithMirror, under a context made by
// WholeKind, it answers from the object mirror instead.
func (r *Resources) List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]unstructured.Unstructured, error) {
	if r.usesMirror(gvk) && wholeKind(ctx) {
		if items, ok := r.listMirror(ctx, gvk, namespace, sel); ok {
			return items, nil
		}
	}
	ri, err := r.Resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	opts := metav1.ListOptions{Limit: ListPageSize}
	if sel != nil && !sel.Empty() {
		opts.LabelSelector = sel.String()
	}
	var out []unstructured.Unstructured
	for {
		l, err := ri.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, l.Items...)
		if l.GetContinue() == "" {
			return out, nil
		}
		opts.Continue = l.GetContinue()
	}
}
