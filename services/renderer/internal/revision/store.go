// Package revision turns every change of a Composition into an immutable,
// numbered CompositionRevision, as Crossplane does, requeues the XRs that
// should move to a new revision, and keeps the renderer's short-lived cache
// of revisions.
//
// A revision is named <composition>-<first 7 hex characters of the hash>,
// where the hash is the SHA-256 of the Composition's labels, annotations and
// spec (each as YAML). It carries the labels crossplane.io/composition-name
// and crossplane.io/composition-hash (the hash, cut to 63 characters), the
// Composition's own labels and annotations, a controller reference to the
// Composition, and spec.revision: one more than the latest revision. A
// Composition that returns to an earlier state gets that state's revision
// back, renumbered to latest+1, instead of a new one.
//
// The watcher routes changes of Compositions and of their revisions to the
// renderer with the Composition as the target. When such an event finds the
// revisions changed (a revision was created or renumbered, by this handling
// or the one before), the reconciler lists the XRs of the Composition's kind
// and publishes a REQUEUE event for each that uses the Composition under the
// Automatic update policy and is not on its latest revision, and for each
// that has no Composition yet. Resyncs of unchanged Compositions list
// nothing.
package revision

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

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/composition"
	kitkube "github.com/loomxr/loom/pkg/kube"
)

// GVKs of the objects this package reads and writes.
var (
	CompositionGVK = composition.CompositionGVK //nolint:gochecknoglobals // Treated as a constant.
	RevisionGVK    = composition.RevisionGVK    //nolint:gochecknoglobals // Treated as a constant.
)

// A Reader reads objects.
type Reader interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]unstructured.Unstructured, error)
}

// A Store reads CompositionRevisions through a cache. The revisions of one
// Composition are listed at most once per TTL unless a caller asks for fresh
// ones, which it must do when it renders because a Composition or revision
// changed. Revisions are immutable apart from their number, so one read by
// name is served from the cache until the next list of its Composition
// replaces it. A Store is safe for concurrent use.
type Store struct {
	r   Reader
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	lists  map[string]cachedList
	byName map[string]*v1.CompositionRevision
}

type cachedList struct {
	revs []*v1.CompositionRevision
	at   time.Time
}

// maxCachedLists bounds the Compositions whose revisions a Store keeps; past
// it the cache is emptied (a crude but bounded policy: Compositions are few).
const maxCachedLists = 4096

// NewStore returns a Store that caches lists for ttl (0 disables caching).
func NewStore(r Reader, ttl time.Duration) *Store {
	return &Store{r: r, ttl: ttl, now: time.Now, lists: map[string]cachedList{}, byName: map[string]*v1.CompositionRevision{}}
}

// Invalidate drops the cached revisions of the named Composition.
func (s *Store) Invalidate(composition string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.lists[composition]; ok {
		for _, r := range l.revs {
			delete(s.byName, r.GetName())
		}
	}
	delete(s.lists, composition)
}

// List returns the revisions of the named Composition (labelled with its
// name and controlled by a Composition of that name), from the cache if
// fresh is false and the cached list is younger than the TTL.
func (s *Store) List(ctx context.Context, comp string, fresh bool) ([]*v1.CompositionRevision, error) {
	if !fresh && s.ttl > 0 {
		s.mu.Lock()
		l, ok := s.lists[comp]
		s.mu.Unlock()
		if ok && s.now().Sub(l.at) < s.ttl {
			return l.revs, nil
		}
	}
	if !fresh {
		// The watcher watches every revision: a list that need not show
		// the newest (one this replica just created) is a scan of the
		// object mirror, not a LIST.
		ctx = kitkube.WholeKind(ctx)
	}
	items, err := s.r.List(ctx, RevisionGVK, "", composition.RevisionsOf(comp))
	if err != nil {
		return nil, fmt.Errorf("cannot list revisions of Composition %q: %w", comp, err)
	}
	revs, err := composition.Revisions(items, comp)
	if err != nil {
		return nil, err
	}
	if s.ttl > 0 {
		s.mu.Lock()
		if len(s.lists) >= maxCachedLists {
			s.lists, s.byName = map[string]cachedList{}, map[string]*v1.CompositionRevision{}
		}
		s.lists[comp] = cachedList{revs: revs, at: s.now()}
		for _, r := range revs {
			s.byName[r.GetName()] = r
		}
		s.mu.Unlock()
	}
	return revs, nil
}

// Get returns the named revision, from the cache unless fresh is set. It
// returns an error for which kerrors.IsNotFound is true if there is none.
func (s *Store) Get(ctx context.Context, name string, fresh bool) (*v1.CompositionRevision, error) {
	if !fresh {
		s.mu.Lock()
		r, ok := s.byName[name]
		s.mu.Unlock()
		if ok {
			return r, nil
		}
	}
	u, err := s.r.Get(ctx, RevisionGVK, "", name)
	if err != nil {
		if kerrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("cannot get CompositionRevision %q: %w", name, err)
	}
	rev, err := decode(u)
	if err != nil {
		return nil, err
	}
	if s.ttl > 0 {
		s.mu.Lock()
		if len(s.byName) >= maxCachedLists*8 {
			s.lists, s.byName = map[string]cachedList{}, map[string]*v1.CompositionRevision{}
		}
		s.byName[name] = rev
		s.mu.Unlock()
	}
	return rev, nil
}

func decode(u *unstructured.Unstructured) (*v1.CompositionRevision, error) {
	rev := &v1.CompositionRevision{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rev); err != nil {
		return nil, fmt.Errorf("cannot decode CompositionRevision %q: %w", u.GetName(), err)
	}
	return rev, nil
}
