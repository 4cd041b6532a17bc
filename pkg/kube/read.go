package kube

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/lru"

	"github.com/loomxr/loom/pkg/mirror"
	"github.com/loomxr/loom/pkg/reconcile"
	"github.com/loomxr/loom/pkg/telemetry"
)

// The read path. Resources.Get answers from three places, in order:
//
//  1. what this replica last heard from the API server about the object:
//     the response to its own last write (create, update, patch, apply) or
//     GET of it, kept by key in a bounded LRU cache;
//  2. the object mirror (package mirror), which the watcher writes before it
//     publishes the event naming a change;
//  3. a GET, whose answer goes into the cache.
//
// The first two answer only when the caller may take them, and then with
// the newer of their two versions (an older one than the watcher already
// saw would be written back, and the newer one's event would make the
// handler write again):
//
//   - The object the handled event names (reconcile.RequestFrom), when the
//     event carries a resourceVersion: the cache or mirror entry must be at
//     least that new. This is always safe: a handler never needs more than
//     the version whose change it was told about, and a newer change brings
//     another event.
//   - Any object, under a context made by Guarded: the newer of the cache's
//     and the mirror's entries, whatever their age. The caller promises that
//     every write it bases on the answer is guarded (a resourceVersion
//     precondition, create-and-AlreadyExists, server-side apply), so that a
//     stale answer costs a failed or superseded write, never a lost change;
//     and the watcher mirrors before it publishes, so a newer version than
//     the one read always brings an event of its own.
//   - Anything else is a GET, as it is without a mirror.
//
// An object the mirror has no entry for (Unknown) is never taken as absent:
// it is read from the API server. Secrets are never read from the mirror
// (they are not in it) nor cached. A write that fails with a conflict, or a
// read or write that finds the object gone or already there, makes the next
// read of that object a GET whatever the context says, so that a handler
// that lost a race on a stale answer reads the truth when it tries again.
//
// Without WithMirror, Get is a GET and nothing is cached.

// DefaultCacheSize is how many objects the read path remembers by default.
// An entry answers the reads that follow a write of the object before the
// watcher has mirrored the write, a few seconds at most, so a few hundred
// are enough for hundreds of writes a second. Decoded objects are the
// bulk of a worker's live heap (2,048 of them were more than half of the
// renderer's under `make bench`), which the garbage collector marks on every
// cycle; memory stays flat whatever the number of claims.
const DefaultCacheSize = 512

// A Mirror answers reads from the object mirror; *mirror.Reader satisfies
// it. See mirror.Reader.Get and List for the contract.
type Mirror interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name, minResourceVersion string) (*unstructured.Unstructured, mirror.State, error)
	List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error)
}

// An Option configures Resources.
type Option func(*Resources)

// WithMirror makes Get read the service's own write responses and m before
// the API server, as the read path above says. Without it (the default) Get
// always GETs.
func WithMirror(m Mirror) Option {
	return func(r *Resources) { r.mirror = m }
}

// WithCacheSize sets how many objects the read path remembers (default
// DefaultCacheSize). It matters only with WithMirror.
func WithCacheSize(n int) Option {
	return func(r *Resources) { r.cacheSize = n }
}

// Read sources, as the loom.kube.reads metric names them.
const (
	sourceOwn    = "own"
	sourceMirror = "mirror"
	sourceAPI    = "api"
)

// readPath is the state of the read path of one Resources.
type readPath struct {
	once  sync.Once
	cache *lru.Cache
	reads metric.Int64Counter
	attrs *telemetry.Attrs
}

// An entry is what the cache holds of one object: its last version heard
// from the API server, or, with obj nil, a mark that the next read must GET.
type entry struct {
	obj *unstructured.Unstructured
}

type cacheKey struct {
	group, kind, namespace, name string
}

func keyOf(gvk schema.GroupVersionKind, namespace, name string) cacheKey {
	return cacheKey{group: gvk.Group, kind: gvk.Kind, namespace: namespace, name: name}
}

type guardedKey struct{}

// Guarded returns a context under which Get may answer with any version of
// an object that the read path holds (see the read path above). Use it only
// for reads whose every following write is guarded by a resourceVersion
// precondition, create-and-AlreadyExists, or server-side apply. It changes
// nothing without WithMirror.
func Guarded(ctx context.Context) context.Context {
	return context.WithValue(ctx, guardedKey{}, true)
}

type wholeKindKey struct{}

// WholeKind returns a context under which List answers from the object
// mirror, a scan of the kind's entries, instead of a LIST. The caller
// promises that the watcher watches every object of the kind (no label
// selector: ReferenceRules, for example, not a composed kind watched only
// where labelled), and that what it bases on the answer tolerates the
// mirror's lag: a newer object brings an event of its own. A mirror that
// cannot be read falls back to a LIST. It changes nothing without
// WithMirror, or for Secrets.
func WholeKind(ctx context.Context) context.Context {
	return context.WithValue(ctx, wholeKindKey{}, true)
}

func wholeKind(ctx context.Context) bool {
	w, _ := ctx.Value(wholeKindKey{}).(bool)
	return w
}

// listMirror is List from the mirror; ok is false when the mirror cannot
// answer.
func (r *Resources) listMirror(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]unstructured.Unstructured, bool) {
	r.init()
	items, err := r.mirror.List(ctx, gvk, namespace, sel)
	if err != nil {
		return nil, false
	}
	r.count(ctx, sourceMirror)
	out := make([]unstructured.Unstructured, 0, len(items))
	for _, u := range items {
		out = append(out, *u)
	}
	return out, true
}

type latestKey struct{}

// Latest returns a context under which Get reads the API server, whatever
// else the context allows (Guarded, the handled event), and remembers the
// answer as a GET does. It is for the rare read that confirms what the read
// path answered before a write that costs more than a GET and is worth
// making only if the answer is current: a reference that waits for a
// target the mirror shows not Ready yet, say, while the watcher has not yet
// mirrored the target turning Ready.
func Latest(ctx context.Context) context.Context {
	return context.WithValue(ctx, latestKey{}, true)
}

// IsLatest reports whether ctx was made by Latest, for readers other than
// Resources that honour it.
func IsLatest(ctx context.Context) bool {
	l, _ := ctx.Value(latestKey{}).(bool)
	return l
}

func latest(ctx context.Context) bool { return IsLatest(ctx) }

func guarded(ctx context.Context) bool {
	g, _ := ctx.Value(guardedKey{}).(bool)
	return g
}

func (r *Resources) init() {
	r.read.once.Do(func() {
		n := r.cacheSize
		if n <= 0 {
			n = DefaultCacheSize
		}
		r.read.cache = lru.New(n)
		r.read.attrs = telemetry.NewAttrs(nil, "source")
		// Instrument creation fails only for invalid names, a constant
		// here; a failed instrument is a no-op one.
		r.read.reads, _ = otel.Meter("github.com/loomxr/loom/pkg/kube").Int64Counter("loom.kube.reads",
			metric.WithDescription("Reads of objects through the read path, by source: own (this replica's last write or read of the object), mirror (the object mirror), api (a GET)."))
	})
}

// usesMirror reports whether reads of kind gvk go through the read path.
func (r *Resources) usesMirror(gvk schema.GroupVersionKind) bool {
	return r.mirror != nil && mirror.Mirrored(gvk.GroupKind())
}

// minVersion returns the resourceVersion a read of the object must reach to
// be answered without a GET, and whether it may be answered so at all.
func minVersion(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (string, bool) {
	if latest(ctx) {
		return "", false
	}
	if req, ok := reconcile.RequestFrom(ctx); ok && req.Event != nil {
		o := req.Event.GetObject()
		rv := req.Event.GetResourceVersion()
		if rv != "" && o.GetGroup() == gvk.Group && o.GetKind() == gvk.Kind && o.GetNamespace() == namespace && o.GetName() == name {
			return rv, true
		}
	}
	if guarded(ctx) {
		return "", true
	}
	return "", false
}

// get is Get through the read path.
func (r *Resources) get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	r.init()
	k := keyOf(gvk, namespace, name)
	var own *unstructured.Unstructured
	if v, ok := r.read.cache.Get(k); ok {
		e := v.(entry) //nolint:forcetypeassert // The cache holds only entries.
		if e.obj == nil {
			return r.getAPI(ctx, gvk, namespace, name)
		}
		own = e.obj
	}
	want, ok := minVersion(ctx, gvk, namespace, name)
	if !ok {
		return r.getAPI(ctx, gvk, namespace, name)
	}
	if own != nil && !sameVersion(own, gvk) {
		own = nil
	}
	// The mirror is asked even when the own copy is new enough: an answer
	// is the newest version either holds, because a handler that reads an
	// older one than the watcher already saw writes what it saw, and then
	// writes again when the newer version's event comes. One JetStream
	// read saves that API write.
	m, st, err := r.mirror.Get(ctx, gvk, namespace, name, want)
	fresh := err == nil && st == mirror.Fresh
	switch {
	case own != nil && fresh && newer(own, m):
		r.count(ctx, sourceOwn)
		return own.DeepCopy(), nil
	case fresh:
		r.count(ctx, sourceMirror)
		return m, nil
	case own != nil && want != "" && mirror.AtLeast(own.GetResourceVersion(), want):
		// The mirror cannot answer, but the own copy is as new as the
		// handled event.
		r.count(ctx, sourceOwn)
		return own.DeepCopy(), nil
	case err == nil && st == mirror.Unknown:
		// Never seen by the watcher (or held at another version of the
		// kind): only the API server can answer.
		u, gerr := r.getAPI(ctx, gvk, namespace, name)
		if kerrors.IsNotFound(gerr) {
			// Neither knows it: it does not exist yet, or no longer. An
			// entry the mirror gets later is the watcher's news of its
			// creation (or, from a watcher behind by a creation and a
			// deletion both older than this answer, as stale as any
			// entry, which guarded writes tolerate): the next read may
			// take it rather than GET again. Where the mirror held the
			// object, NotFound keeps the next read a GET (Written): the
			// entry is what is left of a deleted object.
			r.read.cache.Remove(k)
		}
		return u, gerr
	default:
		// Stale, Unknown (never seen, or deleted: an entry we hold may be
		// all that is left of it), or a mirror that cannot be read: only
		// the API server can answer.
		return r.getAPI(ctx, gvk, namespace, name)
	}
}

// getAPI GETs the object and remembers the answer.
func (r *Resources) getAPI(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	r.count(ctx, sourceAPI)
	ri, err := r.Resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	return r.Written(gvk, namespace, name, u, err)
}

// Written records the outcome of a write (or read) of an object through the
// API server, and returns obj and err unchanged, so that a client's write
// method can end with
//
//	return c.Written(gvk, namespace, name, r.Update(ctx, obj, opts))
//
// A successful answer becomes the object's cached version; a conflict, or
// an object gone or already there, makes the next read of the object a GET.
// Other errors forget nothing: they say nothing of the object. It does
// nothing without WithMirror, or for Secrets.
func (r *Resources) Written(gvk schema.GroupVersionKind, namespace, name string, obj *unstructured.Unstructured, err error) (*unstructured.Unstructured, error) {
	if !r.usesMirror(gvk) {
		return obj, err
	}
	r.init()
	k := keyOf(gvk, namespace, name)
	switch {
	case err == nil && obj != nil:
		r.read.cache.Add(k, entry{obj: obj.DeepCopy()})
	case kerrors.IsConflict(err) || kerrors.IsNotFound(err) || kerrors.IsAlreadyExists(err):
		r.read.cache.Add(k, entry{})
	}
	return obj, err
}

// Forget makes the next read of the object a GET; for a client's deletes.
// It does nothing without WithMirror.
func (r *Resources) Forget(gvk schema.GroupVersionKind, namespace, name string) {
	if !r.usesMirror(gvk) {
		return
	}
	r.init()
	r.read.cache.Add(keyOf(gvk, namespace, name), entry{})
}

func (r *Resources) count(ctx context.Context, source string) {
	r.read.reads.Add(context.WithoutCancel(ctx), 1, r.read.attrs.Option(source))
}

// sameVersion reports whether u is held at the version of its kind that gvk
// names (an empty version accepts any), as the mirror's Reader checks.
func sameVersion(u *unstructured.Unstructured, gvk schema.GroupVersionKind) bool {
	return gvk.Version == "" || u.GroupVersionKind().Version == gvk.Version
}

// newer reports whether a is strictly newer than b, by resourceVersion.
func newer(a, b *unstructured.Unstructured) bool {
	return a.GetResourceVersion() != b.GetResourceVersion() && mirror.AtLeast(a.GetResourceVersion(), b.GetResourceVersion())
}
