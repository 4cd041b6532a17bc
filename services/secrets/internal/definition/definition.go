// Package definition reads what the platform defines for composite
// resources (XRs): their CompositeResourceDefinitions (XRDs), and the
// Compositions and CompositionRevisions they are composed with, together
// with the connection.Plan of each. Everything is read by name (the service
// may not list them) through the read path, the object mirror before a GET
// (kube.Guarded: these objects change rarely, and their changes reach the
// XRs as events of their own), and cached:
//
//   - an XRD is found by name, <plural>.<group> of the XR's kind, and kept
//     for a TTL (connectionSecretKeys changes apply within it);
//   - a CompositionRevision's spec never changes, so it is kept until the
//     cache is full;
//   - a Composition (used only while an XR has no revision yet) is kept for
//     the TTL.
package definition

import (
	"context"
	"fmt"
	"sync"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	kitkube "github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/services/secrets/internal/connection"
)

// A Client reads objects (see kube.Client).
type Client interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error)
}

// DefaultTTL is how long XRDs and Compositions are cached.
const DefaultTTL = 30 * time.Second

// maxEntries bounds each cache; a full cache is dropped and refilled.
const maxEntries = 4096

var (
	xrdGVK         = v1.SchemeGroupVersion.WithKind(v1.CompositeResourceDefinitionKind)
	compositionGVK = v1.SchemeGroupVersion.WithKind("Composition")
	revisionGVK    = v1.SchemeGroupVersion.WithKind("CompositionRevision")
)

// A Composition is what an XR is composed with: a CompositionRevision or,
// before the XR has one, a Composition.
type Composition struct {
	// Name describes it for messages, e.g. `Composition "x"` or
	// `CompositionRevision "x-1a2b3c4"`.
	Name string
	// Composition is the name of the Composition.
	Composition string
	// Spec is its spec.
	Spec *v1.CompositionSpec
	// Plan is its connection.Plan.
	Plan connection.Plan
}

// Cache reads XRDs, Compositions and revisions through a Client. It is safe
// for concurrent use.
type Cache struct {
	client Client
	ttl    time.Duration
	now    func() time.Time

	mu    sync.Mutex
	xrds  map[schema.GroupKind]timed[*v1.CompositeResourceDefinition]
	comps map[string]timed[*Composition]
	revs  map[string]*Composition
}

type timed[T any] struct {
	v  T
	at time.Time
}

// New returns a Cache that keeps XRDs and Compositions for ttl.
func New(c Client, ttl time.Duration) *Cache {
	return &Cache{
		client: c, ttl: ttl, now: time.Now,
		xrds:  map[schema.GroupKind]timed[*v1.CompositeResourceDefinition]{},
		comps: map[string]timed[*Composition]{},
		revs:  map[string]*Composition{},
	}
}

// ForComposite returns the XRD that defines XRs of kind gvk, or nil if there
// is none (gvk is not an XR kind). The result must not be modified.
func (c *Cache) ForComposite(ctx context.Context, gvk schema.GroupVersionKind) (*v1.CompositeResourceDefinition, error) {
	gk := gvk.GroupKind()
	c.mu.Lock()
	e, ok := c.xrds[gk]
	c.mu.Unlock()
	if ok && c.now().Sub(e.at) < c.ttl {
		return e.v, nil
	}
	m, err := c.client.Mapping(gvk)
	if err != nil {
		return nil, fmt.Errorf("cannot map %s to a resource: %w", gvk, err)
	}
	name := m.Resource.Resource + "." + gvk.Group
	u, err := c.client.Get(kitkube.Guarded(ctx), xrdGVK, "", name)
	var xrd *v1.CompositeResourceDefinition
	switch {
	case kerrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("cannot get CompositeResourceDefinition %q: %w", name, err)
	default:
		xrd = &v1.CompositeResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, xrd); err != nil {
			return nil, fmt.Errorf("cannot decode CompositeResourceDefinition %q: %w", name, err)
		}
		if xrd.Spec.Names.Kind != gvk.Kind {
			xrd = nil
		}
	}
	c.mu.Lock()
	if len(c.xrds) >= maxEntries {
		c.xrds = map[schema.GroupKind]timed[*v1.CompositeResourceDefinition]{}
	}
	c.xrds[gk] = timed[*v1.CompositeResourceDefinition]{v: xrd, at: c.now()}
	c.mu.Unlock()
	return xrd, nil
}

// Revision returns the CompositionRevision name, or nil if it does not
// exist. A revision whose connection details cannot be planned is an error
// of class connection.ErrInvalid.
func (c *Cache) Revision(ctx context.Context, name string) (*Composition, error) {
	c.mu.Lock()
	r, ok := c.revs[name]
	c.mu.Unlock()
	if ok {
		return r, nil
	}
	u, err := c.client.Get(kitkube.Guarded(ctx), revisionGVK, "", name)
	if kerrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot get CompositionRevision %q: %w", name, err)
	}
	rev := &v1.CompositionRevision{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rev); err != nil {
		return nil, fmt.Errorf("%w: cannot decode CompositionRevision %q: %w", connection.ErrInvalid, name, err)
	}
	comp := rev.Labels[v1.LabelCompositionName]
	r, err = newComposition(fmt.Sprintf("CompositionRevision %q", name), comp, &rev.Spec.CompositionSpec)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.revs) >= maxEntries {
		c.revs = map[string]*Composition{}
	}
	c.revs[name] = r
	c.mu.Unlock()
	return r, nil
}

// Composition returns the Composition name, or nil if it does not exist.
func (c *Cache) Composition(ctx context.Context, name string) (*Composition, error) {
	c.mu.Lock()
	e, ok := c.comps[name]
	c.mu.Unlock()
	if ok && c.now().Sub(e.at) < c.ttl {
		return e.v, nil
	}
	u, err := c.client.Get(kitkube.Guarded(ctx), compositionGVK, "", name)
	var comp *Composition
	switch {
	case kerrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("cannot get Composition %q: %w", name, err)
	default:
		cp := &v1.Composition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cp); err != nil {
			return nil, fmt.Errorf("%w: cannot decode Composition %q: %w", connection.ErrInvalid, name, err)
		}
		if comp, err = newComposition(fmt.Sprintf("Composition %q", name), name, &cp.Spec); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	if len(c.comps) >= maxEntries {
		c.comps = map[string]timed[*Composition]{}
	}
	c.comps[name] = timed[*Composition]{v: comp, at: c.now()}
	c.mu.Unlock()
	return comp, nil
}

func newComposition(desc, comp string, spec *v1.CompositionSpec) (*Composition, error) {
	p, err := connection.PlanFor(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", connection.ErrInvalid, desc, err)
	}
	return &Composition{Name: desc, Composition: comp, Spec: spec, Plan: p}, nil
}
