package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/pkg/apis/apiextensions/v1beta1"
	"github.com/loomxr/loom/pkg/apis/common"
)

const (
	// Finalizer keeps a Usage until the controller has unlabelled the
	// used object and replayed its deletion; Crossplane's name.
	Finalizer = "usage.apiextensions.crossplane.io"
	// annotationDetails says in one line who uses what, as Crossplane does.
	annotationDetails = "crossplane.io/usage-details"
	// labelComposite marks a composed resource with its composite.
	labelComposite = "crossplane.io/composite"
)

// Result says when to reconcile a Usage again.
type Result struct {
	// RequeueAfter, when positive, asks for another reconcile after it.
	RequeueAfter time.Duration
	// Requeue asks for another reconcile soon (a write conflicted).
	Requeue bool
}

// A Reconciler brings the used and using objects of a Usage in line with
// it. It reads the Usage and the objects from the API server, and which
// other Usages name the used object from a UsageLister.
type Reconciler struct {
	objects ResourceClient
	usages  UsageLister
	log     *slog.Logger

	poll, waitPoll, replayTimeout time.Duration
	replay                        func(func())
}

// A ReconcilerOption configures a Reconciler.
type ReconcilerOption func(*Reconciler)

// WithPollInterval sets how often a Usage in place is checked again (the
// controller watches Usages, not the objects they name). One minute by
// default, as Crossplane.
func WithPollInterval(d time.Duration) ReconcilerOption { return func(r *Reconciler) { r.poll = d } }

// WithReplay sets how a replayed deletion runs: it must run its function
// after the reconcile returns (by default on a goroutine of its own).
func WithReplay(run func(func())) ReconcilerOption { return func(r *Reconciler) { r.replay = run } }

// NewReconciler returns a Reconciler.
func NewReconciler(objects ResourceClient, usages UsageLister, log *slog.Logger, opts ...ReconcilerOption) *Reconciler {
	r := &Reconciler{
		objects: objects, usages: usages, log: log,
		poll: time.Minute, waitPoll: 30 * time.Second, replayTimeout: 30 * time.Second,
		replay: func(f func()) { go f() },
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

var usageGVK = v1beta1.SchemeGroupVersion.WithKind("Usage") //nolint:gochecknoglobals // Treated as a constant.

// Reconcile reconciles the Usage name. It is idempotent: a Usage in place
// is not written.
func (r *Reconciler) Reconcile(ctx context.Context, name string) (Result, error) {
	usages, err := r.objects.Resource(usageGVK, "")
	if err != nil {
		return Result{}, fmt.Errorf("cannot map Usages: %w", err)
	}
	obj, err := usages.Get(ctx, name, metav1.GetOptions{})
	if kerrors.IsNotFound(err) {
		return Result{}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("cannot get Usage %q: %w", name, err)
	}
	u, err := FromUnstructured(obj)
	if err != nil {
		return Result{}, err
	}
	if _, err := schema.ParseGroupVersion(u.Spec.Of.APIVersion); err != nil {
		return Result{}, r.fail(ctx, obj, fmt.Errorf("usage %q: spec.of.apiVersion: %w", name, err))
	}
	if obj.GetDeletionTimestamp() != nil {
		return r.release(ctx, obj, u)
	}

	// Finalizer, resolved selectors and details in one write.
	want := obj.DeepCopy()
	if !slices.Contains(want.GetFinalizers(), Finalizer) {
		want.SetFinalizers(append(want.GetFinalizers(), Finalizer))
	}
	if err := r.resolve(ctx, want, u, &u.Spec.Of, "of"); err != nil {
		return Result{}, r.fail(ctx, obj, err)
	}
	if u.Spec.By != nil {
		if err := r.resolve(ctx, want, u, u.Spec.By, "by"); err != nil {
			return Result{}, r.fail(ctx, obj, err)
		}
	}
	ann := want.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[annotationDetails] = details(u)
	want.SetAnnotations(ann)

	used, err := r.get(ctx, u.Spec.Of)
	if err != nil {
		return Result{}, r.fail(ctx, obj, fmt.Errorf("usage %q: cannot get the used resource: %w", name, err))
	}
	if used.GetLabels()[LabelInUse] != "true" {
		if err := r.patchLabel(ctx, used, ptr("true")); err != nil {
			return Result{}, r.fail(ctx, obj, fmt.Errorf("usage %q: %w", name, err))
		}
	}
	if u.Spec.By != nil {
		using, err := r.get(ctx, *u.Spec.By)
		if err != nil {
			return Result{}, r.fail(ctx, obj, fmt.Errorf("usage %q: cannot get the using resource: %w", name, err))
		}
		// The using resource owns the Usage, so that Kubernetes' garbage
		// collector deletes the Usage once its user is gone. Not a
		// controller reference (a composed Usage has its XR's), and not
		// blocking the owner's deletion, as Crossplane.
		refs := want.GetOwnerReferences()
		if !slices.ContainsFunc(refs, func(o metav1.OwnerReference) bool { return o.UID == using.GetUID() }) {
			want.SetOwnerReferences(append(refs, metav1.OwnerReference{
				APIVersion: using.GetAPIVersion(), Kind: using.GetKind(), Name: using.GetName(), UID: using.GetUID(),
			}))
		}
	}
	if !equalObject(obj, want) {
		if obj, err = usages.Update(ctx, want, metav1.UpdateOptions{}); err != nil {
			if kerrors.IsConflict(err) {
				return Result{Requeue: true}, nil
			}
			return Result{}, fmt.Errorf("cannot update Usage %q: %w", name, err)
		}
	}
	if err := r.setConditions(ctx, obj, common.Available(), common.ReconcileSuccess()); err != nil {
		return Result{}, err
	}
	return Result{RequeueAfter: r.poll}, nil
}

// release lets the used object go once the Usage is deleted: it unlabels
// it unless another Usage names it, replays a refused deletion if the
// Usage asks for it, and drops the finalizer.
func (r *Reconciler) release(ctx context.Context, obj *unstructured.Unstructured, u *v1beta1.Usage) (Result, error) {
	if !slices.Contains(obj.GetFinalizers(), Finalizer) {
		return Result{}, nil
	}
	// A composed Usage is deleted with its XR, together with its user: it
	// keeps protecting the used resource until the user is gone.
	// Crossplane waits for any user of a composed Usage because its
	// garbage collection of resources that left a Composition removes the
	// crossplane.io/composite label first; Loom's renderer does not, so
	// the Usage waits only while its user is being deleted.
	if by := u.Spec.By; by != nil && by.ResourceRef != nil && obj.GetLabels()[labelComposite] != "" {
		using, err := r.get(ctx, *by)
		switch {
		case err == nil && using.GetDeletionTimestamp() != nil:
			r.log.Debug("waiting for the using resource to be deleted", "usage", obj.GetName(), "kind", by.Kind, "name", by.ResourceRef.Name)
			return Result{RequeueAfter: r.waitPoll}, nil
		case err != nil && !kerrors.IsNotFound(err):
			return Result{}, fmt.Errorf("usage %q: cannot get the using resource: %w", obj.GetName(), err)
		}
	}
	var replay func()
	if of := u.Spec.Of; of.ResourceRef != nil {
		used, err := r.get(ctx, of)
		switch {
		case kerrors.IsNotFound(err):
		case err != nil:
			return Result{}, fmt.Errorf("usage %q: cannot get the used resource: %w", obj.GetName(), err)
		default:
			others, err := r.usages.Of(of.APIVersion, of.Kind, of.ResourceRef.Name)
			if err != nil {
				return Result{}, err
			}
			others = slices.DeleteFunc(others, func(o *v1beta1.Usage) bool { return o.GetName() == obj.GetName() })
			if len(others) == 0 && used.GetLabels()[LabelInUse] != "" {
				if err := r.patchLabel(ctx, used, nil); err != nil {
					return Result{}, fmt.Errorf("usage %q: %w", obj.GetName(), err)
				}
			}
			if policy, ok := used.GetAnnotations()[AnnotationDeletionAttempt]; ok && u.Spec.ReplayDeletion != nil && *u.Spec.ReplayDeletion {
				replay = func() { r.replayDeletion(context.WithoutCancel(ctx), used, metav1.DeletionPropagation(policy)) }
			}
		}
	}
	usages, err := r.objects.Resource(usageGVK, "")
	if err != nil {
		return Result{}, fmt.Errorf("cannot map Usages: %w", err)
	}
	obj.SetFinalizers(slices.DeleteFunc(obj.GetFinalizers(), func(f string) bool { return f == Finalizer }))
	if _, err := usages.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		if kerrors.IsConflict(err) {
			return Result{Requeue: true}, nil
		}
		return Result{}, fmt.Errorf("cannot remove the finalizer of Usage %q: %w", obj.GetName(), err)
	}
	if replay != nil {
		// After the finalizer is gone: the webhook refuses the deletion
		// for as long as it sees the Usage.
		r.replay(replay)
	}
	return Result{}, nil
}

// replayDeletion deletes used with policy, trying again while the webhook
// still refuses: its informer may not have seen the Usage go yet.
func (r *Reconciler) replayDeletion(ctx context.Context, used *unstructured.Unstructured, policy metav1.DeletionPropagation) {
	ctx, cancel := context.WithTimeout(ctx, r.replayTimeout)
	defer cancel()
	ri, err := r.objects.Resource(used.GroupVersionKind(), "")
	if err != nil {
		r.log.Warn("cannot replay a deletion", "kind", used.GetKind(), "name", used.GetName(), "err", err)
		return
	}
	uid := used.GetUID()
	for {
		err := ri.Delete(ctx, used.GetName(), metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err == nil || kerrors.IsNotFound(err) {
			r.log.Info("replayed a deletion", "kind", used.GetKind(), "name", used.GetName(), "policy", policy)
			return
		}
		if !kerrors.IsConflict(err) {
			r.log.Warn("cannot replay a deletion", "kind", used.GetKind(), "name", used.GetName(), "err", err)
			return
		}
		select {
		case <-ctx.Done():
			r.log.Warn("cannot replay a deletion", "kind", used.GetKind(), "name", used.GetName(), "err", err)
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// resolve sets spec.<field>.resourceRef of want from res's selector when
// it has no reference yet: the first object of the kind, in order of name,
// with the labels and, with matchControllerRef, the Usage's controller.
func (r *Reconciler) resolve(ctx context.Context, want *unstructured.Unstructured, u *v1beta1.Usage, res *v1beta1.Resource, field string) error {
	if res.ResourceRef != nil && res.ResourceRef.Name != "" {
		return nil
	}
	if res.ResourceSelector == nil {
		return fmt.Errorf("usage %q: spec.%s: neither resourceRef nor resourceSelector is set", u.GetName(), field)
	}
	gv, err := schema.ParseGroupVersion(res.APIVersion)
	if err != nil {
		return fmt.Errorf("usage %q: spec.%s.apiVersion: %w", u.GetName(), field, err)
	}
	ri, err := r.objects.Resource(gv.WithKind(res.Kind), "")
	if err != nil {
		return fmt.Errorf("usage %q: spec.%s: cannot map %s: %w", u.GetName(), field, res.Kind, err)
	}
	sel := labels.SelectorFromSet(res.ResourceSelector.MatchLabels)
	l, err := ri.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return fmt.Errorf("usage %q: spec.%s.resourceSelector: cannot list %s: %w", u.GetName(), field, res.Kind, err)
	}
	matchController := res.ResourceSelector.MatchControllerRef != nil && *res.ResourceSelector.MatchControllerRef
	ctrl := metav1.GetControllerOf(u)
	names := []string{}
	for i := range l.Items {
		o := &l.Items[i]
		if matchController {
			oc := metav1.GetControllerOf(o)
			if ctrl == nil || oc == nil || oc.UID != ctrl.UID {
				continue
			}
		}
		names = append(names, o.GetName())
	}
	if len(names) == 0 {
		if matchController {
			return fmt.Errorf("usage %q: spec.%s.resourceSelector: no %s matches labels %q and the Usage's controller", u.GetName(), field, res.Kind, sel.String())
		}
		return fmt.Errorf("usage %q: spec.%s.resourceSelector: no %s matches labels %q", u.GetName(), field, res.Kind, sel.String())
	}
	slices.Sort(names)
	res.ResourceRef = &v1beta1.ResourceRef{Name: names[0]}
	return unstructured.SetNestedField(want.Object, names[0], "spec", field, "resourceRef", "name")
}

// get returns the object res names.
func (r *Reconciler) get(ctx context.Context, res v1beta1.Resource) (*unstructured.Unstructured, error) {
	if res.ResourceRef == nil {
		return nil, errors.New("no resourceRef")
	}
	gv, err := schema.ParseGroupVersion(res.APIVersion)
	if err != nil {
		return nil, err
	}
	ri, err := r.objects.Resource(gv.WithKind(res.Kind), "")
	if err != nil {
		return nil, fmt.Errorf("cannot map %s: %w", res.Kind, err)
	}
	return ri.Get(ctx, res.ResourceRef.Name, metav1.GetOptions{})
}

// patchLabel sets (value non-nil) or removes the in-use label of o by
// merge patch: nothing else of o is written, whoever owns the rest.
func (r *Reconciler) patchLabel(ctx context.Context, o *unstructured.Unstructured, value *string) error {
	ri, err := r.objects.Resource(o.GroupVersionKind(), "")
	if err != nil {
		return fmt.Errorf("cannot map %s: %w", o.GetKind(), err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{LabelInUse: value}}})
	if err != nil {
		return err
	}
	if _, err := ri.Patch(ctx, o.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cannot set the label %s of %s %q: %w", LabelInUse, o.GetKind(), o.GetName(), err)
	}
	return nil
}

// fail records cause in the Usage's Synced condition and returns it.
func (r *Reconciler) fail(ctx context.Context, obj *unstructured.Unstructured, cause error) error {
	if err := r.setConditions(ctx, obj, common.ReconcileError(cause)); err != nil {
		r.log.Warn("cannot record a failure in the Usage's status", "usage", obj.GetName(), "err", err)
	}
	return cause
}

// setConditions writes conditions to the status of obj, unless it has them.
func (r *Reconciler) setConditions(ctx context.Context, obj *unstructured.Unstructured, cs ...common.Condition) error {
	u, err := FromUnstructured(obj)
	if err != nil {
		return err
	}
	before := u.Status.DeepCopy()
	u.Status.SetConditions(cs...)
	if equalStatus(before, &u.Status) {
		return nil
	}
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&u.Status)
	if err != nil {
		return fmt.Errorf("cannot encode the status of Usage %q: %w", obj.GetName(), err)
	}
	out := obj.DeepCopy()
	out.Object["status"] = st
	usages, err := r.objects.Resource(usageGVK, "")
	if err != nil {
		return fmt.Errorf("cannot map Usages: %w", err)
	}
	if _, err := usages.UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil && !kerrors.IsConflict(err) {
		return fmt.Errorf("cannot update the status of Usage %q: %w", obj.GetName(), err)
	}
	return nil
}

func equalStatus(a, b *v1beta1.UsageStatus) bool {
	if len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		if !a.Conditions[i].Equal(b.Conditions[i]) {
			return false
		}
	}
	return true
}

// equalObject reports whether a and b have the same metadata and spec.
func equalObject(a, b *unstructured.Unstructured) bool {
	ja, _ := json.Marshal([]any{a.GetFinalizers(), a.GetAnnotations(), a.GetOwnerReferences(), a.Object["spec"]})
	jb, _ := json.Marshal([]any{b.GetFinalizers(), b.GetAnnotations(), b.GetOwnerReferences(), b.Object["spec"]})
	return string(ja) == string(jb)
}

// details is the annotation that says who uses what, as Crossplane's.
func details(u *v1beta1.Usage) string {
	if u.Spec.Reason != nil {
		return *u.Spec.Reason
	}
	if u.Spec.By != nil && u.Spec.By.ResourceRef != nil && u.Spec.Of.ResourceRef != nil {
		return fmt.Sprintf("%s/%s uses %s/%s", u.Spec.By.Kind, u.Spec.By.ResourceRef.Name, u.Spec.Of.Kind, u.Spec.Of.ResourceRef.Name)
	}
	return "undefined"
}

func ptr[T any](v T) *T { return &v }
