// Package function connects the renderer to composition functions: it
// resolves a function name to the endpoint and TLS material of its loom.dev
// Function, and fetches the extra resources functions require.
package function

import (
	"context"
	"fmt"
	"sync"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	loomv1alpha1 "github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
	"github.com/loomxr/loom/pkg/fn"
)

// GVK is the kind of a loom.dev Function.
var GVK = loomv1alpha1.SchemeGroupVersion.WithKind("Function")

// A Client reads objects.
type Client interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]unstructured.Unstructured, error)
}

// Resolver maps function names to Targets from loom.dev Functions, caching
// each for a TTL; a change of a Function invalidates it on the replica that
// handles the change. It is safe for concurrent use.
type Resolver struct {
	client  Client
	secrets fn.CredentialFetcher
	ttl     time.Duration
	now     func() time.Time

	mu    sync.Mutex
	cache map[string]resolved
}

type resolved struct {
	target fn.Target
	at     time.Time
}

// NewResolver returns a Resolver reading TLS material through secrets.
func NewResolver(c Client, secrets fn.CredentialFetcher, ttl time.Duration) *Resolver {
	return &Resolver{client: c, secrets: secrets, ttl: ttl, now: time.Now, cache: map[string]resolved{}}
}

// Resolve implements fn.Resolver.
func (r *Resolver) Resolve(ctx context.Context, name string) (fn.Target, error) {
	r.mu.Lock()
	c, ok := r.cache[name]
	r.mu.Unlock()
	if ok && r.now().Sub(c.at) < r.ttl {
		return c.target, nil
	}
	u, err := r.client.Get(ctx, GVK, "", name)
	if kerrors.IsNotFound(err) {
		return fn.Target{}, fmt.Errorf("function %q: no Function %s of that name", name, GVK.GroupKind())
	}
	if err != nil {
		return fn.Target{}, fmt.Errorf("cannot get Function %q: %w", name, err)
	}
	f := &loomv1alpha1.Function{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, f); err != nil {
		return fn.Target{}, fmt.Errorf("cannot decode Function %q: %w", name, err)
	}
	t, err := fn.TargetFromFunction(ctx, f, r.secrets)
	if err != nil {
		return fn.Target{}, err
	}
	r.mu.Lock()
	r.cache[name] = resolved{target: t, at: r.now()}
	r.mu.Unlock()
	return t, nil
}

// Invalidate forgets the named function's Target.
func (r *Resolver) Invalidate(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cache, name)
}

var _ fn.Resolver = (*Resolver)(nil)

// Fetcher reads the extra resources functions require: one GET by name, or
// one LIST by labels. It implements fn.ResourceFetcher.
type Fetcher struct {
	client Client
}

// NewFetcher returns a Fetcher.
func NewFetcher(c Client) *Fetcher { return &Fetcher{client: c} }

// FetchResources implements fn.ResourceFetcher.
func (f *Fetcher) FetchResources(ctx context.Context, s fn.Selector) ([]map[string]any, error) {
	gv, err := schema.ParseGroupVersion(s.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("cannot fetch %s: %w", s, err)
	}
	gvk := gv.WithKind(s.Kind)
	if s.Name != "" {
		u, err := f.client.Get(ctx, gvk, s.Namespace, s.Name)
		if kerrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cannot fetch %s: %w", s, err)
		}
		return []map[string]any{u.Object}, nil
	}
	items, err := f.client.List(ctx, gvk, s.Namespace, labels.SelectorFromSet(s.MatchLabels))
	if err != nil {
		return nil, fmt.Errorf("cannot fetch %s: %w", s, err)
	}
	out := make([]map[string]any, 0, len(items))
	for i := range items {
		out = append(out, items[i].Object)
	}
	return out, nil
}

var _ fn.ResourceFetcher = (*Fetcher)(nil)
