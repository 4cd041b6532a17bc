// Package xrd keeps an index of CompositeResourceDefinitions (XRDs), so that
// a request naming a claim or a composite resource (XR) can be matched to the
// XRD that defines its kind. The binder and the renderer share it.
//
// The index is loaded with one LIST and refreshed when a lookup misses (a new
// XRD) or when it is older than its time to live (a changed XRD), at most once
// per minimum interval, so a flood of requests for an unknown kind costs one
// LIST, not one per request.
package xrd

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	kitkube "github.com/loomxr/loom/pkg/kube"
)

// A Lister lists every XRD, as unstructured objects.
type Lister interface {
	List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]unstructured.Unstructured, error)
}

// An Option configures an Index.
type Option func(*Index)

// WithTTL sets how old the index may be before a lookup reloads it (default
// 30s). A changed XRD reloads it at once on the replica that handles the
// change (see Invalidate); other replicas see the change within the TTL.
func WithTTL(d time.Duration) Option { return func(i *Index) { i.ttl = d } }

// WithMinInterval sets the least time between two loads (default 1s).
func WithMinInterval(d time.Duration) Option { return func(i *Index) { i.minInterval = d } }

// Index maps claim and XR kinds to their XRDs. It is safe for concurrent use.
type Index struct {
	list        Lister
	ttl         time.Duration
	minInterval time.Duration
	now         func() time.Time

	mu       sync.Mutex
	loadedAt time.Time
	byClaim  map[schema.GroupKind]*xv1.CompositeResourceDefinition
	byXR     map[schema.GroupKind]*xv1.CompositeResourceDefinition
}

// NewIndex returns an empty index that loads XRDs through l on first use.
func NewIndex(l Lister, o ...Option) *Index {
	i := &Index{list: l, ttl: 30 * time.Second, minInterval: time.Second, now: time.Now}
	for _, fn := range o {
		fn(i)
	}
	return i
}

// ForClaim returns the XRD that offers claims of kind gk, or nil if none does.
func (i *Index) ForClaim(ctx context.Context, gk schema.GroupKind) (*xv1.CompositeResourceDefinition, error) {
	d, claim, err := i.Lookup(ctx, gk)
	if err != nil || !claim {
		return nil, err
	}
	return d, nil
}

// ForComposite returns the XRD that defines XRs of kind gk, or nil if none
// does.
func (i *Index) ForComposite(ctx context.Context, gk schema.GroupKind) (*xv1.CompositeResourceDefinition, error) {
	d, claim, err := i.Lookup(ctx, gk)
	if err != nil || claim {
		return nil, err
	}
	return d, nil
}

// Lookup returns the XRD that defines kind gk, and whether gk is its claim
// kind (else its XR kind). It returns nil if no XRD defines gk.
func (i *Index) Lookup(ctx context.Context, gk schema.GroupKind) (*xv1.CompositeResourceDefinition, bool, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	find := func() (*xv1.CompositeResourceDefinition, bool) {
		if d := i.byClaim[gk]; d != nil {
			return d, true
		}
		return i.byXR[gk], false
	}
	age := i.now().Sub(i.loadedAt)
	if i.byXR != nil && age < i.ttl {
		if d, claim := find(); d != nil {
			return d, claim, nil
		}
	}
	if i.byXR != nil && age < i.minInterval {
		d, claim := find()
		return d, claim, nil
	}
	if err := i.load(ctx); err != nil {
		return nil, false, err
	}
	d, claim := find()
	return d, claim, nil
}

// Invalidate makes the next lookup reload the index.
func (i *Index) Invalidate() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.loadedAt = time.Time{}
}

func (i *Index) load(ctx context.Context) error {
	// The watcher watches every XRD: with the object mirror, the list is
	// a scan of it, not a LIST.
	items, err := i.list.List(kitkube.WholeKind(ctx), xv1.CompositeResourceDefinitionGroupVersionKind, "", nil)
	if err != nil {
		return fmt.Errorf("cannot list composite resource definitions: %w", err)
	}
	byClaim := map[schema.GroupKind]*xv1.CompositeResourceDefinition{}
	byXR := map[schema.GroupKind]*xv1.CompositeResourceDefinition{}
	for _, u := range items {
		d := &xv1.CompositeResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
			// An XRD the API server accepted but that does not decode
			// defines nothing a service can serve; skip it rather than
			// fail every other kind.
			continue
		}
		byXR[schema.GroupKind{Group: d.Spec.Group, Kind: d.Spec.Names.Kind}] = d
		if d.OffersClaim() {
			byClaim[schema.GroupKind{Group: d.Spec.Group, Kind: d.Spec.ClaimNames.Kind}] = d
		}
	}
	i.byClaim, i.byXR, i.loadedAt = byClaim, byXR, i.now()
	return nil
}
