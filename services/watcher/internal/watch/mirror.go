package watch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/loomxr/loom/pkg/mirror"
	"github.com/loomxr/loom/pkg/objjson"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/object"
)

// Mirror is where the watcher writes the objects it watches; *mirror.Writer
// satisfies it. Each method but Send blocks until the change is stored or
// failed.
type Mirror interface {
	// Send sends an object, given as its JSON (package objjson's encoding
	// of it), to replace what its key held, and returns at once. Writes
	// are stored in the order they are sent, and a sent write is never
	// sent again.
	Send(gk schema.GroupKind, namespace, name string, data []byte) mirror.Pending
	// Put writes an object, replacing what its key held.
	Put(ctx context.Context, obj *unstructured.Unstructured) error
	// PutJSON writes an object given as its JSON, replacing what its key
	// held.
	PutJSON(ctx context.Context, gk schema.GroupKind, namespace, name string, data []byte) error
	// Delete purges an object's key.
	Delete(ctx context.Context, gk schema.GroupKind, namespace, name string) error
	// Reconcile purges every key for which exists, asked after the keys
	// are listed, returns false.
	Reconcile(ctx context.Context, exists func(mirror.Key) bool) (int, error)
}

// errNoFull is the failure of a mirror write for which the watcher has no
// full object (the informer's transform did not see it).
var errNoFull = errors.New("no full object to mirror")

// mirrors reports whether the watcher mirrors objects of a kind: with a
// mirror, every kind but Secrets, which stay metadata-only.
func (w *Watcher) mirrors(gvk schema.GroupVersionKind) bool {
	return w.mirror != nil && mirror.Mirrored(gvk.GroupKind())
}

// mirrorState is what a mirrored source has yet to write. The informer
// caches a trimmed copy of each object (package object), so the full object
// exists only between the informer's transform and the handler: full holds
// it for that long. sent holds the objects whose write is sent and not yet
// answered, failed those whose last write failed until a resync writes them.
type mirrorState struct {
	// mu guards full, decoded, sent, seq and failed.
	mu   sync.Mutex
	full map[types.UID]fullObject
	// decoded counts the entries of full held decoded.
	decoded int
	// sent maps an object to the number of its last write sent, while that
	// write's answer has not been handled; seq numbers the writes.
	sent   map[types.UID]uint64
	seq    uint64
	failed map[types.UID]*unstructured.Unstructured
	// writeMu orders what is sent: the handler's writes, and the writes
	// again of those that failed (a resync's, or one at once), so that
	// nothing older is ever stored over something newer.
	writeMu sync.Mutex
}

// keepFull wraps a source's transform: for a mirrored source it keeps the
// object as the API server sent it before trim cuts it down. client-go calls
// the transform for each object it receives (never for objects it already
// cached), in order, before the handler sees the change.
//
// It may call it twice for the same object: a reflector that lists by
// watch-list (sendInitialEvents, on by default since client-go 0.35)
// transforms each object as it streams into a temporary store, then hands
// that store's transformed objects to the queue's Replace, which transforms
// them again. The second call sees trim's own output at the same
// resourceVersion, so the object first seen at a resourceVersion is kept:
// the API server sends each version whole, and what comes again at that
// version can only be it or a copy cut down from it. Without that rule the
// mirror held every listed object trimmed (no spec, no status, no managed
// fields), and every worker that read it saw differences that were not
// there and wrote them.
//
// Held objects are kept decoded while few wait, and encoded as JSON (about
// a tenth of the memory) once maxDecodedFull do: a list's objects are all
// transformed before the handler sees the first of them (a restarted
// watcher's list of every object held the whole cluster's state decoded at
// once, 810 MiB at 5,000 claims), and the handler writes the JSON as it is.
func (s *source) keepFull(trim cache.TransformFunc) cache.TransformFunc {
	if !s.spec.full {
		return trim
	}
	return func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			uid, rv := u.GetUID(), u.GetResourceVersion()
			s.mirror.mu.Lock()
			have, held := s.mirror.full[uid]
			keep := !held || have.rv != rv
			many := s.mirror.decoded >= maxDecodedFull
			s.mirror.mu.Unlock()
			if keep {
				e := fullObject{rv: rv, obj: u}
				if many {
					u.SetGroupVersionKind(s.gvk)
					if data, err := objjson.Append(nil, u.Object); err == nil {
						e = fullObject{rv: rv, data: data}
					}
				}
				s.mirror.mu.Lock()
				if have, held := s.mirror.full[uid]; !held || have.rv != rv {
					s.hold(uid, e)
				}
				s.mirror.mu.Unlock()
			}
		}
		return trim(obj)
	}
}

// maxDecodedFull is how many full objects a source holds decoded for the
// handler; beyond that it holds them encoded.
const maxDecodedFull = 256

// fullObject is a full object the handler has yet to take, at
// resourceVersion rv: decoded (obj), or encoded (data).
type fullObject struct {
	rv   string
	obj  *unstructured.Unstructured
	data []byte
}

// hold makes e the full object held for uid. The caller holds s.mirror.mu.
func (s *source) hold(uid types.UID, e fullObject) {
	if s.mirror.full == nil {
		s.mirror.full = map[types.UID]fullObject{}
	}
	s.drop(uid)
	s.mirror.full[uid] = e
	if e.obj != nil {
		s.mirror.decoded++
	}
}

// drop forgets the full object held for uid. The caller holds s.mirror.mu.
func (s *source) drop(uid types.UID) {
	if have, ok := s.mirror.full[uid]; ok {
		if have.obj != nil {
			s.mirror.decoded--
		}
		delete(s.mirror.full, uid)
	}
}

// takeFull returns the full object of a change at resourceVersion rv, or
// nil, and its JSON when it was held encoded. The transform may already
// hold a newer version of the object (the informer queued several
// changes); that one is returned and kept for its own change. An older one
// is dropped.
func (s *source) takeFull(uid types.UID, rv string) (*unstructured.Unstructured, []byte) {
	s.mirror.mu.Lock()
	e, ok := s.mirror.full[uid]
	if !ok {
		s.mirror.mu.Unlock()
		return nil, nil
	}
	if e.rv == rv || !mirror.AtLeast(e.rv, rv) {
		s.drop(uid)
	}
	s.mirror.mu.Unlock()
	if !mirror.AtLeast(e.rv, rv) {
		return nil, nil
	}
	if e.obj != nil {
		return e.obj, nil
	}
	u, err := objjson.DecodeObject(e.data)
	if err != nil {
		// It was encoded from a decoded object a moment ago.
		return nil, nil
	}
	return u, e.data
}

// unmirrored reports whether the handler has yet to take an object's full
// object to mirror it, or has yet to hear that its write is stored: its
// informer cached a version the mirror may not hold yet.
func (s *source) unmirrored(uid types.UID) bool {
	if !s.spec.full {
		return false
	}
	s.mirror.mu.Lock()
	defer s.mirror.mu.Unlock()
	_, held := s.mirror.full[uid]
	_, sent := s.mirror.sent[uid]
	return held || sent
}

// setFailed records the outcome of writing u.
func (s *source) setFailed(uid types.UID, u *unstructured.Unstructured, err error) {
	s.mirror.mu.Lock()
	defer s.mirror.mu.Unlock()
	s.setFailedLocked(uid, u, err)
}

// setFailedLocked is setFailed for a caller holding s.mirror.mu.
func (s *source) setFailedLocked(uid types.UID, u *unstructured.Unstructured, err error) {
	if err == nil || u == nil {
		delete(s.mirror.failed, uid)
		return
	}
	if s.mirror.failed == nil {
		s.mirror.failed = map[types.UID]*unstructured.Unstructured{}
	}
	s.mirror.failed[uid] = u
}

// failing reports whether the last write of an object failed.
func (s *source) failing(uid types.UID) bool {
	s.mirror.mu.Lock()
	defer s.mirror.mu.Unlock()
	_, ok := s.mirror.failed[uid]
	return ok
}

// A mirrorWrite is a change's write to the mirror, sent and not yet
// answered.
type mirrorWrite struct {
	seq     uint64
	pending mirror.Pending
	// full is the object written (nil for a deletion), data its JSON.
	full *unstructured.Unstructured
	data []byte
}

// maxSentWrites is how many of a source's mirror writes may wait for their
// answer; the handler waits while that many do.
const maxSentWrites = 256

// sendMirror sends the write of a change of m to the mirror and returns it,
// or nil when the watcher is stopping. The handler sends a source's writes
// one after another without waiting for their answers (a write takes a
// round trip to JetStream, 1.5 to 3 ms on a busy machine, which made a
// source with many changes fall seconds behind); the source's pipeline
// waits for each answer in turn and only then publishes the change's events
// (see finishMirror). A deletion is purged at once: the handler waits for
// it.
func (w *Watcher) sendMirror(s *source, typ eventsv1.EventType, m object.Meta) *mirrorWrite {
	select {
	case s.pipe.slots <- struct{}{}:
	case <-w.ctx.Done():
		return nil
	}
	s.mirror.writeMu.Lock()
	defer s.mirror.writeMu.Unlock()
	wr := &mirrorWrite{seq: s.markSent(m.UID)}
	if typ == eventsv1.EventType_EVENT_TYPE_DELETED {
		s.takeFull(m.UID, m.ResourceVersion)
		wr.pending = mirror.Done(w.mirror.Delete(w.ctx, m.GVK.GroupKind(), m.Namespace, m.Name))
		return wr
	}
	wr.full, wr.data = s.takeFull(m.UID, m.ResourceVersion)
	if wr.full == nil {
		wr.pending = mirror.Done(errNoFull)
		return wr
	}
	if wr.data == nil {
		if wr.full.GroupVersionKind() != s.gvk {
			// Written as the source's version; on a copy, for the
			// transform may still be reading the object it holds (a
			// newer version than this change's, taken early).
			wr.full = wr.full.DeepCopy()
			wr.full.SetGroupVersionKind(s.gvk)
		}
		data, err := objjson.Append(make([]byte, 0, 4096), wr.full.Object)
		if err != nil {
			wr.pending = mirror.Done(fmt.Errorf("cannot encode %s %s: %w", m.GVK.Kind, keyOf(m.Namespace, m.Name), err))
			return wr
		}
		wr.data = data
	}
	wr.pending = w.mirror.Send(s.gvk.GroupKind(), m.Namespace, m.Name, wr.data)
	return wr
}

// markSent numbers a write of the object uid about to be sent and records
// it as the object's last; whatever failed before is superseded by it.
func (s *source) markSent(uid types.UID) uint64 {
	s.mirror.mu.Lock()
	defer s.mirror.mu.Unlock()
	s.mirror.seq++
	if s.mirror.sent == nil {
		s.mirror.sent = map[types.UID]uint64{}
	}
	s.mirror.sent[uid] = s.mirror.seq
	delete(s.mirror.failed, uid)
	return s.mirror.seq
}

// finishMirror waits for the answer to a change's write and reports whether
// events that name m may be published: not when the write failed, so that
// no worker is told of a version the mirror does not hold. A put that
// failed is sent once more at once, unless a newer write of the object was
// sent since. A failure is counted and asks for a resync, which writes the
// object again and then publishes it. It also returns the full object it
// wrote (nil for a deletion), which routing may read.
func (w *Watcher) finishMirror(s *source, m object.Meta, wr *mirrorWrite) (*unstructured.Unstructured, bool) {
	ctx := w.ctx
	err := wr.pending.Wait(ctx)
	if err != nil && ctx.Err() == nil && wr.data != nil {
		// Under writeMu no newer write can be sent while this one is.
		s.mirror.writeMu.Lock()
		s.mirror.mu.Lock()
		last := s.mirror.sent[m.UID] == wr.seq
		s.mirror.mu.Unlock()
		if last {
			err = w.mirror.PutJSON(ctx, s.gvk.GroupKind(), m.Namespace, m.Name, wr.data)
		}
		s.mirror.writeMu.Unlock()
	}
	s.mirror.mu.Lock()
	if s.mirror.sent[m.UID] == wr.seq {
		delete(s.mirror.sent, m.UID)
		s.setFailedLocked(m.UID, wr.full, err)
	}
	s.mirror.mu.Unlock()
	if err == nil {
		return wr.full, true
	}
	if ctx.Err() != nil {
		return nil, false
	}
	w.withheld.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("k8s.kind", m.GVK.Kind)))
	w.log.Warn("cannot write object to the mirror; its events wait for the next resync", "kind", m.GVK.String(),
		"object", keyOf(m.Namespace, m.Name), "resourceVersion", m.ResourceVersion, "err", err)
	w.requestResync()
	return nil, false
}

// pipeline finishes a mirrored source's changes in the order they came, each
// once its write is answered. It runs a goroutine only while changes wait.
type pipeline struct {
	// slots bounds the writes sent and not yet answered (maxSentWrites).
	slots chan struct{}

	mu      sync.Mutex
	steps   []func()
	running bool
	// nAdded and nFinished count the steps given and run.
	nAdded, nFinished uint64
}

func newPipeline() *pipeline {
	return &pipeline{slots: make(chan struct{}, maxSentWrites)}
}

// add queues step; a slot taken for it is freed when it has run.
func (p *pipeline) add(step func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.steps = append(p.steps, step)
	p.nAdded++
	if !p.running {
		p.running = true
		go p.run()
	}
}

// run runs the queued steps in order until none is left.
func (p *pipeline) run() {
	p.mu.Lock()
	for len(p.steps) > 0 {
		step := p.steps[0]
		p.steps[0] = nil
		p.steps = p.steps[1:]
		p.mu.Unlock()
		step()
		<-p.slots
		p.mu.Lock()
		p.nFinished++
	}
	p.running = false
	p.steps = nil
	p.mu.Unlock()
}

// counts returns how many steps the pipeline was given and how many have
// run, read together; a source that does not mirror has none.
func (p *pipeline) counts() (added, finished uint64) {
	if p == nil {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nAdded, p.nFinished
}

// resyncMirror writes again the objects whose last write failed (those still
// cached at the same UID), then purges the keys of objects no informer has
// any more: deleted while the watcher was down or while a purge failed, or
// of kinds it no longer watches.
func (w *Watcher) resyncMirror(ctx context.Context) error {
	if w.mirror == nil {
		return nil
	}
	w.mu.RLock()
	sources := make([]*source, 0, len(w.sources))
	for _, s := range w.sources {
		sources = append(sources, s)
	}
	w.mu.RUnlock()
	var errs []error
	for _, s := range sources {
		s.mirror.mu.Lock()
		failed := make(map[types.UID]*unstructured.Unstructured, len(s.mirror.failed))
		for uid, u := range s.mirror.failed {
			failed[uid] = u
		}
		s.mirror.mu.Unlock()
		for uid, u := range failed {
			errs = append(errs, w.retryMirror(ctx, s, uid, u))
		}
	}
	purged, err := w.mirror.Reconcile(ctx, w.exists)
	if purged > 0 {
		w.log.Info("purged objects that are gone from the mirror", "purged", purged)
	}
	return errors.Join(append(errs, err)...)
}

// retryMirror writes again an object whose last write failed, unless a
// newer write came first or the object is gone.
func (w *Watcher) retryMirror(ctx context.Context, s *source, uid types.UID, u *unstructured.Unstructured) error {
	s.mirror.writeMu.Lock()
	defer s.mirror.writeMu.Unlock()
	s.mirror.mu.Lock()
	current := s.mirror.failed[uid] == u
	s.mirror.mu.Unlock()
	if !current {
		return nil
	}
	cached, ok, _ := s.informer.GetStore().GetByKey(keyOf(u.GetNamespace(), u.GetName()))
	if m, err := metaAccessor(cached); !ok || err != nil || m.GetUID() != uid {
		s.setFailed(uid, nil, nil)
		return nil
	}
	err := w.mirror.Put(ctx, u)
	s.setFailed(uid, u, err)
	return err
}

// exists reports whether an object of a mirror key is cached, or may be:
// its kind's informer has not listed yet.
func (w *Watcher) exists(k mirror.Key) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for gvk, s := range w.sources {
		if gvk.GroupKind() != k.GroupKind() {
			continue
		}
		if !s.handler.HasSynced() {
			return true
		}
		if _, ok, _ := s.informer.GetStore().GetByKey(keyOf(k.Namespace, k.Name)); ok {
			return true
		}
	}
	return false
}
