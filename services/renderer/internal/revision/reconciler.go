package revision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/composition"
	"github.com/loomxr/loom/pkg/reconcile"
	"github.com/loomxr/loom/pkg/xcrd"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/renderer/internal/event"
)

// A Client reads and writes objects.
type Client interface {
	Reader
	Create(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
	MergePatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch map[string]any) (*unstructured.Unstructured, error)
}

// A Publisher publishes bus events.
type Publisher interface {
	Publish(ctx context.Context, service string, ev *eventsv1.Event) error
}

// Definitions finds the XRD that defines a kind of XR.
type Definitions interface {
	ForComposite(ctx context.Context, gk schema.GroupKind) (*v1.CompositeResourceDefinition, error)
}

// A Reconciler creates the revisions of Compositions and requeues the XRs
// that should follow them.
type Reconciler struct {
	client Client
	store  *Store
	defs   Definitions
	pub    Publisher
	// service is the renderer's work stream, where requeues go.
	service string
	rec     event.Recorder
	log     *slog.Logger
	source  string
}

// An Option configures a Reconciler.
type Option func(*Reconciler)

// WithRecorder sets the Event recorder (default: none).
func WithRecorder(r event.Recorder) Option { return func(rc *Reconciler) { rc.rec = r } }

// WithLogger sets the logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(rc *Reconciler) { rc.log = l } }

// WithSource sets the source recorded on the REQUEUE events it publishes.
func WithSource(s string) Option { return func(rc *Reconciler) { rc.source = s } }

// NewReconciler returns a Reconciler that requeues XRs by publishing to
// service's work stream (the renderer's) through pub. store is invalidated
// for every Composition it reconciles, so this replica's renders see new
// revisions at once.
func NewReconciler(c Client, store *Store, defs Definitions, pub Publisher, service string, o ...Option) *Reconciler {
	r := &Reconciler{client: c, store: store, defs: defs, pub: pub, service: service, rec: event.Nop{}, log: slog.Default(), source: "renderer"}
	for _, fn := range o {
		fn(r)
	}
	return r
}

// Hash returns the hash of a Composition: the hex SHA-256 of its labels,
// annotations and spec, each encoded as YAML.
func Hash(c *v1.Composition) (string, error) {
	h := sha256.New()
	for _, v := range []any{c.GetLabels(), c.GetAnnotations(), c.Spec} {
		y, err := yaml.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("cannot hash Composition %q: %w", c.GetName(), err)
		}
		_, _ = h.Write(y)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Name returns the name of a Composition's revision with the supplied hash.
func Name(composition, hash string) string { return composition + "-" + hash[:7] }

// hashLabel returns the value of the composition-hash label.
func hashLabel(hash string) string {
	if len(hash) > 63 {
		return hash[:63]
	}
	return hash
}

// Reconcile makes sure the named Composition's current state has a revision
// that is the latest. ev is the event that caused the reconcile: when the
// revisions changed (by this call, or by the change ev reports), the XRs that
// should follow are requeued. It is idempotent.
func (r *Reconciler) Reconcile(ctx context.Context, name string, ev *eventsv1.Event) error {
	r.store.Invalidate(name)
	u, err := r.client.Get(ctx, CompositionGVK, "", name)
	if kerrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot get Composition %q: %w", name, err)
	}
	comp := &v1.Composition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, comp); err != nil {
		return reconcile.Terminal(fmt.Errorf("cannot decode Composition %q: %w", name, err))
	}
	if comp.GetDeletionTimestamp() != nil {
		return nil
	}
	hash, err := Hash(comp)
	if err != nil {
		return reconcile.Terminal(err)
	}
	// The revisions as the object mirror shows them answer when the latest
	// is the current hash's: ensure would write nothing. Otherwise, before
	// it writes, a LIST shows the revisions this replica may have just
	// created. A mirror behind a revision created since shows another hash
	// as the latest, or brings that revision's event later.
	revs, err := r.store.List(ctx, name, false)
	if err != nil {
		return err
	}
	if l := composition.Latest(revs, nil); l == nil || l.GetLabels()[v1.LabelCompositionHash] != hashLabel(hash) {
		if revs, err = r.store.List(ctx, name, true); err != nil {
			return err
		}
	}
	changed, err := r.ensure(ctx, u, comp, hash, revs)
	if err != nil {
		return err
	}
	revisionEvent := ev.GetObject().GetKind() == RevisionGVK.Kind && ev.GetType() != eventsv1.EventType_EVENT_TYPE_RESYNC
	if !changed && !revisionEvent {
		return nil
	}
	if changed {
		r.store.Invalidate(name)
	}
	revs, err = r.store.List(ctx, name, true)
	if err != nil {
		return err
	}
	return r.fanOut(ctx, comp, revs)
}

// ensure creates the revision of the current hash, or renumbers it to be the
// latest. It reports whether it wrote.
func (r *Reconciler) ensure(ctx context.Context, u *unstructured.Unstructured, comp *v1.Composition, hash string, revs []*v1.CompositionRevision) (bool, error) {
	latest := composition.Latest(revs, nil)
	var next int64 = 1
	if latest != nil {
		next = latest.Spec.Revision + 1
	}
	for _, rev := range revs {
		if rev.GetLabels()[v1.LabelCompositionHash] != hashLabel(hash) {
			continue
		}
		if rev == latest {
			return false, nil
		}
		patch := map[string]any{"spec": map[string]any{"revision": next}}
		if _, err := r.client.MergePatch(ctx, RevisionGVK, "", rev.GetName(), patch); err != nil {
			return false, fmt.Errorf("cannot renumber CompositionRevision %q: %w", rev.GetName(), err)
		}
		r.log.Info("Renumbered composition revision", "composition", comp.GetName(), "revision", rev.GetName(), "number", next)
		r.rec.Event(u, event.TypeNormal, event.ReasonCreateRevision, "Renumber",
			fmt.Sprintf("Composition went back to revision %s, now number %d", rev.GetName(), next))
		return true, nil
	}

	rev := &v1.CompositionRevision{
		TypeMeta: metav1.TypeMeta{APIVersion: RevisionGVK.GroupVersion().String(), Kind: RevisionGVK.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name:        Name(comp.GetName(), hash),
			Labels:      maps.Clone(comp.GetLabels()),
			Annotations: maps.Clone(comp.GetAnnotations()),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: CompositionGVK.GroupVersion().String(), Kind: CompositionGVK.Kind,
				Name: comp.GetName(), UID: comp.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: v1.CompositionRevisionSpec{CompositionSpec: *comp.Spec.DeepCopy(), Revision: next},
	}
	if rev.Labels == nil {
		rev.Labels = map[string]string{}
	}
	rev.Labels[v1.LabelCompositionName] = comp.GetName()
	rev.Labels[v1.LabelCompositionHash] = hashLabel(hash)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rev)
	if err != nil {
		return false, fmt.Errorf("cannot encode CompositionRevision %q: %w", rev.GetName(), err)
	}
	delete(obj, "status")
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	_, err = r.client.Create(ctx, &unstructured.Unstructured{Object: obj})
	if kerrors.IsAlreadyExists(err) {
		// A revision of that name that the list did not show: one created a
		// moment ago, or one of another hash with the same first seven
		// characters. Either way, look again.
		return false, fmt.Errorf("cannot create CompositionRevision %q: %w", rev.GetName(), err)
	}
	if err != nil {
		return false, fmt.Errorf("cannot create CompositionRevision %q: %w", rev.GetName(), err)
	}
	r.log.Info("Created composition revision", "composition", comp.GetName(), "revision", rev.GetName(), "number", next)
	r.rec.Event(u, event.TypeNormal, event.ReasonCreateRevision, "Create", fmt.Sprintf("Created revision %s, number %d", rev.GetName(), next))
	return true, nil
}

// fanOut publishes a REQUEUE event for each XR that should render again
// because of the Composition's revisions: those that use it under the
// Automatic policy and are not on the latest revision their
// compositionRevisionSelector allows, and those with no Composition yet.
func (r *Reconciler) fanOut(ctx context.Context, comp *v1.Composition, revs []*v1.CompositionRevision) error {
	gvk := comp.Spec.CompositeTypeRef.GroupVersionKind()
	xrd, err := r.defs.ForComposite(ctx, gvk.GroupKind())
	if err != nil {
		return err
	}
	if xrd == nil {
		return nil
	}
	items, err := r.client.List(ctx, gvk, "", nil)
	if meta.IsNoMatchError(err) || kerrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot list %s to requeue them: %w", gvk.Kind, err)
	}
	path := xcrd.SpecMachineryPath(xrd.GetScope())
	var errs []error
	n := 0
	for i := range items {
		xr := &items[i]
		cause := &eventsv1.ObjectRef{Group: CompositionGVK.Group, Version: CompositionGVK.Version, Kind: CompositionGVK.Kind, Name: comp.GetName(), Uid: string(comp.GetUID())}
		follow, rev := Follows(xr, path, comp.GetName(), revs)
		if !follow {
			continue
		}
		if rev != nil {
			// The XR's render looks for this revision and reads the
			// revisions afresh only if its cache lacks it.
			cause = &eventsv1.ObjectRef{Group: RevisionGVK.Group, Version: RevisionGVK.Version, Kind: RevisionGVK.Kind, Name: rev.GetName(), Uid: string(rev.GetUID())}
		}
		ev := &eventsv1.Event{
			Object: cause,
			Target: &eventsv1.ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: xr.GetNamespace(), Name: xr.GetName(), Uid: string(xr.GetUID())},
			Type:   eventsv1.EventType_EVENT_TYPE_REQUEUE,
			Reason: fmt.Sprintf("revisions of Composition %s changed", comp.GetName()),
			Source: r.source,
		}
		if err := r.pub.Publish(ctx, r.service, ev); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if n > 0 {
		r.log.Info("Requeued composite resources after a Composition change", "composition", comp.GetName(), "composites", n)
	}
	return errors.Join(errs...)
}

// Follows reports whether the XR (whose machinery fields sit at path) must
// render again when the revisions of the named Composition are revs, and
// the revision it should move to if known: it uses that Composition under
// the Automatic policy and its revision is not the latest its selector
// allows, or it has no Composition yet (and no revision to move to).
func Follows(xr *unstructured.Unstructured, path, comp string, revs []*v1.CompositionRevision) (bool, *v1.CompositionRevision) {
	p := splitPath(path)
	ref, _, _ := unstructured.NestedString(xr.Object, append(p, "compositionRef", "name")...)
	if ref == "" {
		return true, nil
	}
	if ref != comp {
		return false, nil
	}
	policy, _, _ := unstructured.NestedString(xr.Object, append(p, "compositionUpdatePolicy")...)
	if policy == string(v1.UpdateManual) {
		return false, nil
	}
	var sel labels.Selector
	if ml, ok, _ := unstructured.NestedStringMap(xr.Object, append(p, "compositionRevisionSelector", "matchLabels")...); ok {
		sel = labels.SelectorFromSet(ml)
	}
	latest := composition.Latest(revs, sel)
	if latest == nil {
		return false, nil
	}
	cur, _, _ := unstructured.NestedString(xr.Object, append(p, "compositionRevisionRef", "name")...)
	if cur == latest.GetName() {
		return false, nil
	}
	return true, latest
}

func splitPath(path string) []string {
	if path == "spec" {
		return []string{"spec"}
	}
	return []string{"spec", xcrd.FieldCrossplane}
}
