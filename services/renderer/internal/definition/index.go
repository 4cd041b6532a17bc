// Package definition reconciles CompositeResourceDefinitions (XRDs): it
// generates and applies the CRDs of their composite resources (XRs) and
// claims, reports the Established and Offered conditions, and on deletion
// removes the claims, then the XRs, then the CRDs. It also keeps the index
// that maps a kind to the XRD defining it, which the rest of the renderer
// uses to recognise XRs.
package definition

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// A Lister lists objects of a kind.
type Lister interface {
	List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]unstructured.Unstructured, error)
}

// An IndexOption configures an Index.
type IndexOption func(*Index)

// WithTTL sets how old the index may be before a lookup reloads it (default
// 30s). A changed XRD reloads it at once on the replica that handles the
// change; other replicas see the change within the TTL.
func WithTTL(d time.Duration) IndexOption { return func(i *Index) { i.ttl = d } }

// WithMinInterval sets the least time between two loads (default 1s), so a
// flood of requests for an unknown kind costs one LIST, not one per request.
func WithMinInterval(d time.Duration) IndexOption { return func(i *Index) { i.minInterval = d } }

// Index maps XR kinds to the XRDs that define them. It is loaded with one
// LIST of every XRD and reloaded when a lookup misses (a new XRD), when it
// is older than its TTL, or after Invalidate. It is safe for concurrent use.
type Index struct {
	list        Lister
	ttl         time.Duration
	minInterval time.Duration
	now         func() time.Time

	mu       sync.Mutex
	loadedAt time.Time
	loaded   bool
	byXR     map[schema.GroupKind]*v1.CompositeResourceDefinition
}

// NewIndex returns an empty index that loads XRDs through l on first use.
func NewIndex(l Lister, o ...IndexOption) *Index {
	i := &Index{list: l, ttl: 30 * time.Second, minInterval: time.Second, now: time.Now}
	for _, fn := range o {
		fn(i)
	}
	return i
}

// ForComposite returns the XRD that defines XRs of kind gk, or nil if none
// does. Callers must not modify the returned XRD.
func (i *Index) ForComposite(ctx context.Context, gk schema.GroupKind) (*v1.CompositeResourceDefinition, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	age := i.now().Sub(i.loadedAt)
	if i.loaded && age < i.ttl {
		if d := i.byXR[gk]; d != nil {
			return d, nil
		}
	}
	if i.loaded && age < i.minInterval {
		return i.byXR[gk], nil
	}
	if err := i.load(ctx); err != nil {
		return nil, err
	}
	return i.byXR[gk], nil
}

// Invalidate makes the next lookup reload the index.
func (i *Index) Invalidate() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.loadedAt = time.Time{}
}

func (i *Index) load(ctx context.Context) error {
	items, err := i.list.List(ctx, v1.CompositeResourceDefinitionGroupVersionKind, "", nil)
	if err != nil {
		return fmt.Errorf("cannot list composite resource definitions: %w", err)
	}
	byXR := make(map[schema.GroupKind]*v1.CompositeResourceDefinition, len(items))
	for _, u := range items {
		d := &v1.CompositeResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
			// An XRD the API server accepted but that does not decode
			// defines nothing the renderer can serve; skip it rather than
			// fail every other kind.
			continue
		}
		byXR[schema.GroupKind{Group: d.Spec.Group, Kind: d.Spec.Names.Kind}] = d
	}
	i.byXR, i.loadedAt, i.loaded = byXR, i.now(), true
	return nil
}
