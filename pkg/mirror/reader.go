package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/objjson"
)

// A Reader reads objects from the mirror. Its methods are safe for
// concurrent use and block for one JetStream round trip (List: one scan of
// a kind's keys). Objects it returns are the caller's to change.
type Reader struct {
	kv     jetstream.KeyValue
	decode func([]byte) (*unstructured.Unstructured, error)
}

// A ReaderOption configures a Reader.
type ReaderOption func(*Reader)

// WithoutManagedFields makes the Reader leave every object's
// metadata.managedFields out (objjson.DecodeObjectLean), for a service that
// never writes back what it reads nor checks what a server-side apply of it
// would change, which reads managedFields.
func WithoutManagedFields() ReaderOption {
	return func(r *Reader) { r.decode = objjson.DecodeObjectLean }
}

// NewReader returns a Reader of the bucket kv (see EnsureBucket).
func NewReader(kv jetstream.KeyValue, o ...ReaderOption) *Reader {
	r := &Reader{kv: kv, decode: objjson.DecodeObject}
	for _, fn := range o {
		fn(r)
	}
	return r
}

// Get reads one object and tells how its entry compares with
// minResourceVersion, usually the resourceVersion of the event the caller
// handles (see AtLeast; empty accepts any entry):
//
//   - Fresh: the object, at least as new as minResourceVersion;
//   - Stale: the object, older than minResourceVersion (or not comparable);
//   - Unknown: nil; the mirror has no entry, or holds the object at another
//     version of the kind than gvk names (an empty gvk.Version accepts any).
//     Unknown is never NotFound: read the API server.
//
// An error means the mirror could not be read; the caller reads the API
// server as it would for Unknown.
func (r *Reader) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name, minResourceVersion string) (*unstructured.Unstructured, State, error) {
	k := KeyOf(gvk.GroupKind(), namespace, name)
	e, err := r.kv.Get(ctx, k.String())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, Unknown, nil
	}
	if err != nil {
		return nil, Unknown, fmt.Errorf("cannot read %s %s from the mirror: %w", gvk.Kind, name, err)
	}
	u, err := r.decode(e.Value())
	if err != nil {
		return nil, Unknown, fmt.Errorf("cannot decode %s %s from the mirror: %w", gvk.Kind, name, err)
	}
	if gvk.Version != "" && u.GroupVersionKind().Version != gvk.Version {
		return nil, Unknown, nil
	}
	if !AtLeast(u.GetResourceVersion(), minResourceVersion) {
		return u, Stale, nil
	}
	return u, Fresh, nil
}

// List returns the mirrored objects of a kind whose labels match sel (nil
// matches everything), in one namespace or, when namespace is empty, in all
// namespaces (and cluster-scoped ones), sorted by namespace and name. Objects
// held at another version of the kind than gvk names are left out, as Get
// reports them Unknown.
//
// List scans the keys of the kind (a subject filter on the bucket: see
// Prefix) and filters by label in the reader, so it costs one read of every
// object of the kind, or of the kind in the namespace. That is simple and
// correct, and cheap next to an API LIST while kinds hold thousands of
// objects; a label index kept by the Writer would make it proportional to
// the answer.
//
// The answer is what the watcher mirrored: it is complete only for kinds
// the watcher watches and has listed (the caller knows which kinds those are:
// the ones events name). Objects are as fresh as their entries; List makes
// no promise about any resourceVersion.
func (r *Reader) List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	kw, err := r.kv.WatchFiltered(ctx, []string{Prefix(gvk.GroupKind(), namespace)}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("cannot list %s from the mirror: %w", gvk.Kind, err)
	}
	defer func() { _ = kw.Stop() }()
	var out []*unstructured.Unstructured
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cannot list %s from the mirror: %w", gvk.Kind, ctx.Err())
		case e, ok := <-kw.Updates():
			if !ok {
				return nil, fmt.Errorf("cannot list %s from the mirror: the watch closed", gvk.Kind)
			}
			if e == nil {
				// The current entries are through.
				slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
					if c := strings.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
						return c
					}
					return strings.Compare(a.GetName(), b.GetName())
				})
				return out, nil
			}
			u, err := r.decode(e.Value())
			if err != nil {
				return nil, fmt.Errorf("cannot decode %s from the mirror: %w", e.Key(), err)
			}
			if gvk.Version != "" && u.GroupVersionKind().Version != gvk.Version {
				continue
			}
			if sel == nil || sel.Matches(labels.Set(u.GetLabels())) {
				out = append(out, u)
			}
		}
	}
}
