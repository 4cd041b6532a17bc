// Package tracker makes a change of a connection Secret reach the composite
// resource (XR) whose connection Secret it feeds, without polling.
//
// The secrets service is the only Loom component that may list or watch
// Secrets, so it watches the connection Secrets itself: one metadata-only
// informer, cluster-wide, on Secrets with the field selector
// type=connection.crossplane.io/v1alpha1. It never caches Secret data (and
// drops managedFields), so its memory holds names, owners and
// resourceVersions only.
//
// # From a Secret to its XR
//
// The index is built while the service handles XRs (Track):
//
//   - the Secret a composed resource names in spec.writeConnectionSecretToRef
//     maps to the XR;
//   - a Secret controlled by (owner reference to) a composed resource of an
//     XR maps to the XR;
//   - the XR's own connection Secret and its claim's copy map to the XR, so
//     that a Secret someone changed or deleted is restored;
//   - the staging Secret of a Pipeline XR (package staging), which holds
//     what its functions return, maps to the XR; a staging Secret the index
//     does not know maps to the XR its label and controller reference name.
//
// A change of an indexed Secret publishes a REQUEUE event targeting the XR
// on the secrets work stream, so the replica that owns the XR's partition
// handles it. The event names the Secret (namespace, name, UID,
// resourceVersion), never its content; its Nats-Msg-Id (XR UID, Secret UID,
// resourceVersion) lets several replicas that indexed the same XR publish
// it once.
//
// # Pipeline XRs
//
// The connection details of a Pipeline XR are what its functions return,
// and functions read the connection details of the composed resources they
// observe. So a change of a composed resource's connection Secret (one it
// names, or one it controls) publishes the REQUEUE event on the renderer's
// work stream instead: the renderer renders the XR again and hands the
// functions' new details to the staging Secret, whose change then requeues
// the XR here. The deletion of a staging Secret asks the renderer too, so
// that it hands the details over again.
//
// A change of a Secret the index does not know, but that a composed resource
// controls, is traced through the owner: the replica that owns the
// partition of the owner's UID reads the owner's metadata and requeues the
// owner's cluster-scoped controller. This covers a replica that restarted
// (its index is empty until the watcher's resync hands it every XR again)
// and partitions that moved between replicas.
//
// Not handled: changes made while no replica was running. The informer's
// initial list is not replayed; the watcher's full resync reaches every XR.
package tracker

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/secrets/internal/secret"
	"github.com/loomxr/loom/services/secrets/internal/staging"
)

// A Target is an XR to handle again. Loom publishes connection Secrets for
// cluster-scoped (LegacyCluster) XRs only, so it has no namespace.
type Target struct {
	GVK  schema.GroupVersionKind
	Name string
	UID  types.UID
}

// A Publisher publishes events on the bus (see bus.Publisher).
type Publisher interface {
	Publish(ctx context.Context, service string, ev *eventsv1.Event) error
}

// Services names the work streams a Tracker publishes to.
type Services struct {
	// Secrets is the secrets service's: a changed Secret requeues its XR.
	Secrets string
	// Renderer is the renderer's: a changed Secret that composition
	// functions observe requeues its XR there too.
	Renderer string
}

// An OwnerReader reads the metadata of an object (the owner of a Secret).
type OwnerReader interface {
	// Controller returns the controller reference of the object that ref,
	// an owner reference found in namespace, names, or nil if it has none
	// or is gone.
	Controller(ctx context.Context, ref metav1.OwnerReference, namespace string) (*metav1.OwnerReference, error)
	// Namespaced reports whether the kind is namespaced.
	Namespaced(gvk schema.GroupVersionKind) (bool, error)
}

// A Tracker watches connection Secrets and requeues the XRs they feed. It is
// safe for concurrent use.
type Tracker struct {
	informer cache.SharedIndexInformer
	pub      Publisher
	services Services
	log      *slog.Logger
	own      func(k secret.Key, resourceVersion string) bool
	owners   OwnerReader
	owns     func(uid types.UID) bool
	source   string

	// traces bounds concurrent owner lookups.
	traces chan struct{}
	ctx    context.Context

	mu       sync.Mutex
	xrs      map[types.UID]*entry
	bySecret map[secret.Key]map[types.UID]struct{}
	byOwner  map[types.UID]map[types.UID]struct{}
}

// Deps are what an XR's connection Secrets depend on.
type Deps struct {
	// Secrets: a change of one requeues the XR.
	Secrets []secret.Key
	// Composed are the UIDs of the XR's composed resources: a change of a
	// Secret one of them controls is a change of their connection details.
	Composed []types.UID
	// Observed are the connection Secrets the composed resources name.
	// A change of one is a change of their connection details.
	Observed []secret.Key
	// Pipeline says the XR is rendered by a function pipeline: a change of
	// its composed resources' connection details asks the renderer to
	// render it again, instead of requeueing it here.
	Pipeline bool
}

// entry is what the index holds for one XR.
type entry struct {
	target Target
	deps   Deps
}

// hit is an XR that a changed Secret concerns, and what to do about it.
type hit struct {
	target Target
	// requeue the XR on the secrets stream; render it on the renderer's.
	requeue, render bool
}

// An Option configures a Tracker.
type Option func(*Tracker)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(t *Tracker) { t.log = l } }

// WithOwnWrites sets how the Tracker recognises the service's own writes,
// which need no handling (see secret.Store.Written).
func WithOwnWrites(f func(k secret.Key, resourceVersion string) bool) Option {
	return func(t *Tracker) { t.own = f }
}

// WithOwnerTracing traces Secrets the index does not know through their
// controlling owner (see the package documentation): r reads owners, and
// owns reports whether this replica owns the bus partition of a UID.
// Without it, unknown Secrets are ignored.
func WithOwnerTracing(r OwnerReader, owns func(uid types.UID) bool) Option {
	return func(t *Tracker) { t.owners, t.owns = r, owns }
}

// WithSource sets the Source of the events the Tracker publishes.
func WithSource(s string) Option { return func(t *Tracker) { t.source = s } }

// FieldSelector selects connection Secrets.
const FieldSelector = "type=" + string(secret.TypeConnection)

// New returns a Tracker whose informer lists and watches connection Secrets
// through md. Run starts it.
func New(md metadata.Interface, pub Publisher, services Services, o ...Option) *Tracker {
	f := metadatainformer.NewFilteredSharedInformerFactory(md, 0, metav1.NamespaceAll, func(lo *metav1.ListOptions) {
		lo.FieldSelector = FieldSelector
	})
	inf := f.ForResource(corev1.SchemeGroupVersion.WithResource("secrets")).Informer()
	t := NewForInformer(inf, pub, services, o...)
	return t
}

// NewForInformer returns a Tracker over inf, an informer of
// *metav1.PartialObjectMetadata of connection Secrets that has not started.
func NewForInformer(inf cache.SharedIndexInformer, pub Publisher, services Services, o ...Option) *Tracker {
	t := &Tracker{
		informer: inf,
		pub:      pub,
		services: services,
		log:      slog.Default(),
		own:      func(secret.Key, string) bool { return false },
		traces:   make(chan struct{}, 8),
		ctx:      context.Background(),
		xrs:      map[types.UID]*entry{},
		bySecret: map[secret.Key]map[types.UID]struct{}{},
		byOwner:  map[types.UID]map[types.UID]struct{}{},
	}
	for _, fn := range o {
		fn(t)
	}
	// Keep names, owners and versions; drop what only costs memory.
	_ = inf.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			m.ManagedFields = nil
		}
		return obj, nil
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				t.changed(obj, false)
			}
		},
		UpdateFunc: func(old, cur any) {
			if o, c := asMeta(old), asMeta(cur); o != nil && c != nil && o.ResourceVersion == c.ResourceVersion {
				return
			}
			t.changed(cur, false)
		},
		DeleteFunc: func(obj any) { t.changed(obj, true) },
	})
	return t
}

// Run runs the informer until ctx ends. It returns once the informer has
// stopped.
func (t *Tracker) Run(ctx context.Context) {
	t.mu.Lock()
	t.ctx = ctx
	t.mu.Unlock()
	t.informer.RunWithContext(ctx)
}

// HasSynced reports whether the informer has listed every connection Secret
// once.
func (t *Tracker) HasSynced() bool { return t.informer.HasSynced() }

// Metadata returns the cached metadata of a connection Secret. The result
// must not be modified.
func (t *Tracker) Metadata(k secret.Key) (*metav1.PartialObjectMetadata, bool) {
	obj, ok, err := t.informer.GetStore().GetByKey(k.Namespace + "/" + k.Name)
	if err != nil || !ok {
		return nil, false
	}
	m := asMeta(obj)
	return m, m != nil
}

// Track records what XR xr depends on, replacing what was recorded for it
// before. Call it before reading the Secrets, so that a change after the
// read is never missed.
func (t *Tracker) Track(xr Target, d Deps) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.xrs[xr.UID]
	if e != nil && e.target == xr && e.deps.Pipeline == d.Pipeline && slices.Equal(e.deps.Secrets, d.Secrets) &&
		slices.Equal(e.deps.Composed, d.Composed) && slices.Equal(e.deps.Observed, d.Observed) {
		return
	}
	t.unindex(xr.UID)
	e = &entry{target: xr, deps: Deps{
		Secrets:  slices.Clone(d.Secrets),
		Composed: slices.Clone(d.Composed),
		Observed: slices.Clone(d.Observed),
		Pipeline: d.Pipeline,
	}}
	t.xrs[xr.UID] = e
	for _, k := range e.deps.Secrets {
		add(t.bySecret, k, xr.UID)
	}
	for _, k := range e.deps.Observed {
		add(t.bySecret, k, xr.UID)
	}
	for _, o := range e.deps.Composed {
		add(t.byOwner, o, xr.UID)
	}
}

// Forget drops what was recorded for the XR with the given UID.
func (t *Tracker) Forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unindex(uid)
}

// Len returns how many XRs are tracked.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.xrs)
}

func (t *Tracker) unindex(uid types.UID) {
	e := t.xrs[uid]
	if e == nil {
		return
	}
	delete(t.xrs, uid)
	for _, k := range e.deps.Secrets {
		remove(t.bySecret, k, uid)
	}
	for _, k := range e.deps.Observed {
		remove(t.bySecret, k, uid)
	}
	for _, o := range e.deps.Composed {
		remove(t.byOwner, o, uid)
	}
}

func add[K comparable](m map[K]map[types.UID]struct{}, k K, uid types.UID) {
	s := m[k]
	if s == nil {
		s = map[types.UID]struct{}{}
		m[k] = s
	}
	s[uid] = struct{}{}
}

func remove[K comparable](m map[K]map[types.UID]struct{}, k K, uid types.UID) {
	if s := m[k]; s != nil {
		delete(s, uid)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

// targets returns the XRs that depend on the Secret m, sorted by UID, and
// what to do about each.
func (t *Tracker) targets(m *metav1.PartialObjectMetadata) []hit {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := secret.Key{Namespace: m.Namespace, Name: m.Name}
	uids := map[types.UID]struct{}{}
	maps.Copy(uids, t.bySecret[k])
	for _, r := range m.OwnerReferences {
		maps.Copy(uids, t.byOwner[r.UID])
	}
	out := make([]hit, 0, len(uids))
	for uid := range uids {
		e := t.xrs[uid]
		if e == nil {
			continue
		}
		h := hit{target: e.target, requeue: slices.Contains(e.deps.Secrets, k)}
		composed := slices.Contains(e.deps.Observed, k) || slices.ContainsFunc(m.OwnerReferences, func(r metav1.OwnerReference) bool {
			return slices.Contains(e.deps.Composed, r.UID)
		})
		if composed && e.deps.Pipeline {
			h.render = true
		} else if composed {
			h.requeue = true
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b hit) int {
		if a.target.UID < b.target.UID {
			return -1
		}
		if a.target.UID > b.target.UID {
			return 1
		}
		return 0
	})
	return out
}

// changed handles a change of a connection Secret.
func (t *Tracker) changed(obj any, deleted bool) {
	m := asMeta(obj)
	if m == nil {
		return
	}
	k := secret.Key{Namespace: m.Namespace, Name: m.Name}
	if !deleted && t.own(k, m.ResourceVersion) {
		return
	}
	hits := t.targets(m)
	ctx := t.context()
	if m.Labels[staging.LabelComposite] != "" {
		t.staged(ctx, m, hits, deleted)
		return
	}
	if len(hits) == 0 {
		if !deleted && m.Labels[secret.LabelManagedBy] != secret.ManagedBy {
			t.trace(ctx, m)
		}
		return
	}
	for _, h := range hits {
		if h.requeue {
			t.requeue(ctx, h.target, m)
		}
		if h.render {
			t.render(ctx, h.target, m)
		}
	}
}

// staged handles a change of a staging Secret: it requeues its XR, found
// in the index or else by the Secret's controller (by the replica that
// owns the XR's partition). A deleted staging Secret also asks the renderer
// to hand the XR's details over again.
func (t *Tracker) staged(ctx context.Context, m *metav1.PartialObjectMetadata, hits []hit, deleted bool) {
	if len(hits) == 0 {
		c := metav1.GetControllerOfNoCopy(m)
		if c == nil || string(c.UID) != m.Labels[staging.LabelComposite] || (t.owns != nil && !t.owns(c.UID)) {
			return
		}
		gv, err := schema.ParseGroupVersion(c.APIVersion)
		if err != nil {
			return
		}
		hits = []hit{{target: Target{GVK: gv.WithKind(c.Kind), Name: c.Name, UID: c.UID}}}
	}
	for _, h := range hits {
		t.requeue(ctx, h.target, m)
		if deleted {
			t.render(ctx, h.target, m)
		}
	}
}

func (t *Tracker) context() context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ctx
}

// requeue publishes a REQUEUE event for xr on the secrets stream because of
// Secret m.
func (t *Tracker) requeue(ctx context.Context, xr Target, m *metav1.PartialObjectMetadata) {
	if err := t.pub.Publish(ctx, t.services.Secrets, t.event(xr, m, "connection secret changed")); err != nil {
		t.log.Info("Cannot requeue composite resource after its connection Secret changed",
			"kind", xr.GVK.Kind, "name", xr.Name, "secret", m.Namespace+"/"+m.Name, "err", err)
	}
}

// render publishes a REQUEUE event for xr on the renderer's stream because
// of Secret m.
func (t *Tracker) render(ctx context.Context, xr Target, m *metav1.PartialObjectMetadata) {
	if err := t.pub.Publish(ctx, t.services.Renderer, t.event(xr, m, "connection secret observed by composition functions changed")); err != nil {
		t.log.Info("Cannot ask the renderer to render composite resource after a connection Secret changed",
			"kind", xr.GVK.Kind, "name", xr.Name, "secret", m.Namespace+"/"+m.Name, "err", err)
	}
}

// HandOver sends p, what this service published for xr, to the renderer,
// which writes it to the XR's status with the rest of it (the XR's
// ConnectionDetailsReady condition and
// status.connectionDetails.lastPublishedTime). tenant is the namespace of
// the XR's claim, if it has one.
func (t *Tracker) HandOver(ctx context.Context, xr Target, tenant string, p *eventsv1.Publication) error {
	ref := &eventsv1.ObjectRef{Group: xr.GVK.Group, Version: xr.GVK.Version, Kind: xr.GVK.Kind, Name: xr.Name, Uid: string(xr.UID)}
	ev := &eventsv1.Event{
		Object:       ref,
		Type:         eventsv1.EventType_EVENT_TYPE_REQUEUE,
		Target:       ref,
		ObservedTime: timestamppb.Now(),
		Reason:       "connection secret published",
		Source:       t.source,
		Tenant:       tenant,
		Publication:  p,
	}
	if err := t.pub.Publish(ctx, t.services.Renderer, ev); err != nil {
		return fmt.Errorf("cannot hand the publication of %s %q over to the renderer: %w", xr.GVK.Kind, xr.Name, err)
	}
	return nil
}

// event is a REQUEUE event for xr naming Secret m.
func (t *Tracker) event(xr Target, m *metav1.PartialObjectMetadata, reason string) *eventsv1.Event {
	return &eventsv1.Event{
		Object:          &eventsv1.ObjectRef{Version: "v1", Kind: "Secret", Namespace: m.Namespace, Name: m.Name, Uid: string(m.UID)},
		ResourceVersion: m.ResourceVersion,
		Type:            eventsv1.EventType_EVENT_TYPE_REQUEUE,
		Target:          &eventsv1.ObjectRef{Group: xr.GVK.Group, Version: xr.GVK.Version, Kind: xr.GVK.Kind, Name: xr.Name, Uid: string(xr.UID)},
		ObservedTime:    timestamppb.Now(),
		Reason:          reason,
		Source:          t.source,
	}
}

// traceTimeout bounds one owner lookup.
const traceTimeout = 10 * time.Second

// trace requeues the controller of the controlling owner of an unknown
// Secret, if this replica owns the owner's partition, and asks the renderer
// to render it (it may be a Pipeline XR, whose functions observe the
// Secret). It runs in the background, a few at a time; beyond that it drops
// the lookup (the watcher's resync still reaches the XR).
func (t *Tracker) trace(ctx context.Context, m *metav1.PartialObjectMetadata) {
	if t.owners == nil || t.owns == nil {
		return
	}
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil || !t.owns(ref.UID) {
		return
	}
	select {
	case t.traces <- struct{}{}:
	default:
		t.log.Debug("Too many connection Secret owners being looked up; dropping one", "secret", m.Namespace+"/"+m.Name)
		return
	}
	owner := *ref
	m = m.DeepCopy()
	go func() {
		defer func() { <-t.traces }()
		ctx, cancel := context.WithTimeout(ctx, traceTimeout)
		defer cancel()
		xr, ok, err := t.ownerXR(ctx, owner, m.Namespace)
		if err != nil {
			t.log.Debug("Cannot look up the owner of a connection Secret", "secret", m.Namespace+"/"+m.Name, "err", err)
			return
		}
		if ok {
			t.requeue(ctx, xr, m)
			t.render(ctx, xr, m)
		}
	}()
}

// ownerXR returns the cluster-scoped controller of owner, as a Target.
func (t *Tracker) ownerXR(ctx context.Context, owner metav1.OwnerReference, namespace string) (Target, bool, error) {
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil {
		return Target{}, false, nil //nolint:nilerr // Not a reference Loom can follow.
	}
	namespaced, err := t.owners.Namespaced(gv.WithKind(owner.Kind))
	if meta.IsNoMatchError(err) {
		return Target{}, false, nil
	}
	if err != nil {
		return Target{}, false, err
	}
	if !namespaced {
		namespace = ""
	}
	c, err := t.owners.Controller(ctx, owner, namespace)
	if err != nil || c == nil {
		return Target{}, false, err
	}
	cgv, err := schema.ParseGroupVersion(c.APIVersion)
	if err != nil {
		return Target{}, false, nil //nolint:nilerr // Not a reference Loom can follow.
	}
	gvk := cgv.WithKind(c.Kind)
	if namespaced, err := t.owners.Namespaced(gvk); err != nil || namespaced {
		return Target{}, false, nil //nolint:nilerr // Only cluster-scoped XRs have connection Secrets.
	}
	return Target{GVK: gvk, Name: c.Name, UID: c.UID}, true, nil
}

func asMeta(obj any) *metav1.PartialObjectMetadata {
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		return o
	case cache.DeletedFinalStateUnknown:
		m, _ := o.Obj.(*metav1.PartialObjectMetadata)
		return m
	}
	return nil
}

// String describes a target, for logs.
func (x Target) String() string { return fmt.Sprintf("%s %q", x.GVK.Kind, x.Name) }
