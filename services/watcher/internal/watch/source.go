package watch

import (
	"context"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/object"
	"github.com/loomxr/loom/services/watcher/internal/route"
)

type (
	crdInfo    = object.CRD
	definition = object.Definition
)

// uidIndex indexes cached objects by UID.
const uidIndex = "uid"

// spec is how a kind is watched. Two sources with equal specs are
// interchangeable; a change of spec restarts the source.
type spec struct {
	gvr schema.GroupVersionResource
	// shape is the spec fields kept; a zero shape means metadata-only.
	shape object.Shape
	// selector is the label selector of the list and watch.
	selector string
	// full is set when the watcher mirrors the kind: the informer lists and
	// watches full objects (even where shape is zero) and the handler
	// writes them to the mirror before it publishes (see mirror.go).
	full bool
}

// source is one running informer.
type source struct {
	gvk   schema.GroupVersionKind
	spec  spec
	roles route.Role // guarded by Watcher.mu

	informer cache.SharedIndexInformer
	handler  cache.ResourceEventHandlerRegistration
	cancel   context.CancelFunc
	// known are the objects, by key, that the source this one replaced had
	// cached: initial adds of unchanged ones are not published again, and
	// those missing from the initial list are published as deleted. Nil once
	// the initial list is through.
	known atomic.Pointer[map[string]any]
	// refused is set when the API server refused to list the kind (no RBAC,
	// or the kind went away); start-up does not wait for such a source.
	refused atomic.Bool
	// mirror holds what a mirrored source has yet to write (see mirror.go).
	mirror mirrorState
	// pipe finishes the changes of a mirrored source whose writes are sent.
	pipe *pipeline
	// listed is one more than the number of steps the pipeline had been
	// given once the initial list was through; 0 until synced first saw it
	// through.
	listed atomic.Uint64
}

// synced reports whether the source's handler saw the initial list and
// finished the changes of it (their mirror writes are answered), or the
// list was refused. Changes that came after the list may still wait.
func (s *source) synced() bool {
	if s.refused.Load() {
		return true
	}
	if !s.handler.HasSynced() {
		return false
	}
	// The handler saw the whole list before HasSynced turned true, so the
	// steps added by now include every one of the list's.
	added, finished := s.pipe.counts()
	s.listed.CompareAndSwap(0, added+1)
	return finished >= s.listed.Load()-1
}

// shapeOf returns the spec fields the roles need.
func shapeOf(r route.Role) object.Shape {
	var s object.Shape
	if r&route.RoleXRD != 0 {
		s |= object.ShapeXRD
	}
	if r&route.RoleCRD != 0 {
		s |= object.ShapeCRD
	}
	if r&route.RoleComposition != 0 {
		s |= object.ShapeComposition
	}
	if r&route.RoleXR != 0 {
		s |= object.ShapeXR
	}
	if r&route.RoleClaim != 0 {
		s |= object.ShapeClaim
	}
	if r&route.RoleRevision != 0 {
		s |= object.ShapeRevision
	}
	if r&route.RoleReferenceRule != 0 {
		s |= object.ShapeRule
	}
	return s
}

// selectorOf returns the label selector that covers the roles: a kind
// watched only as composed resources needs only labelled objects.
func selectorOf(r route.Role) string {
	if r == route.RoleComposed {
		return object.LabelComposite
	}
	return ""
}

// desired returns the roles of every kind the watcher should watch now.
// Callers hold w.mu.
func (w *Watcher) desired() map[schema.GroupVersionKind]route.Role {
	d := map[schema.GroupVersionKind]route.Role{
		object.KindCRD:           route.RoleCRD,
		object.KindXRD:           route.RoleXRD,
		object.KindComposition:   route.RoleComposition,
		object.KindRevision:      route.RoleRevision,
		object.KindReferenceRule: route.RoleReferenceRule,
		object.KindFunction:      route.RoleFunction,
	}
	d[w.environmentConfigKind()] |= route.RoleEnvironmentConfig
	for _, def := range w.defs {
		d[def.XR] |= route.RoleXR
		if def.Claim != nil {
			d[*def.Claim] |= route.RoleClaim
		}
	}
	for _, k := range w.composed.Kinds() {
		d[k] |= route.RoleComposed
	}
	for _, k := range w.requested.Kinds() {
		d[k] |= route.RoleRequested
	}
	return d
}

// environmentConfigKind returns the EnvironmentConfig version to watch: the
// first of object.EnvironmentConfigVersions that is served.
func (w *Watcher) environmentConfigKind() schema.GroupVersionKind {
	for _, v := range object.EnvironmentConfigVersions {
		gvk := object.KindEnvironmentConfig.WithVersion(v)
		if _, ok := w.resolve(gvk, false); ok {
			return gvk
		}
	}
	return object.KindEnvironmentConfig.WithVersion(object.EnvironmentConfigVersions[0])
}

// resolve returns the resource of a kind if it is served. Kinds a CRD
// defines are resolved from the CRD cache; others through the REST mapper
// (discovery) when useMapper is set. Callers hold w.mu.
func (w *Watcher) resolve(gvk schema.GroupVersionKind, useMapper bool) (schema.GroupVersionResource, bool) {
	if gvk == object.KindCRD {
		return schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: "customresourcedefinitions"}, true
	}
	if c, ok := w.crds[gvk.GroupKind()]; ok {
		if !c.Serves(gvk.Version) {
			return schema.GroupVersionResource{}, false
		}
		return gvk.GroupVersion().WithResource(c.Plural), true
	}
	if !useMapper {
		return schema.GroupVersionResource{}, false
	}
	m, err := w.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false
	}
	return m.Resource, true
}

// ensureCRDSource starts the CRD informer. Callers hold w.mu.
func (w *Watcher) ensureCRDSource() {
	if _, ok := w.sources[object.KindCRD]; ok {
		return
	}
	gvr, _ := w.resolve(object.KindCRD, false)
	w.start(object.KindCRD, route.RoleCRD, spec{gvr: gvr, shape: shapeOf(route.RoleCRD), full: w.mirrors(object.KindCRD)}, nil)
}

// reconcile starts, restarts and stops sources until they match what the
// watcher should watch. Callers hold w.mu.
func (w *Watcher) reconcile() {
	if w.ctx == nil || w.ctx.Err() != nil {
		return
	}
	// Stopping an XR source forgets the composed kinds its XRs named, which
	// may stop more sources; loop until nothing changes.
	for range 10 {
		if !w.reconcileOnce() {
			return
		}
	}
}

func (w *Watcher) reconcileOnce() (changed bool) {
	want := w.desired()
	for _, gvk := range sortedKinds(want) {
		roles := want[gvk]
		gvr, ok := w.resolve(gvk, true)
		s := w.sources[gvk]
		if !ok {
			if !w.pending[gvk] {
				w.log.Info("waiting for kind to be served", "kind", gvk.String(), "roles", roles.String())
			}
			w.pending[gvk] = true
			if s != nil {
				w.stop(s, false)
				changed = true
			}
			continue
		}
		delete(w.pending, gvk)
		sp := spec{gvr: gvr, shape: shapeOf(roles), selector: selectorOf(roles), full: w.mirrors(gvk)}
		switch {
		case s == nil:
			w.start(gvk, roles, sp, nil)
			changed = true
		case s.spec != sp:
			known := map[string]any{}
			for _, obj := range s.informer.GetStore().List() {
				if m, err := metaAccessor(obj); err == nil {
					known[keyOf(m.GetNamespace(), m.GetName())] = obj
				}
			}
			w.stop(s, true)
			w.start(gvk, roles, sp, known)
			changed = true
		default:
			s.roles = roles
		}
	}
	for gvk, s := range w.sources {
		if _, ok := want[gvk]; !ok {
			w.stop(s, false)
			changed = true
		}
	}
	for gvk := range w.pending {
		if _, ok := want[gvk]; !ok {
			delete(w.pending, gvk)
		}
	}
	return changed
}

// start runs an informer for gvk. Callers hold w.mu.
func (w *Watcher) start(gvk schema.GroupVersionKind, roles route.Role, sp spec, known map[string]any) {
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = sp.selector }
	indexers := cache.Indexers{uidIndex: func(obj any) ([]string, error) {
		m, err := metaAccessor(obj)
		if err != nil {
			return nil, err
		}
		return []string{string(m.GetUID())}, nil
	}}
	var inf cache.SharedIndexInformer
	if sp.shape != 0 || sp.full {
		inf = dynamicinformer.NewFilteredDynamicInformer(w.dynamic, sp.gvr, metav1.NamespaceAll, 0, indexers, tweak).Informer()
	} else {
		inf = metadatainformer.NewFilteredMetadataInformer(w.metadata, sp.gvr, metav1.NamespaceAll, 0, indexers, tweak).Informer()
	}
	s := &source{gvk: gvk, spec: sp, roles: roles, informer: inf, pipe: newPipeline()}
	if known != nil {
		s.known.Store(&known)
	}
	if err := inf.SetTransform(s.keepFull(object.Transform(sp.shape))); err != nil {
		w.log.Error("cannot set informer transform", "kind", gvk.String(), "err", err)
	}
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		if ctx.Err() != nil {
			return
		}
		if kerrors.IsForbidden(err) || kerrors.IsNotFound(err) {
			s.refused.Store(true)
		}
		w.log.Warn("cannot list or watch; retrying", "kind", gvk.String(), "resource", sp.gvr.String(), "err", err)
	})
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { w.onAdd(s, obj, initial) },
		UpdateFunc: func(old, obj any) { w.onUpdate(s, old, obj) },
		DeleteFunc: func(obj any) { w.onDelete(s, obj) },
	})
	if err != nil {
		w.log.Error("cannot add informer handler", "kind", gvk.String(), "err", err)
		return
	}
	s.handler = reg
	ctx, cancel := context.WithCancel(w.ctx)
	s.cancel = cancel
	w.sources[gvk] = s
	w.started++
	w.log.Info("watching", "kind", gvk.String(), "resource", sp.gvr.String(), "roles", roles.String(),
		"metadataOnly", sp.shape == 0, "selector", sp.selector)
	go inf.RunWithContext(ctx)
	if known != nil {
		go w.reportGone(ctx, s)
	}
}

// reportGone waits for the initial list of a source that replaced another,
// then publishes as deleted what the old source had and the new one did not
// list: objects deleted while the sources changed over. (Objects the new
// source does not list because its selector is narrower route nowhere: only
// a kind watched as composed alone is watched with a selector, and only
// labelled objects of it route.)
func (w *Watcher) reportGone(ctx context.Context, s *source) {
	if !cache.WaitForCacheSync(ctx.Done(), s.handler.HasSynced) {
		return
	}
	known := s.known.Swap(nil)
	if known == nil {
		return
	}
	for key, obj := range *known {
		if _, ok, _ := s.informer.GetStore().GetByKey(key); !ok {
			w.handle(s, eventsv1.EventType_EVENT_TYPE_DELETED, obj, true, nil)
		}
	}
}

// stop stops a source. Unless it is being replaced, the composed kinds its
// XRs named are forgotten. Callers hold w.mu.
func (w *Watcher) stop(s *source, replacing bool) {
	s.cancel()
	delete(w.sources, s.gvk)
	if !replacing && s.roles&route.RoleXR != 0 {
		for _, obj := range s.informer.GetStore().List() {
			if m, err := metaAccessor(obj); err == nil {
				w.composed.Remove(xrSource(m.GetUID()))
			}
		}
	}
	if !replacing {
		w.log.Info("stopped watching", "kind", s.gvk.String())
	}
}

// stopAll stops every source.
func (w *Watcher) stopAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.sources {
		s.cancel()
	}
	w.sources = map[schema.GroupVersionKind]*source{}
}

// retryPending resolves pending kinds again through fresh discovery, at
// most every pendingBackoff, which doubles up to maxPendingBackoff while kinds
// stay pending. (Kinds that CRDs define need no discovery: a CRD change
// reconciles at once.)
func (w *Watcher) retryPending() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 {
		w.pendingBackoff = 0
		return
	}
	if time.Since(w.pendingReset) < w.pendingBackoff {
		return
	}
	w.pendingBackoff = min(max(2*w.pendingBackoff, pendingRetry), maxPendingBackoff)
	w.pendingReset = time.Now()
	w.mapper.Reset()
	w.reconcile()
}

// waitSynced waits until every source's handler has seen its initial list
// and no source started meanwhile, or until timeout or ctx ends. It reports
// whether everything synced.
func (w *Watcher) waitSynced(ctx context.Context, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		w.mu.RLock()
		started := w.started
		synced := true
		for _, s := range w.sources {
			if !s.synced() {
				synced = false
				break
			}
		}
		w.mu.RUnlock()
		if synced {
			// A handler may have started a source while we looked.
			w.mu.RLock()
			settled := started == w.started
			w.mu.RUnlock()
			if settled {
				return true
			}
			continue
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}

// unsynced lists the kinds whose initial list is not through yet.
func (w *Watcher) unsynced() []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	var out []string
	for gvk, s := range w.sources {
		if !s.synced() {
			out = append(out, gvk.String())
		}
	}
	slices.Sort(out)
	return out
}

func sortedKinds(m map[schema.GroupVersionKind]route.Role) []schema.GroupVersionKind {
	return slices.SortedFunc(maps.Keys(m), object.CompareGVK)
}

func keyOf(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Sources of composed kinds in w.composed.
func xrSource(uid types.UID) string          { return "xr/" + string(uid) }
func compositionSource(uid types.UID) string { return "composition/" + string(uid) }
