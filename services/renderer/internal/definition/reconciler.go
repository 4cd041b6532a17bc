// Package definition reconciles CompositeResourceDefinitions (XRDs): it
// generates and applies the CRDs of their composite resources (XRs) and
// claims, reports the Established and Offered conditions, and on deletion
// removes the claims, then the XRs, then the CRDs. The index that maps a
// kind to the XRD defining it, which the rest of the renderer uses to
// recognise XRs, is pkg/xrd's; this package invalidates it.
package definition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/apply"
	"github.com/loomxr/loom/pkg/condition"
	kitkube "github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/reconcile"
	"github.com/loomxr/loom/pkg/xcrd"
	"github.com/loomxr/loom/services/renderer/internal/event"
	"github.com/loomxr/loom/services/renderer/internal/kube"
)

// Finalizer is the finalizer the renderer puts on every XRD it establishes,
// so that deleting the XRD first deletes its claims and XRs, then its CRDs.
const Finalizer = "defined.apiextensions.crossplane.io"

// TypeSynced reasons of an XRD.
const (
	// ReasonInvalid says the XRD cannot be turned into CRDs.
	ReasonInvalid common.ConditionReason = "InvalidDefinition"
)

// How long to wait before looking again at a definition that waits for
// something no event announces to the renderer.
const (
	// establishWait: a fallback for the CRD's Established condition (the
	// watcher routes changes of a generated CRD to its XRD, so this is
	// rarely what wakes the XRD up).
	establishWait = 5 * time.Second
	// deletionWait: claims and XRs being deleted (their deletion is not
	// routed to the XRD).
	deletionWait = 2 * time.Second
)

var crdGVK = extv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")

// A Client reads and writes objects.
type Client interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]unstructured.Unstructured, error)
	Apply(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error)
	ApplyStatus(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error)
	MergePatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch map[string]any) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, uid types.UID) error
}

// An Invalidator drops what an index of XRDs has loaded, so that its next
// lookup reloads it (see xrd.Index).
type Invalidator interface {
	Invalidate()
}

// A Reconciler reconciles XRDs.
type Reconciler struct {
	client Client
	index  Invalidator
	rec    event.Recorder
	log    *slog.Logger
}

// An Option configures a Reconciler.
type Option func(*Reconciler)

// WithRecorder sets the Event recorder (default: none).
func WithRecorder(r event.Recorder) Option { return func(rc *Reconciler) { rc.rec = r } }

// WithLogger sets the logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(rc *Reconciler) { rc.log = l } }

// NewReconciler returns a Reconciler. index, if not nil, is invalidated
// whenever an XRD is reconciled.
func NewReconciler(c Client, index Invalidator, o ...Option) *Reconciler {
	r := &Reconciler{client: c, index: index, rec: event.Nop{}, log: slog.Default()}
	for _, fn := range o {
		fn(r)
	}
	return r
}

// Reconcile brings the CRDs of the named XRD in line with it, or deletes
// what it defines if the XRD is being deleted. It is idempotent and writes
// only what changed. An invalid XRD gets a Synced=False condition naming the
// offending field and an Event, and a permanent error.
func (r *Reconciler) Reconcile(ctx context.Context, name string) (reconcile.Result, error) {
	if r.index != nil {
		r.index.Invalidate()
	}
	u, err := r.client.Get(ctx, v1.CompositeResourceDefinitionGroupVersionKind, "", name)
	if kerrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cannot get composite resource definition %q: %w", name, err)
	}
	xrd := &v1.CompositeResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, xrd); err != nil {
		return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("cannot decode composite resource definition %q: %w", name, err))
	}
	if xrd.GetDeletionTimestamp() != nil {
		return r.delete(ctx, u, xrd)
	}

	if err := xcrd.Validate(xrd); err != nil {
		return r.invalid(ctx, u, xrd, fmt.Errorf("cannot generate CustomResourceDefinitions: %w", err))
	}

	if !slices.Contains(u.GetFinalizers(), Finalizer) {
		patch := map[string]any{"metadata": map[string]any{
			"finalizers":      append(slices.Clone(u.GetFinalizers()), Finalizer),
			"resourceVersion": u.GetResourceVersion(),
		}}
		if u, err = r.client.MergePatch(ctx, v1.CompositeResourceDefinitionGroupVersionKind, "", name, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("cannot add finalizer to composite resource definition %q: %w", name, err)
		}
	}

	xrCRD, err := xcrd.ForCompositeResource(xrd)
	if err != nil {
		return reconcile.Result{}, reconcile.Terminal(err)
	}
	xrEstablished, err := r.applyCRD(ctx, u, xrCRD)
	if kerrors.IsInvalid(err) {
		// A schema the offline checks let through, refused by the API
		// server: retrying cannot help.
		return r.invalid(ctx, u, xrd, err)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	want := []common.Condition{ReconcileSuccess()}
	if xrEstablished {
		want = append(want, v1.WatchingComposite())
	}
	established := xrEstablished
	if xrd.OffersClaim() {
		claimCRD, err := xcrd.ForCompositeResourceClaim(xrd)
		if err != nil {
			return reconcile.Result{}, reconcile.Terminal(err)
		}
		claimEstablished, err := r.applyCRD(ctx, u, claimCRD)
		if kerrors.IsInvalid(err) {
			return r.invalid(ctx, u, xrd, err)
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		if claimEstablished {
			want = append(want, v1.WatchingClaim())
		}
		established = established && claimEstablished
	}
	if _, err := r.setStatus(ctx, u, xrd, want); err != nil {
		return reconcile.Result{}, err
	}
	if !established {
		return reconcile.Result{RequeueAfter: establishWait}, nil
	}
	return reconcile.Result{}, nil
}

// invalid reports that the XRD cannot define its CRDs, cause says why: a
// Synced=False condition, an Event when the condition is new, and a
// permanent error. The CRDs of the last valid version are still served.
func (r *Reconciler) invalid(ctx context.Context, u *unstructured.Unstructured, xrd *v1.CompositeResourceDefinition, cause error) (reconcile.Result, error) {
	msg := cause.Error()
	want := []common.Condition{{Type: common.TypeSynced, Status: corev1.ConditionFalse, Reason: ReasonInvalid, Message: msg, LastTransitionTime: metav1.Now()}}
	for _, t := range []common.ConditionType{v1.TypeEstablished, v1.TypeOffered} {
		if c, ok := condition.Find(condition.Observed(u), t); ok {
			want = append(want, c)
		}
	}
	wrote, serr := r.setStatus(ctx, u, xrd, want)
	if serr != nil {
		return reconcile.Result{}, serr
	}
	if wrote {
		r.rec.Event(u, event.TypeWarning, event.ReasonInvalidDefinition, "Validate", msg)
	}
	return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("composite resource definition %q is invalid: %w", u.GetName(), cause))
}

// ReconcileSuccess is the Synced condition of an XRD whose CRDs are applied.
func ReconcileSuccess() common.Condition { return common.ReconcileSuccess() }

// applyCRD applies crd unless the CRD in the cluster already matches it, and
// reports whether the API server serves it (Established).
func (r *Reconciler) applyCRD(ctx context.Context, xrd *unstructured.Unstructured, crd *extv1.CustomResourceDefinition) (bool, error) {
	intent, err := toUnstructured(crd)
	if err != nil {
		return false, err
	}
	// The write below is a server-side apply, and the watcher mirrors every
	// CRD and tells the renderer of a change of one an XRD controls: the
	// read path may answer with any version it holds (a resync of an
	// unchanged XRD reads nothing from the API server).
	cur, err := r.client.Get(kitkube.Guarded(ctx), crdGVK, "", crd.GetName())
	if err != nil && !kerrors.IsNotFound(err) {
		return false, fmt.Errorf("cannot get CustomResourceDefinition %q: %w", crd.GetName(), err)
	}
	if kerrors.IsNotFound(err) {
		cur = nil
	}
	if cur != nil {
		if c := metav1.GetControllerOf(cur); c != nil && c.UID != xrd.GetUID() {
			return false, reconcile.Terminal(fmt.Errorf("cannot apply CustomResourceDefinition %q: it is controlled by %s %q", crd.GetName(), c.Kind, c.Name))
		}
	}
	change, err := apply.Changes(cur, intent, kube.FieldManager, "")
	if err != nil {
		return false, err
	}
	if change {
		if cur, err = r.client.Apply(ctx, intent); err != nil {
			return false, fmt.Errorf("cannot apply CustomResourceDefinition %q: %w", crd.GetName(), err)
		}
		r.log.Info("Applied CustomResourceDefinition", "crd", crd.GetName(), "xrd", xrd.GetName())
		r.rec.Event(xrd, event.TypeNormal, event.ReasonEstablishDefinition, "ApplyCRD", fmt.Sprintf("Applied CustomResourceDefinition %s", crd.GetName()))
	}
	got := &extv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cur.Object, got); err != nil {
		return false, fmt.Errorf("cannot decode CustomResourceDefinition %q: %w", crd.GetName(), err)
	}
	return xcrd.IsEstablished(got.Status), nil
}

// setStatus applies the XRD's status with the supplied conditions, unless
// it says that already. It reports whether it wrote.
func (r *Reconciler) setStatus(ctx context.Context, u *unstructured.Unstructured, xrd *v1.CompositeResourceDefinition, want []common.Condition) (bool, error) {
	want = condition.Settle(condition.Observed(u), metav1.Now(), want...)
	status := map[string]any{"conditions": condition.List(want...)}
	if xrd.GetReferenceableVersion() != "" {
		ctrl := map[string]any{"compositeResourceType": typeRef(xrd.GetCompositeGroupVersionKind())}
		if xrd.OffersClaim() {
			ctrl["compositeResourceClaimType"] = typeRef(xrd.GetClaimGroupVersionKind())
		}
		status["controllers"] = ctrl
	}
	intent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.SchemeGroupVersion.String(),
		"kind":       v1.CompositeResourceDefinitionKind,
		"metadata":   map[string]any{"name": u.GetName()},
		"status":     status,
	}}
	change, err := apply.Changes(u, intent, kube.FieldManager, "status")
	if err != nil || !change {
		return false, err
	}
	if _, err := r.client.ApplyStatus(ctx, intent); err != nil {
		return false, fmt.Errorf("cannot apply status of composite resource definition %q: %w", u.GetName(), err)
	}
	return true, nil
}

func typeRef(gvk schema.GroupVersionKind) map[string]any {
	return map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind}
}

// delete removes the claims, then the XRs, then the CRDs of a deleted XRD,
// and then its finalizer. It comes back while claims or XRs remain.
func (r *Reconciler) delete(ctx context.Context, u *unstructured.Unstructured, xrd *v1.CompositeResourceDefinition) (reconcile.Result, error) {
	if !slices.Contains(u.GetFinalizers(), Finalizer) {
		return reconcile.Result{}, nil
	}
	want := []common.Condition{v1.TerminatingComposite()}
	if xrd.OffersClaim() {
		want = append(want, v1.TerminatingClaim())
	}
	if _, err := r.setStatus(ctx, u, xrd, want); err != nil {
		return reconcile.Result{}, err
	}

	if xrd.OffersClaim() {
		left, err := r.deleteAll(ctx, xrd.GetClaimGroupVersionKind())
		if err != nil {
			return reconcile.Result{}, err
		}
		if left > 0 {
			r.log.Info("Waiting for claims to be deleted", "xrd", xrd.GetName(), "claims", left)
			return reconcile.Result{RequeueAfter: deletionWait}, nil
		}
		if err := r.deleteCRD(ctx, xrd, xcrd.ClaimCRDName(xrd)); err != nil {
			return reconcile.Result{}, err
		}
	}
	left, err := r.deleteAll(ctx, xrd.GetCompositeGroupVersionKind())
	if err != nil {
		return reconcile.Result{}, err
	}
	if left > 0 {
		r.log.Info("Waiting for composite resources to be deleted", "xrd", xrd.GetName(), "composites", left)
		return reconcile.Result{RequeueAfter: deletionWait}, nil
	}
	if err := r.deleteCRD(ctx, xrd, xrd.GetName()); err != nil {
		return reconcile.Result{}, err
	}

	fins := slices.DeleteFunc(slices.Clone(u.GetFinalizers()), func(f string) bool { return f == Finalizer })
	patch := map[string]any{"metadata": map[string]any{"finalizers": fins, "resourceVersion": u.GetResourceVersion()}}
	if _, err := r.client.MergePatch(ctx, v1.CompositeResourceDefinitionGroupVersionKind, "", u.GetName(), patch); err != nil && !kerrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("cannot remove finalizer of composite resource definition %q: %w", u.GetName(), err)
	}
	r.rec.Event(u, event.TypeNormal, event.ReasonDeleteDefinition, "Delete", "Deleted the claims, composite resources and CustomResourceDefinitions of the definition")
	return reconcile.Result{}, nil
}

// deleteAll deletes every object of kind gvk that is not being deleted yet
// and returns how many exist. A kind the API server does not serve has none.
// When the renderer may not list the kind (its aggregated role is gone
// already), it reports none: deleting the CRD then deletes the objects.
func (r *Reconciler) deleteAll(ctx context.Context, gvk schema.GroupVersionKind) (int, error) {
	items, err := r.client.List(ctx, gvk, "", nil)
	if meta.IsNoMatchError(err) || kerrors.IsNotFound(err) {
		return 0, nil
	}
	if kerrors.IsForbidden(err) {
		r.log.Warn("Cannot list the objects of a deleted definition; deleting their CustomResourceDefinition deletes them", "kind", gvk.Kind, "err", err)
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cannot list %s: %w", gvk.Kind, err)
	}
	var errs []error
	for i := range items {
		o := &items[i]
		if o.GetDeletionTimestamp() != nil {
			continue
		}
		if err := r.client.Delete(ctx, gvk, o.GetNamespace(), o.GetName(), o.GetUID()); err != nil {
			errs = append(errs, fmt.Errorf("cannot delete %s %q: %w", gvk.Kind, o.GetName(), err))
		}
	}
	return len(items), errors.Join(errs...)
}

// deleteCRD deletes the named CRD if the XRD controls it.
func (r *Reconciler) deleteCRD(ctx context.Context, xrd *v1.CompositeResourceDefinition, name string) error {
	cur, err := r.client.Get(ctx, crdGVK, "", name)
	if kerrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot get CustomResourceDefinition %q: %w", name, err)
	}
	if c := metav1.GetControllerOf(cur); c == nil || c.UID != xrd.GetUID() {
		return nil
	}
	if err := r.client.Delete(ctx, crdGVK, "", name, cur.GetUID()); err != nil {
		return fmt.Errorf("cannot delete CustomResourceDefinition %q: %w", name, err)
	}
	return nil
}

// toUnstructured converts a typed object to the intent of an apply: no
// status, no server-set metadata.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot convert %T: %w", obj, err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return &unstructured.Unstructured{Object: m}, nil
}
