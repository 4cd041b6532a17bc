package watch

import (
	"context"
	"log/slog"
	"os"
	"reflect"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/telemetry"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/object"
	"github.com/loomxr/loom/services/watcher/internal/route"
)

func (w *Watcher) onAdd(s *source, obj any, initial bool) {
	if known := s.known.Load(); initial && known != nil {
		if m, err := metaAccessor(obj); err == nil {
			if old, err := metaAccessor((*known)[keyOf(m.GetNamespace(), m.GetName())]); err == nil && old.GetResourceVersion() == m.GetResourceVersion() {
				// The source this one replaced published it already.
				w.handle(s, eventsv1.EventType_EVENT_TYPE_ADDED, obj, false, nil)
				return
			}
		}
	}
	if initial {
		// Objects listed when a watch starts go to everyone, as a resync.
		w.handle(s, eventsv1.EventType_EVENT_TYPE_ADDED, obj, true, nil)
		return
	}
	w.handle(s, eventsv1.EventType_EVENT_TYPE_ADDED, obj, true, &object.Meta{})
}

func (w *Watcher) onUpdate(s *source, old, obj any) {
	om, err := object.MetaOf(s.gvk, old)
	if err != nil {
		w.handle(s, eventsv1.EventType_EVENT_TYPE_MODIFIED, obj, true, nil)
		return
	}
	if nm, err := metaAccessor(obj); err == nil && om.ResourceVersion == nm.GetResourceVersion() {
		// A relist found nothing new (and the mirror has it).
		s.takeFull(nm.GetUID(), nm.GetResourceVersion())
		return
	}
	w.handle(s, eventsv1.EventType_EVENT_TYPE_MODIFIED, obj, true, &om)
}

func (w *Watcher) onDelete(s *source, obj any) {
	w.handle(s, eventsv1.EventType_EVENT_TYPE_DELETED, obj, true, nil)
}

// handle records what the watcher learns from a change, writes the object to
// the mirror and, once that is done, live and if publish is set, publishes
// its deliveries. old is the object as cached
// before the change (the zero Meta for a creation seen live), from which
// the watcher tells who made the change and whether it touched only the
// status, so that fewer services may need to hear of it; nil when unknown.
//
// For a mirrored source it returns once the write is sent; the source's
// pipeline finishes the change (see finish) when the write is answered,
// after the changes that came before it.
func (w *Watcher) handle(s *source, typ eventsv1.EventType, obj any, publish bool, old *object.Meta) {
	m, err := object.MetaOf(s.gvk, obj)
	if err != nil {
		w.log.Error("cannot handle change", "kind", s.gvk.String(), "err", err)
		return
	}
	w.mu.RLock()
	roles := s.roles
	w.mu.RUnlock()

	w.observe(s, roles, typ, m, obj)

	if !s.spec.full {
		w.finish(s, roles, typ, m, obj, publish, old, nil)
		return
	}
	// The mirror first: a worker that hears of the change must find it there.
	wr := w.sendMirror(s, typ, m)
	if wr == nil {
		return
	}
	s.pipe.add(func() {
		if full, ok := w.finishMirror(s, m, wr); ok {
			w.finish(s, roles, typ, m, obj, publish, old, full)
		}
	})
}

// finish publishes a change once its object is in the mirror: full is the
// object written (nil for a deletion, or a source that does not mirror).
func (w *Watcher) finish(s *source, roles route.Role, typ eventsv1.EventType, m object.Meta, obj any, publish bool, old *object.Meta, full *unstructured.Unstructured) {
	refs := w.references(roles, typ, m, old, full)
	deleted := typ == eventsv1.EventType_EVENT_TYPE_DELETED
	if roles&route.RoleComposed != 0 && m.Controller != nil && !deleted {
		w.composedArrived(m.Controller.UID)
	}
	// A composed resource that is not an XR: the informer caches it
	// trimmed; the full object the mirror holds names its template.
	composed := roles&route.RoleComposed != 0 && roles&route.RoleXR == 0 && m.Controller != nil
	var template string
	if composed && full != nil {
		template = full.GetAnnotations()[v1.AnnotationCompositionResourceName]
	}
	if composed {
		w.firstStatus.composed(m.Controller.UID, m.UID, deleted, template, hasStatus(full))
	}
	readinessWithheld := roles&route.RoleXR != 0 && w.firstStatus.xr(m.UID, deleted, m.Status != "", m.Ready)
	if !publish || !w.live.Load() {
		return
	}
	w.crashIfArmed(m)
	o := routeObject(m, roles, obj)
	o.References = refs
	o.Template = template
	o.ReadinessWithheld = readinessWithheld
	if old != nil {
		o.Writers = object.Writers(*old, m)
		o.Created = old.UID == ""
		if object.StatusOnly(*old, m) {
			o.StatusOnly = true
			o.StatusChanged = object.StatusChanges(*old, m)
			o.TurnedReady = object.TurnedReady(*old, m)
			o.StatusFieldsChanged = object.StatusFieldsChanged(*old, m)
			o.ReadyConditionChanged = object.ReadyConditionChanged(*old, m)
		}
	}
	if composed && route.MayWithhold(o, lookup{w}) {
		o.AwaitsSiblings = w.firstStatus.awaits(m.Controller.UID, m.UID, lookup{w}.readyRequired(m.Controller.UID))
	}
	ctx, span := w.startSpan(m, typ, w.owners(m, o.ClaimRef)...)
	defer span.End()
	lk := &claimMisses{lookup: lookup{w}}
	var (
		tenant   string
		tenantOf *route.Target // the target tenant was found for
		held     []route.Delivery
		heldFor  string // the tenant of held
	)
	for _, d := range route.Route(o, roles, lk) {
		if d.Urgent && !w.urgency.allow(d.Service, d.Target.UID) {
			d.Urgent = false
			w.demoted.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("service", d.Service)))
		}
		// One change's deliveries mostly share their target (a composed
		// resource's change goes to up to three services for its XR).
		if tenantOf == nil || *tenantOf != d.Target {
			tenant, tenantOf = w.tenant(d.Target, o), &d.Target
		}
		if roles&route.RoleXR != 0 && !o.StatusOnly && typ != eventsv1.EventType_EVENT_TYPE_DELETED && readsComposed(d, m.UID) {
			held, heldFor = append(held, d), tenant
			continue
		}
		ev := newEvent(m, typ, d)
		ev.Tenant = tenant
		w.publish(ctx, d.Service, ev)
	}
	if roles&route.RoleXR != 0 {
		// The cache keeps only the kinds of resourceRefs; the mirror's
		// full object names them.
		w.awaitComposed(m, typ, full, heldFor, held)
		w.awaitClaim(m, o.ClaimRef, typ, lk.missed)
	}
	if roles&route.RoleClaim != 0 && typ != eventsv1.EventType_EVENT_TYPE_DELETED {
		w.claimArrived(m)
	}
}

// tenant returns the namespace of the claim a cluster-scoped target (an
// XR) is bound to, which the bus serves requests round-robin across: the
// changed object's own claim, or the cached target's; empty when the target
// is namespaced or bound to no claim.
func (w *Watcher) tenant(t route.Target, o route.Object) string {
	if t.Namespace != "" {
		return ""
	}
	if t.UID == o.UID {
		if o.ClaimRef != nil {
			return o.ClaimRef.Namespace
		}
		return ""
	}
	_, obj, ok := lookup{w}.xr(t.UID)
	if !ok {
		return ""
	}
	if u := object.Unstructured(obj); u != nil {
		if r := object.ClaimRef(u); r != nil {
			return r.Namespace
		}
	}
	return ""
}

// routeObject returns the cached object obj, with metadata m, as routing
// sees it: for an XR, with the claim it is bound to and the kinds it
// composes.
func routeObject(m object.Meta, roles route.Role, obj any) route.Object {
	o := route.Object{Meta: m}
	if roles&route.RoleXR != 0 {
		if u := object.Unstructured(obj); u != nil {
			o.ClaimRef = object.ClaimRef(u)
			for _, k := range object.ResourceKinds(u) {
				o.ComposedKinds = append(o.ComposedKinds, k.GroupKind())
			}
		}
	}
	return o
}

// claimKey names a claim as an XR's claimRef does.
type claimKey struct {
	gk        schema.GroupKind
	namespace string
	name      string
}

// awaiting is an XR change whose claim was not cached when it was routed.
type awaiting struct {
	xr  object.Meta
	typ eventsv1.EventType
}

// claimMisses is a lookup that records whether a claim was looked up and
// not found.
type claimMisses struct {
	lookup
	missed bool
}

func (l *claimMisses) Claim(gk schema.GroupKind, namespace, name string) (route.Target, bool) {
	t, ok := l.lookup.Claim(gk, namespace, name)
	l.missed = l.missed || !ok
	return t, ok
}

// awaitClaim remembers an XR change for the binder's claim target when the
// XR's claim is not cached yet (informers of claims and XRs run
// independently, so a claim created just before its XR may be cached just
// after it); claimArrived publishes it once the claim is. routeMissed says
// that routing the change looked the claim up and did not find it: if the
// claim is cached by now, it arrived in between, after its own handler
// looked for waiting XRs, so the change is published to it here. An XR that
// is deleted, or bound elsewhere, is forgotten.
func (w *Watcher) awaitClaim(xr object.Meta, ref *object.Reference, typ eventsv1.EventType, routeMissed bool) {
	w.awaitMu.Lock()
	defer w.awaitMu.Unlock()
	if k, ok := w.awaitingOf[xr.UID]; ok {
		delete(w.awaiting[k], xr.UID)
		if len(w.awaiting[k]) == 0 {
			delete(w.awaiting, k)
		}
		delete(w.awaitingOf, xr.UID)
	}
	if ref == nil || typ == eventsv1.EventType_EVENT_TYPE_DELETED {
		return
	}
	// Checked again under awaitMu: a claim's handler runs after the claim is
	// in the cache, and takes awaitMu before it looks for waiting XRs.
	if claim, ok := (lookup{w}).Claim(ref.GroupKind(), ref.Namespace, ref.Name); ok {
		if routeMissed {
			w.publishToClaim(xr, typ, claim)
		}
		return
	}
	k := claimKey{gk: ref.GroupKind(), namespace: ref.Namespace, name: ref.Name}
	if w.awaiting[k] == nil {
		w.awaiting[k] = map[types.UID]awaiting{}
	}
	w.awaiting[k][xr.UID] = awaiting{xr: xr, typ: typ}
	w.awaitingOf[xr.UID] = k
}

// claimArrived publishes the XR changes that waited for this claim.
func (w *Watcher) claimArrived(claim object.Meta) {
	k := claimKey{gk: claim.GVK.GroupKind(), namespace: claim.Namespace, name: claim.Name}
	w.awaitMu.Lock()
	waiting := w.awaiting[k]
	delete(w.awaiting, k)
	for uid := range waiting {
		delete(w.awaitingOf, uid)
	}
	w.awaitMu.Unlock()
	t := route.Target{GVK: claim.GVK, Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}
	for _, a := range waiting {
		w.publishToClaim(a.xr, a.typ, t)
	}
}

// publishToClaim publishes a change of an XR to the binder, targeting the
// claim bound to it.
func (w *Watcher) publishToClaim(xr object.Meta, typ eventsv1.EventType, claim route.Target) {
	d := route.Delivery{Service: route.Binder, Target: claim, Reason: "bound composite resource changed"}
	ctx, span := w.startSpan(xr, typ, string(claim.UID))
	defer span.End()
	w.publish(ctx, d.Service, newEvent(xr, typ, d))
}

// observe updates the watcher's state from a change of an object whose kind
// plays the given roles, and reconciles the sources if the set of kinds to
// watch may have changed.
func (w *Watcher) observe(s *source, roles route.Role, typ eventsv1.EventType, m object.Meta, obj any) {
	if roles&(route.RoleCRD|route.RoleXRD|route.RoleComposition|route.RoleXR) == 0 {
		return
	}
	u := object.Unstructured(obj)
	if u == nil {
		return
	}
	deleted := typ == eventsv1.EventType_EVENT_TYPE_DELETED
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, running := w.sources[s.gvk]; !running || w.sources[s.gvk] != s {
		// A stopped or replaced source; its successor reports for it.
		return
	}
	changed := false
	if roles&route.RoleCRD != 0 {
		c, err := object.CRDOf(u)
		switch {
		case err != nil:
			w.log.Warn("cannot read CustomResourceDefinition", "name", m.Name, "err", err)
		case deleted:
			delete(w.crds, schema.GroupKind{Group: c.Group, Kind: c.Kind})
			changed = true
		default:
			gk := schema.GroupKind{Group: c.Group, Kind: c.Kind}
			prev, ok := w.crds[gk]
			w.crds[gk] = c
			changed = !ok || !reflect.DeepEqual(prev, c)
		}
	}
	if roles&route.RoleXRD != 0 {
		if deleted {
			_, changed = w.defs[m.UID]
			delete(w.defs, m.UID)
		} else if d, err := object.DefinitionOf(u); err != nil {
			w.log.Warn("cannot read CompositeResourceDefinition", "name", m.Name, "err", err)
		} else {
			prev, ok := w.defs[m.UID]
			w.defs[m.UID] = d
			changed = changed || !ok || !reflect.DeepEqual(prev, d)
		}
	}
	if roles&route.RoleComposition != 0 {
		var kinds []schema.GroupVersionKind
		if !deleted {
			kinds = object.TemplateKinds(u)
		}
		added, removed := w.composed.Put(compositionSource(m.UID), kinds)
		changed = changed || len(added)+len(removed) > 0
	}
	if roles&route.RoleXR != 0 {
		var kinds []schema.GroupVersionKind
		if !deleted {
			kinds = object.ResourceKinds(u)
		}
		added, removed := w.composed.Put(xrSource(m.UID), kinds)
		changed = changed || len(added)+len(removed) > 0
	}
	if changed {
		w.reconcile()
	}
}

// startSpan starts the span of one change the watcher publishes, in the
// trace of the object's lineage or of its owners' (see telemetry.Lineage):
// a claim's creation, its XR, its composed resources and their changes
// until they are ready form one trace.
func (w *Watcher) startSpan(m object.Meta, typ eventsv1.EventType, owners ...string) (context.Context, trace.Span) {
	return w.lineage.Start(w.ctx, "watch "+m.GVK.Kind, telemetry.Sighting{
		UID:     string(m.UID),
		New:     typ == eventsv1.EventType_EVENT_TYPE_ADDED,
		Deleted: typ == eventsv1.EventType_EVENT_TYPE_DELETED,
		Owners:  owners,
	}, trace.WithAttributes(
		attribute.String("loom.event.type", typ.String()),
		attribute.String("k8s.group", m.GVK.Group),
		attribute.String("k8s.kind", m.GVK.Kind),
		attribute.String("k8s.namespace", m.Namespace),
		attribute.String("k8s.name", m.Name),
		attribute.String("k8s.uid", string(m.UID)),
		attribute.String("k8s.resource_version", m.ResourceVersion),
	))
}

// owners returns the UIDs whose trace a change of m may join: its claim (for
// an XR) and its controller (for a composed resource).
func (w *Watcher) owners(m object.Meta, claimRef *object.Reference) []string {
	var out []string
	if claimRef != nil {
		if t, ok := (lookup{w}).Claim(claimRef.GroupKind(), claimRef.Namespace, claimRef.Name); ok {
			out = append(out, string(t.UID))
		}
	}
	if m.Controller != nil {
		out = append(out, string(m.Controller.UID))
	}
	return out
}

// publish publishes an event. A failure asks for an early resync, which
// publishes the current state again.
func (w *Watcher) publish(ctx context.Context, service string, ev *eventsv1.Event) {
	if w.log.Enabled(ctx, slog.LevelDebug) {
		o, t := ev.GetObject(), ev.GetTarget()
		w.log.Debug("publishing", "service", service, "type", ev.GetType().String(), "reason", ev.GetReason(),
			"object", o.GetKind()+" "+keyOf(o.GetNamespace(), o.GetName()), "resourceVersion", ev.GetResourceVersion(),
			"target", t.GetKind()+" "+keyOf(t.GetNamespace(), t.GetName()))
	}
	if err := w.pub.Publish(ctx, service, ev); err != nil && ctx.Err() == nil {
		w.log.Warn("cannot publish event; resyncing soon", "service", service,
			"target", ev.GetTarget().GetUid(), "object", ev.GetObject().GetUid(), "err", err)
		w.requestResync()
	}
}

// newEvent builds the event of a delivery.
func newEvent(m object.Meta, typ eventsv1.EventType, d route.Delivery) *eventsv1.Event {
	ev := &eventsv1.Event{
		Object:          ref(m.GVK, m.Namespace, m.Name, m.UID),
		ResourceVersion: m.ResourceVersion,
		Generation:      m.Generation,
		Type:            typ,
		Target:          ref(d.Target.GVK, d.Target.Namespace, d.Target.Name, d.Target.UID),
		ObservedTime:    timestamppb.Now(),
		Reason:          d.Reason,
		Urgent:          d.Urgent,
	}
	if c := m.Controller; c != nil {
		gv, _ := schema.ParseGroupVersion(c.APIVersion)
		ev.Controller = ref(gv.WithKind(c.Kind), "", c.Name, c.UID)
	}
	return ev
}

func ref(gvk schema.GroupVersionKind, namespace, name string, uid types.UID) *eventsv1.ObjectRef {
	return &eventsv1.ObjectRef{
		Group:     gvk.Group,
		Version:   gvk.Version,
		Kind:      gvk.Kind,
		Namespace: namespace,
		Name:      name,
		Uid:       string(uid),
	}
}

// metaAccessor returns the metadata of a cached object or tombstone.
func metaAccessor(obj any) (metav1.Object, error) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	return meta.Accessor(obj)
}

// lookup reads the watcher's caches for routing.
type lookup struct{ w *Watcher }

// sourcesWith returns the running sources whose kind plays role.
func (l lookup) sourcesWith(role route.Role) []*source {
	l.w.mu.RLock()
	defer l.w.mu.RUnlock()
	var out []*source
	for _, s := range l.w.sources {
		if s.roles&role != 0 {
			out = append(out, s)
		}
	}
	return out
}

func (l lookup) Claim(gk schema.GroupKind, namespace, name string) (route.Target, bool) {
	s, m := l.claim(gk, namespace, name)
	if m == nil {
		return route.Target{}, false
	}
	return route.Target{GVK: s.gvk, Namespace: namespace, Name: name, UID: m.GetUID()}, true
}

func (l lookup) ClaimPropagated(gk schema.GroupKind, namespace, name string) string {
	if _, m := l.claim(gk, namespace, name); m != nil {
		return m.GetAnnotations()[object.AnnotationPropagated]
	}
	return ""
}

// claim returns the cached claim of the given group, kind, namespace and
// name and its source; a nil object when it is not cached.
func (l lookup) claim(gk schema.GroupKind, namespace, name string) (*source, metav1.Object) {
	for _, s := range l.sourcesWith(route.RoleClaim) {
		if s.gvk.GroupKind() != gk {
			continue
		}
		obj, ok, err := s.informer.GetStore().GetByKey(keyOf(namespace, name))
		if err != nil || !ok {
			continue
		}
		if m, err := metaAccessor(obj); err == nil {
			return s, m
		}
	}
	return nil, nil
}

// xr returns the cached XR with the given UID and the source that holds it.
func (l lookup) xr(uid types.UID) (*source, any, bool) {
	for _, s := range l.sourcesWith(route.RoleXR) {
		objs, err := s.informer.GetIndexer().ByIndex(uidIndex, string(uid))
		if err == nil && len(objs) > 0 {
			return s, objs[0], true
		}
	}
	return nil, nil, false
}

// sourceOf returns the running source of a kind, nil if none.
func (l lookup) sourceOf(gk schema.GroupKind) *source {
	l.w.mu.RLock()
	defer l.w.mu.RUnlock()
	for gvk, s := range l.w.sources {
		if gvk.GroupKind() == gk {
			return s
		}
	}
	return nil
}

func (l lookup) XR(uid types.UID) (route.Target, bool) {
	s, obj, ok := l.xr(uid)
	if !ok {
		return route.Target{}, false
	}
	m, err := metaAccessor(obj)
	if err != nil {
		return route.Target{}, false
	}
	return route.Target{GVK: s.gvk, Namespace: m.GetNamespace(), Name: m.GetName(), UID: uid}, true
}

func (l lookup) ResourcesMode(uid types.UID) bool {
	c := l.composition(uid)
	if c == nil {
		return false
	}
	mode, _, _ := unstructured.NestedString(c.Object, "spec", "mode")
	return mode == "" || v1.CompositionMode(mode) == v1.CompositionModeResources
}

func (l lookup) NotReady(uid types.UID) bool {
	return object.NotReady(l.xrAnnotations(uid))
}

// xrAnnotations returns the annotations of the cached XR with the given
// UID (the watcher's status summary among them), nil when it is not cached.
func (l lookup) xrAnnotations(uid types.UID) map[string]string {
	_, obj, ok := l.xr(uid)
	if !ok {
		return nil
	}
	m, err := metaAccessor(obj)
	if err != nil {
		return nil
	}
	return m.GetAnnotations()
}

func (l lookup) DetailsFromStatus(uid types.UID, template string) bool {
	c := l.composition(uid)
	return c == nil || object.DetailsFromStatus(c, template)
}

func (l lookup) ComposedStatusToSpec(uid types.UID, template string) bool {
	c := l.composition(uid)
	return c == nil || object.StatusToSpec(c, template)
}

func (l lookup) DetailsFromSpec(uid types.UID, template string) bool {
	c := l.composition(uid)
	return c == nil || object.DetailsFromSpec(c, template)
}

func (l lookup) ReadsComposedSpec(uid types.UID, template string) bool {
	c := l.composition(uid)
	return c == nil || object.ReadsComposedSpec(c, template)
}

func (l lookup) ReadsComposedStatus(uid types.UID, template string) bool {
	c := l.composition(uid)
	return c == nil || object.ReadsComposedStatus(c, template)
}

// readyRequired returns whether the readiness of a composed resource of a
// template requires its Ready condition True, for the cached XR with the
// given UID (object.ReadyRequired); false for every template when what the
// XR is composed with is not cached.
func (l lookup) readyRequired(uid types.UID) func(template string) bool {
	c := l.composition(uid)
	return func(template string) bool { return c != nil && object.ReadyRequired(c, template) }
}

// hasStatus reports whether an object has a status: for a composed
// resource, whether its provider has looked at it. False for nil.
func hasStatus(u *unstructured.Unstructured) bool {
	if u == nil {
		return false
	}
	s, _ := u.Object["status"].(map[string]any)
	return len(s) > 0
}

func (l lookup) Unresolved(uid types.UID) bool {
	return object.Unresolved(l.xrAnnotations(uid))
}

func (l lookup) ReadsStatus(uid types.UID) bool {
	c := l.composition(uid)
	return c == nil || object.ReadsStatus(c)
}

// composition returns what the cached XR with the given UID is composed
// with, as cached: the CompositionRevision it names or, before the watcher
// has seen the renderer name one (the renderer's creations can overtake its
// patch of the XR, on another watch), the Composition the binder chose,
// whose latest revision that render used. It is nil when neither is cached.
func (l lookup) composition(uid types.UID) *unstructured.Unstructured {
	_, obj, ok := l.xr(uid)
	u, isU := obj.(*unstructured.Unstructured)
	if !ok || !isU {
		return nil
	}
	role, name := route.RoleRevision, object.RevisionName(u)
	if name == "" {
		role, name = route.RoleComposition, object.CompositionName(u)
	}
	if name == "" {
		return nil
	}
	for _, s := range l.sourcesWith(role) {
		obj, ok, err := s.informer.GetStore().GetByKey(name)
		if err != nil || !ok {
			continue
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return u
		}
	}
	return nil
}

// Referenced answers from the cached ReferenceRules; true while they are
// not known (no source of them yet, or one that has not listed them).
func (l lookup) Referenced(gk schema.GroupKind) bool {
	rules, ok := l.rules()
	if !ok {
		return true
	}
	for _, obj := range rules {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			// Not a rule as this watcher keeps them: assume it names gk.
			return true
		}
		if slices.Contains(object.RuleKinds(u), gk) {
			return true
		}
	}
	return false
}

func (l lookup) Requesters(m object.Meta) []types.UID {
	l.w.mu.RLock()
	defer l.w.mu.RUnlock()
	var out []types.UID
	for uid, reqs := range l.w.requests[m.GVK] {
		for _, r := range reqs {
			if r.Matches(m.Namespace, m.Name, m.Labels) {
				out = append(out, uid)
				break
			}
		}
	}
	return out
}

// crashIfArmed exits the process if the crash fault is armed (see
// WithCrashFile): m is in the mirror, and its events are not published.
func (w *Watcher) crashIfArmed(m object.Meta) {
	if w.crashFile == "" {
		return
	}
	if err := os.Remove(w.crashFile); err != nil {
		return // not armed (or armed for another replica that took it)
	}
	w.log.Error("fault injected: exiting between the mirror write and the publish of a change",
		"kind", m.GVK.String(), "namespace", m.Namespace, "name", m.Name, "resourceVersion", m.ResourceVersion)
	os.Exit(3) //nolint:revive // The fault is a crash: nothing may run after it.
}
