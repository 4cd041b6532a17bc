// Package claim binds claims to composite resources (XRs) and keeps the two
// in sync, as Crossplane v1's claim controller does, so that many binder
// replicas can race on the same claims without ever leaking an XR.
//
// Binding follows name-then-create: the XR's name is generated locally and
// recorded in the claim's spec.resourceRef, together with the claim's
// finalizer, by an update that carries the claim's resourceVersion; only then
// is the XR created with that name. A replica that loses the race on the
// update re-reads the claim and carries on with the winner's name, and a
// crash between the two steps leaves a name that the next reconcile creates.
//
// The XR is created with a plain create, never a server-side apply: under the
// shared field manager an apply would let a second claim that generated the
// same name take the XR over. AlreadyExists is fine only when the existing
// XR's claimRef names this claim; when it names another claim and the name was
// generated for this one (two claims raced for one name), the claim gets a
// new name, again by an update with the resourceVersion precondition.
//
// Writes: the claim's resourceRef, finalizer, back-propagated spec fields and
// external name are written by optimistic updates (they need the
// resourceVersion precondition); later changes to the XR and the claim's
// status are written by server-side apply as field manager loom-binder.
// Conflicts are requeues (reconcile.Result.Requeue), not errors. Nothing is written when the
// computed intent already holds, and a claim's first status waits for its
// XR's first status. Binding a claim costs two writes (the claim's update
// and the XR's creation); propagation costs one write per change that
// reaches the other side.
package claim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/apply"
	"github.com/loomxr/loom/pkg/condition"
	"github.com/loomxr/loom/pkg/event"
	kitkube "github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/reconcile"
	"github.com/loomxr/loom/pkg/telemetry"
)

// Event reasons, as Crossplane's claim controller uses them.
const (
	ReasonBind    = "BindCompositeResource"
	ReasonDelete  = "DeleteCompositeResource"
	ReasonRelease = "ReleaseCompositeResource"
	ReasonPaused  = "ReconcilePaused"
)

// Condition types and reasons the binder adds.
const (
	// TypeBound is set on a composite resource that was released by its
	// claim (status False, reason Released) and, once rebound, True.
	TypeBound common.ConditionType = "Bound"

	ReasonWaiting  common.ConditionReason = "Waiting"
	ReasonReleased common.ConditionReason = "Released"
	ReasonBound    common.ConditionReason = "Bound"
)

// errDeleting means the claim turned out to be being deleted.
var errDeleting = errors.New("claim is being deleted")

// errNameTaken means the claim's resourceRef names a composite resource that
// is bound to another claim.
var errNameTaken = errors.New("composite resource name taken")

// Attempts at writing the generated name before giving up for this request.
const maxBindAttempts = 5

// A Client reads and writes claims and composite resources.
type Client interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	Create(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
	Update(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
	Apply(ctx context.Context, intent *unstructured.Unstructured, force bool) (*unstructured.Unstructured, error)
	ApplyStatus(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error)
	MergePatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch map[string]any) (*unstructured.Unstructured, error)
	JSONPatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch []byte) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, uid types.UID, propagation *metav1.DeletionPropagation) error
}

// Definitions finds the XRD that offers a kind of claim.
type Definitions interface {
	// ForClaim returns the XRD offering claims of kind gk, or nil.
	ForClaim(ctx context.Context, gk schema.GroupKind) (*xv1.CompositeResourceDefinition, error)
}

// An Option configures a Reconciler.
type Option func(*Reconciler)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(r *Reconciler) { r.log = l } }

// WithRecorder sets the event recorder (default: event.Nop).
func WithRecorder(rec event.Recorder) Option { return func(r *Reconciler) { r.record = rec } }

// WithNameGenerator sets how XR names are generated (default: RandomNames).
func WithNameGenerator(g NameGenerator) Option { return func(r *Reconciler) { r.names = g } }

// WithClock sets the clock of condition transition times (default: time.Now).
func WithClock(now func() time.Time) Option { return func(r *Reconciler) { r.now = now } }

// WithCompositions makes a claim's first binding name the Composition and
// revision its XR will use (see Compositions). Without it they flow back
// from the XR once the renderer has chosen them.
func WithCompositions(c *Compositions) Option { return func(r *Reconciler) { r.compositions = c } }

// WithForegroundPoll sets how long to wait before looking again at an XR
// being deleted in the foreground, in case its deletion event is lost
// (default 15s).
func WithForegroundPoll(d time.Duration) Option { return func(r *Reconciler) { r.foregroundPoll = d } }

// DefaultFirstStatusWait is how long, by default, a claim's first status
// waits for its composite resource to be Ready (see WithFirstStatusWait).
const DefaultFirstStatusWait = 5 * time.Second

// WithFirstStatusWait sets how long after its XR's creation a claim's first
// status may wait for the XR to be Ready (default DefaultFirstStatusWait;
// zero or negative: not at all). Until then a claim whose XR is not Ready
// gets no status and is handled again at the end of the wait: when the XR
// turns Ready first, as it does within seconds for quick resources, the
// claim's status is written once, Ready, instead of "Waiting" and then
// again "Ready". A claim that has a status already is never held back, so
// that a Ready claim whose XR stops being Ready says so at once.
func WithFirstStatusWait(d time.Duration) Option {
	return func(r *Reconciler) { r.firstStatusWait = d }
}

// WithConfirmedWaits makes a claim's first status, when it would say that
// the claim waits for its XR, read the XR again from the API server
// (kube.Latest) first, when reads may lag the API server (the object
// mirror): the XR may have turned Ready a moment ago, and the claim then
// gets its status once. Without it (the default, right when every read is
// a GET) the status is written as read.
func WithConfirmedWaits() Option { return func(r *Reconciler) { r.confirmWaits = true } }

// A Reconciler binds one claim at a time to its composite resource. It is
// safe for concurrent use on different claims; the bus guarantees that one
// claim is never reconciled by two replicas at once, and the protocol stays
// correct (if wasteful) even when that guarantee briefly fails.
type Reconciler struct {
	client          Client
	defs            Definitions
	log             *slog.Logger
	record          event.Recorder
	names           NameGenerator
	now             func() time.Time
	foregroundPoll  time.Duration
	firstStatusWait time.Duration
	confirmWaits    bool
	compositions    *Compositions
}

// NewReconciler returns a Reconciler that reads and writes through c and
// finds XRDs through d.
func NewReconciler(c Client, d Definitions, o ...Option) *Reconciler {
	r := &Reconciler{
		client:          c,
		defs:            d,
		log:             slog.New(slog.DiscardHandler),
		record:          event.Nop,
		names:           NewRandomNames(nil),
		now:             time.Now,
		foregroundPoll:  15 * time.Second,
		firstStatusWait: DefaultFirstStatusWait,
	}
	for _, fn := range o {
		fn(r)
	}
	return r
}

// Reconcile re-reads the claim of kind gvk named namespace/name and brings it
// and its composite resource in line: bind (name-then-create or static),
// propagate claim to XR and XR to claim, or, for a deleted claim, delete or
// release the XR and drop the finalizer. It is idempotent and writes nothing
// when nothing changed. A returned error means "retry later" with backoff; a
// lost optimistic-concurrency race returns Result.Requeue; failures the user
// must fix are reported on the claim's conditions and return nil.
func (r *Reconciler) Reconcile(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (reconcile.Result, error) {
	log := r.log.With("claim", namespace+"/"+name, "kind", gvk.Kind)
	d, err := r.defs.ForClaim(ctx, gvk.GroupKind())
	if err != nil {
		return reconcile.Result{}, err
	}
	if d == nil {
		log.Debug("No XRD offers this kind of claim; ignoring it")
		return reconcile.Result{}, nil
	}
	// Every write that follows a read of the claim or its XR is guarded
	// (resourceVersion preconditions, create-and-AlreadyExists, server-side
	// apply, a UID precondition on delete): they may come from the read
	// path at any version it holds.
	cm, err := r.client.Get(kitkube.Guarded(ctx), d.GetClaimGroupVersionKind(), namespace, name)
	if kerrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cannot get claim %s/%s: %w", namespace, name, err)
	}

	if cm.GetAnnotations()[AnnotationPaused] == "true" {
		msg := "Reconciliation is paused via the pause annotation"
		changed, err := r.setStatus(ctx, cm, cm, common.ReconcilePaused().WithMessage(msg), currentReady(cm))
		if changed {
			r.record.Event(cm, event.TypeNormal, ReasonPaused, msg)
		}
		return reconcile.Result{}, err
	}

	if cm.GetDeletionTimestamp() != nil {
		return r.finalize(ctx, log, cm, d)
	}

	cm, generated, err := r.bind(ctx, cm, d)
	if errors.Is(err, errDeleting) {
		return r.finalize(ctx, log, cm, d)
	}
	if err != nil {
		return r.fail(ctx, cm, nil, err)
	}
	ref := ResourceRef(cm)
	xrGVK := d.GetCompositeGroupVersionKind()

	// An XR named a moment ago is created without a read first: no XR of
	// that name is known (the read path could only ask the API server), and
	// the create's AlreadyExists says if one exists after all.
	var xr *unstructured.Unstructured
	if !generated {
		xr, err = r.client.Get(kitkube.Guarded(ctx), xrGVK, "", ref.Name)
		if kerrors.IsNotFound(err) {
			xr, err = nil, nil
		}
		if err != nil {
			return r.fail(ctx, cm, nil, fmt.Errorf("cannot get composite resource %q: %w", ref.Name, err))
		}
	}

	if xr != nil {
		if other := ClaimRef(xr); other != nil && !BoundTo(xr, cm) {
			return r.taken(ctx, log, cm, xr)
		}
		if xr.GetDeletionTimestamp() != nil {
			// The XR's deletion (or disappearance) brings us back, and we
			// create it again once it is gone.
			err := fmt.Errorf("composite resource %q is being deleted from under this claim", xr.GetName())
			return r.refuse(ctx, cm, err)
		}
	}

	xr, err = r.syncComposite(ctx, log, cm, xr, d)
	var taken *takenError
	switch {
	case errors.As(err, &taken):
		return r.taken(ctx, log, cm, taken.xr)
	case kerrors.IsConflict(err):
		// The XR changed since we read it: read it again.
		log.Debug("Conflict writing the composite resource; requeueing", "error", err)
		return reconcile.Result{Requeue: true}, nil
	case kerrors.IsInvalid(err) || kerrors.IsBadRequest(err):
		// The claim's spec does not fit the XR's schema: only a change of
		// the claim can fix that, and it brings us back.
		return r.refuse(ctx, cm, err)
	case err != nil:
		return r.fail(ctx, cm, nil, err)
	}

	cm, err = r.backPropagate(ctx, cm, xr, d)
	if kerrors.IsConflict(err) {
		log.Debug("Conflict propagating to the claim; requeueing", "error", err)
		return reconcile.Result{Requeue: true}, nil
	}
	if err != nil {
		return r.fail(ctx, cm, xr, fmt.Errorf("cannot propagate spec.compositionRef, spec.compositionRevisionRef or the external name from composite resource %q to the claim: %w", xr.GetName(), err))
	}

	if _, ok := xr.Object["status"]; !ok && len(condition.Observed(cm)) == 0 {
		// A new XR has no status yet. The claim's first status would only
		// say "waiting", and the XR's first status (which brings us back,
		// typically within milliseconds) would change it at once: wait for
		// it and save a write per claim.
		return reconcile.Result{}, nil
	}
	if wait := r.firstStatusWait - r.now().Sub(xr.GetCreationTimestamp().Time); wait > 0 &&
		len(condition.Observed(cm)) == 0 && !condition.IsTrue(xr, common.TypeReady) {
		// The claim's first status would say "waiting" for an XR that is
		// typically Ready moments later: wait for that (its event brings
		// us back), and write "waiting" only if it does not come in time.
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if !condition.IsTrue(cm, common.TypeReady) && condition.IsTrue(xr, common.TypeReady) && awaitsSecret(cm, xr) {
		// A claim that asks for a connection Secret turns Ready together
		// with the publication of its XR's Secret, which typically follows
		// the XR's Ready moments later (the secrets service copies it to
		// the claim then): one write of the claim's status, with its
		// lastPublishedTime, and Ready means the Secret is there. The
		// publication's event brings us back; if it does not come within
		// the first-status wait, the claim turns Ready without it.
		if wait := min(r.firstStatusWait, r.firstStatusWait-r.now().Sub(readySince(xr))); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	if !condition.IsTrue(xr, common.TypeReady) && !condition.IsTrue(cm, common.TypeReady) && reconcile.Superseded(ctx) {
		// The claim would say "waiting" (again, or for the first time),
		// and a newer event for it has come (its XR's progress, say): the
		// run it brings, right after this one, writes the status from
		// newer news. Under load this folds a claim's progress into
		// fewer writes.
		log.Debug("Leaving the claim's status to the reconcile of a newer event")
		return reconcile.Result{}, nil
	}
	if r.confirmWaits && len(condition.Observed(cm)) == 0 && !condition.IsTrue(xr, common.TypeReady) {
		// The wait is over, or the XR's status is new: the XR may be
		// Ready by now although the read path does not know yet.
		latest, err := r.client.Get(kitkube.Latest(ctx), xrGVK, "", ref.Name)
		if err != nil {
			return r.fail(ctx, cm, nil, fmt.Errorf("cannot get composite resource %q: %w", ref.Name, err))
		}
		xr = latest
	}

	conds := []common.Condition{common.ReconcileSuccess()}
	if condition.IsTrue(xr, common.TypeReady) {
		conds = append(conds, common.Available())
	} else {
		conds = append(conds, waiting())
	}
	xrConds := condition.Observed(xr)
	types, _, _ := unstructured.NestedStringSlice(xr.Object, "status", "claimConditionTypes")
	for _, t := range types {
		ct := common.ConditionType(t)
		if ct == common.TypeReady || ct == common.TypeSynced {
			continue
		}
		if c, ok := condition.Find(xrConds, ct); ok {
			conds = append(conds, c)
		}
	}
	_, err = r.setStatus(ctx, cm, xr, conds...)
	if kerrors.IsConflict(err) {
		// The claim changed while its status was being copied: a requeue
		// reads it again, without counting as a failed delivery.
		log.Debug("Conflict copying the composite resource's status to the claim; requeueing", "error", err)
		return reconcile.Result{Requeue: true}, nil
	}
	if kerrors.IsInvalid(err) || kerrors.IsBadRequest(err) {
		// The XR's status holds something the claim's schema refuses. Say
		// so on the claim; the XR's next change brings us back.
		return r.refuse(ctx, cm, fmt.Errorf("cannot copy the status of composite resource %q to the claim: %w", xr.GetName(), err))
	}
	return reconcile.Result{}, err
}

// bind makes sure cm names its XR and carries the finalizer: it generates a
// name if there is none, and records it with an update that fails if cm is
// stale. On conflict it re-reads cm and starts again; the winner's name then
// stands. generated reports that the name cm now holds is one this call
// generated and recorded.
func (r *Reconciler) bind(ctx context.Context, cm *unstructured.Unstructured, d *xv1.CompositeResourceDefinition) (_ *unstructured.Unstructured, generated bool, _ error) {
	for range maxBindAttempts {
		name := ""
		if ResourceRef(cm) == nil {
			name = r.generateName(cm)
		}
		want, changed := Bind(cm, d, name)
		if !changed {
			return cm, false, nil
		}
		if name != "" && r.compositions != nil {
			// A first binding names the Composition and revision too:
			// they would otherwise flow back from the XR in an update of
			// their own.
			for f, v := range r.compositions.Choose(ctx, cm, d) {
				_ = unstructured.SetNestedField(want.Object, v, "spec", f)
			}
		}
		got, err := r.client.Update(ctx, want)
		if err == nil {
			return got, name != "", nil
		}
		if !kerrors.IsConflict(err) {
			return cm, false, fmt.Errorf("cannot record composite resource name %q in the claim's spec.resourceRef: %w", ResourceRef(want).Name, err)
		}
		// Another writer (perhaps another binder) changed the claim first.
		fresh, gerr := r.client.Get(ctx, cm.GroupVersionKind(), cm.GetNamespace(), cm.GetName())
		if gerr != nil {
			return cm, false, fmt.Errorf("cannot get claim after a conflicting update: %w", gerr)
		}
		cm = fresh
		if cm.GetDeletionTimestamp() != nil {
			return cm, false, errDeleting
		}
	}
	return cm, false, fmt.Errorf("cannot record a composite resource name in the claim's spec.resourceRef: the claim kept changing (%d conflicts)", maxBindAttempts)
}

// backPropagate writes to cm what flows back from its XR (BackPropagate)
// and returns cm as it is afterwards. A conflict (typically the secrets
// service's status write, made as the XR turned Ready) reads cm again and
// tries again at once, up to maxBindAttempts times: a requeue would leave a
// claim whose XR is Ready waiting the bus's shortest retry delay. It gives
// up with the conflict when the claim is being deleted or names another XR
// now, for the caller's requeue to start over.
func (r *Reconciler) backPropagate(ctx context.Context, cm, xr *unstructured.Unstructured, d *xv1.CompositeResourceDefinition) (*unstructured.Unstructured, error) {
	for range maxBindAttempts {
		want, changed := BackPropagate(cm, xr, d)
		if !changed {
			return cm, nil
		}
		got, err := r.client.Update(ctx, want)
		if !kerrors.IsConflict(err) {
			if err != nil {
				return cm, err
			}
			return got, nil
		}
		fresh, gerr := r.client.Get(ctx, cm.GroupVersionKind(), cm.GetNamespace(), cm.GetName())
		if gerr != nil {
			return cm, fmt.Errorf("cannot get claim after a conflicting update: %w", gerr)
		}
		now, was := ResourceRef(fresh), ResourceRef(cm)
		if fresh.GetDeletionTimestamp() != nil || now == nil || was == nil || !now.refersTo(*was) {
			return cm, err
		}
		cm = fresh
	}
	return cm, fmt.Errorf("the claim kept changing (%d conflicts)", maxBindAttempts)
}

// generateName returns a new name "<claim>-xxxxx" for the claim's XR. Like
// the API server's metadata.generateName it does not ask whether the name is
// free: that would cost a read per claim (a name never seen is unknown to
// the object mirror, so only a GET could tell) to avoid a collision that
// five random characters make about one in fourteen million. The XR's
// create tells instead: AlreadyExists from another claim's XR makes the
// claim pick a new name (see taken).
func (r *Reconciler) generateName(cm *unstructured.Unstructured) string {
	return r.names.GenerateName(cm.GetName() + "-")
}

// syncComposite creates, binds or updates the XR so that it holds the
// claim's intent, and returns the XR as it is afterwards.
func (r *Reconciler) syncComposite(ctx context.Context, log *slog.Logger, cm, xr *unstructured.Unstructured, d *xv1.CompositeResourceDefinition) (*unstructured.Unstructured, error) {
	intent := CompositeIntent(cm, xr, d)
	name := intent.GetName()
	switch {
	case xr == nil:
		if len(condition.Observed(cm)) > 0 {
			// The claim has been reconciled before, so its XR existed.
			r.record.Event(cm, event.TypeWarning, ReasonBind, fmt.Sprintf("Composite resource %q was deleted from under the claim; creating it again", name))
		}
		// A plain create, not a server-side apply: an apply under the
		// shared field manager would take over an XR that another claim
		// created with the same name a moment ago.
		got, err := r.client.Create(ctx, intent)
		if err == nil {
			log.Debug("Created composite resource", "composite", name)
			return got, nil
		}
		if !kerrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("cannot create composite resource %q: %w", name, err)
		}
		// Someone created an XR of this name since we looked. It is fine
		// if it is this claim's (another replica of the binder won).
		existing, gerr := r.client.Get(ctx, intent.GroupVersionKind(), "", name)
		if gerr != nil {
			return nil, fmt.Errorf("cannot get composite resource %q that was created concurrently: %w", name, gerr)
		}
		if !BoundTo(existing, cm) {
			return nil, &takenError{xr: existing}
		}
		xr = existing
		intent = CompositeIntent(cm, xr, d)

	case ClaimRef(xr) == nil:
		// Static binding to an unclaimed XR: the resourceVersion makes the
		// apply fail if another claim bound it since we read it.
		intent.SetResourceVersion(xr.GetResourceVersion())
		got, err := r.client.Apply(ctx, intent, true)
		if err != nil {
			return nil, fmt.Errorf("cannot bind composite resource %q: %w", name, err)
		}
		r.record.Event(cm, event.TypeNormal, ReasonBind, fmt.Sprintf("Bound composite resource %q", name))
		if c, ok := condition.Find(condition.Observed(got), TypeBound); ok && c.Status != corev1.ConditionTrue {
			bound := common.Condition{Type: TypeBound, Status: corev1.ConditionTrue, Reason: ReasonBound,
				Message: fmt.Sprintf("Bound to claim %q", cm.GetNamespace()+"/"+cm.GetName())}
			if err := r.setCompositeConditions(ctx, got, bound); err != nil {
				return nil, err
			}
		}
		return got, nil
	}

	// Compare with xr as adopt leaves it: the fields the binder set when it
	// created xr count as applied, so a field the claim no longer sets is a
	// change even before the binder's first apply (as in a claim whose only
	// update removes a field).
	adopted := xr.DeepCopy()
	if err := csaupgrade.UpgradeManagedFields(adopted, sets.New(FieldManager), FieldManager); err != nil {
		return nil, fmt.Errorf("cannot compute the field ownership of composite resource %q: %w", xr.GetName(), err)
	}
	changed, err := apply.Changes(adopted, intent, FieldManager, "")
	if err != nil {
		return nil, err
	}
	if !changed {
		return xr, nil
	}
	if err := r.adopt(ctx, xr); err != nil {
		return nil, err
	}
	got, err := r.client.Apply(ctx, intent, true)
	if err != nil {
		return nil, fmt.Errorf("cannot apply the claim's spec, labels and annotations to composite resource %q: %w", name, err)
	}
	return got, nil
}

// adopt turns the fields the binder set when it created xr (an update, as
// far as field ownership goes) into fields it applied, so that a field the
// claim no longer sets is removed from xr by the next apply. It writes only
// once per XR, before its first apply, and only applies to the version of
// xr that was read (a stale xr fails with a conflict).
func (r *Reconciler) adopt(ctx context.Context, xr *unstructured.Unstructured) error {
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(xr, sets.New(FieldManager), FieldManager)
	if err != nil {
		return fmt.Errorf("cannot compute the field ownership of composite resource %q: %w", xr.GetName(), err)
	}
	if patch == nil {
		return nil
	}
	if _, err := r.client.JSONPatch(ctx, xr.GroupVersionKind(), "", xr.GetName(), patch); err != nil {
		return fmt.Errorf("cannot take ownership of the fields of composite resource %q: %w", xr.GetName(), err)
	}
	return nil
}

// A takenError says that the XR named by the claim's resourceRef is bound to
// another claim.
type takenError struct{ xr *unstructured.Unstructured }

func (e *takenError) Error() string {
	return fmt.Sprintf("composite resource %q is bound to claim %q", e.xr.GetName(), ClaimRef(e.xr).String())
}

func (e *takenError) Unwrap() error { return errNameTaken }

// taken handles a claim whose resourceRef names xr, an XR bound to another
// claim. If the binder generated that name for this claim and the claim was
// never bound (two claims generated the same name, and the other created
// its XR first), the claim gets a new name, recorded with the claim's
// resourceVersion as a precondition, and is requeued. Otherwise only a human
// can fix it (by changing the claim's resourceRef, which brings us back):
// the claim's Synced condition says so, and nothing is retried. Either way
// xr stays with its claim.
func (r *Reconciler) taken(ctx context.Context, log *slog.Logger, cm *unstructured.Unstructured, xr *unstructured.Unstructured) (reconcile.Result, error) {
	cause := fmt.Errorf("refusing to bind to composite resource %q: bound to claim %q", xr.GetName(), ClaimRef(xr).String())
	if !Generated(cm.GetName(), xr.GetName()) || condition.IsTrue(cm, common.TypeSynced) {
		return r.refuse(ctx, cm, cause)
	}
	name := r.generateName(cm)
	want := cm.DeepCopy()
	if err := unstructured.SetNestedField(want.Object, name, "spec", "resourceRef", "name"); err != nil {
		return r.fail(ctx, cm, nil, fmt.Errorf("cannot set the claim's spec.resourceRef.name: %w", err))
	}
	if _, err := r.client.Update(ctx, want); err != nil {
		if kerrors.IsConflict(err) {
			// The claim changed since we read it: read it again.
			return reconcile.Result{Requeue: true}, nil
		}
		return r.fail(ctx, cm, nil, fmt.Errorf("cannot record composite resource name %q in the claim's spec.resourceRef: %w", name, err))
	}
	log.Debug("Generated composite resource name was taken by another claim; picked a new one", "taken", xr.GetName(), "composite", name)
	// The binder's own change to the claim brings no event back: requeue.
	return reconcile.Result{Requeue: true}, nil
}

// finalize deletes or releases the XR of a claim being deleted, then drops
// the claim's finalizer.
func (r *Reconciler) finalize(ctx context.Context, log *slog.Logger, cm *unstructured.Unstructured, d *xv1.CompositeResourceDefinition) (reconcile.Result, error) {
	if !hasFinalizer(cm) {
		return reconcile.Result{}, nil
	}
	var xr *unstructured.Unstructured
	if ref := ResourceRef(cm); ref != nil {
		got, err := r.client.Get(kitkube.Guarded(ctx), d.GetCompositeGroupVersionKind(), "", ref.Name)
		switch {
		case kerrors.IsNotFound(err):
		case err != nil:
			return r.fail(ctx, cm, nil, fmt.Errorf("cannot get composite resource %q: %w", ref.Name, err))
		default:
			xr = got
		}
	}

	// An XR bound to another claim, or to none, is not ours to delete.
	if xr != nil && BoundTo(xr, cm) {
		if ReclaimPolicy(cm, xr) == ReclaimRetain {
			if err := r.release(ctx, cm, xr); err != nil {
				if kerrors.IsConflict(err) {
					// The XR changed since we read it: read it again.
					return reconcile.Result{Requeue: true}, nil
				}
				return r.fail(ctx, cm, xr, err)
			}
			r.record.Event(cm, event.TypeNormal, ReasonRelease, fmt.Sprintf("Released composite resource %q (reclaimPolicy Retain)", xr.GetName()))
		} else {
			foreground := DeletePolicy(cm, d) == xv1.CompositeDeleteForeground
			if xr.GetDeletionTimestamp() == nil {
				p := metav1.DeletePropagationBackground
				if foreground {
					p = metav1.DeletePropagationForeground
				}
				if err := r.client.Delete(ctx, xr.GroupVersionKind(), "", xr.GetName(), xr.GetUID(), &p); err != nil {
					if kerrors.IsConflict(err) {
						// Another XR of that name replaced the one we read.
						return reconcile.Result{Requeue: true}, nil
					}
					return r.fail(ctx, cm, xr, fmt.Errorf("cannot delete composite resource %q: %w", xr.GetName(), err))
				}
				r.record.Event(cm, event.TypeNormal, ReasonDelete, fmt.Sprintf("Deleting composite resource %q (compositeDeletePolicy %s)", xr.GetName(), DeletePolicy(cm, d)))
			}
			if foreground {
				// The XR's deletion brings us back; the poll is a safety net.
				log.Debug("Waiting for the composite resource to be deleted in the foreground", "composite", xr.GetName())
				_, err := r.setStatus(ctx, cm, cm, common.ReconcileSuccess(), deleting(xr.GetName()))
				return reconcile.Result{RequeueAfter: r.foregroundPoll}, err
			}
		}
	}

	if _, err := r.client.Update(ctx, withoutFinalizer(cm)); err != nil {
		if kerrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		if kerrors.IsConflict(err) {
			// The claim changed since we read it: read it again.
			return reconcile.Result{Requeue: true}, nil
		}
		return r.fail(ctx, cm, xr, fmt.Errorf("cannot remove finalizer %q from the claim: %w", Finalizer, err))
	}
	log.Debug("Finalized claim")
	return reconcile.Result{}, nil
}

// release unbinds xr from cm: it clears xr's claimRef and claim labels
// (whoever set them) with a patch that applies only to the version of xr we
// read, and marks xr released on its conditions.
func (r *Reconciler) release(ctx context.Context, cm, xr *unstructured.Unstructured) error {
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": xr.GetResourceVersion(),
			"labels":          map[string]any{LabelClaimName: nil, LabelClaimNamespace: nil},
		},
		"spec": map[string]any{"claimRef": nil},
	}
	got, err := r.client.MergePatch(ctx, xr.GroupVersionKind(), "", xr.GetName(), patch)
	if err != nil {
		return fmt.Errorf("cannot release composite resource %q (clear spec.claimRef): %w", xr.GetName(), err)
	}
	released := common.Condition{
		Type:    TypeBound,
		Status:  corev1.ConditionFalse,
		Reason:  ReasonReleased,
		Message: fmt.Sprintf("Released by claim %q, deleted with reclaimPolicy Retain; a new claim may bind this composite resource", cm.GetNamespace()+"/"+cm.GetName()),
	}
	return r.setCompositeConditions(ctx, got, released)
}

// setCompositeConditions applies conds to xr's status, carrying the other
// conditions the binder owns there.
func (r *Reconciler) setCompositeConditions(ctx context.Context, xr *unstructured.Unstructured, conds ...common.Condition) error {
	in := &unstructured.Unstructured{Object: map[string]any{}}
	in.SetGroupVersionKind(xr.GroupVersionKind())
	in.SetName(xr.GetName())
	in.Object["status"] = map[string]any{"conditions": condition.Intent(xr, FieldManager, metav1.NewTime(r.now()), conds...)}
	changed, err := apply.Changes(xr, in, FieldManager, "status")
	if err != nil || !changed {
		return err
	}
	if _, err := r.client.ApplyStatus(ctx, in); err != nil {
		return fmt.Errorf("cannot set condition %s of composite resource %q: %w", conds[0].Type, xr.GetName(), err)
	}
	return nil
}

// fail reports err on the claim's Synced condition (keeping its Ready
// condition), records a warning event if that changed the claim, and asks
// for a retry.
func (r *Reconciler) fail(ctx context.Context, cm, xr *unstructured.Unstructured, err error) (reconcile.Result, error) {
	src := xr
	if src == nil {
		src = cm
	}
	changed, serr := r.setStatus(ctx, cm, src, common.ReconcileError(err), currentReady(cm))
	if changed {
		r.record.Event(cm, event.TypeWarning, ReasonBind, err.Error())
	}
	return reconcile.Result{}, errors.Join(err, serr)
}

// refuse reports err like fail but asks for no retry: the claim or its XR
// must change first, and that change brings us back.
func (r *Reconciler) refuse(ctx context.Context, cm *unstructured.Unstructured, err error) (reconcile.Result, error) {
	changed, serr := r.setStatus(ctx, cm, cm, common.ReconcileError(err), currentReady(cm))
	if changed {
		r.record.Event(cm, event.TypeWarning, ReasonBind, err.Error())
	}
	return reconcile.Result{}, serr
}

// setStatus applies the claim's status: fields mirrored from src and conds,
// without an observed generation, as Crossplane v1.20 writes them. It
// reports whether it wrote.
func (r *Reconciler) setStatus(ctx context.Context, cm, src *unstructured.Unstructured, conds ...common.Condition) (bool, error) {
	existing := condition.Observed(cm)
	conds = condition.Settle(existing, metav1.NewTime(r.now()), conds...)
	in := StatusIntent(cm, src, condition.List(conds...))
	changed, err := apply.Changes(cm, in, FieldManager, "status")
	if err != nil || !changed {
		return false, err
	}
	if _, err := r.client.ApplyStatus(ctx, in); err != nil {
		if kerrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("cannot apply status of claim %s/%s: %w", cm.GetNamespace(), cm.GetName(), err)
	}
	if after, ok := condition.Find(conds, common.TypeReady); ok && after.Status == corev1.ConditionTrue {
		if before, _ := condition.Find(existing, common.TypeReady); before.Status != corev1.ConditionTrue {
			telemetry.ObserveClaimReady(ctx, cm.GetKind(), cm.GetCreationTimestamp().Time)
		}
	}
	return true, nil
}

// awaitsSecret reports whether cm asks for a connection Secret whose XR's
// Secret has not been published yet (status.connectionDetails.lastPublishedTime).
func awaitsSecret(cm, xr *unstructured.Unstructured) bool {
	return asksForSecret(cm) &&
		nestedString(xr, "status", "connectionDetails", "lastPublishedTime") == ""
}

// readySince returns when xr's Ready condition last changed, or its
// creation time if that is not known.
func readySince(xr *unstructured.Unstructured) time.Time {
	if c, ok := condition.Find(condition.Observed(xr), common.TypeReady); ok && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	return xr.GetCreationTimestamp().Time
}

// currentReady returns the claim's Ready condition, or Waiting if it has
// none, so that a failure elsewhere leaves what Ready says alone.
func currentReady(cm *unstructured.Unstructured) common.Condition {
	if c, ok := condition.Find(condition.Observed(cm), common.TypeReady); ok {
		return c
	}
	return waiting()
}

// waiting is Crossplane's claim condition while the XR is not Ready.
func waiting() common.Condition {
	return common.Condition{
		Type:    common.TypeReady,
		Status:  corev1.ConditionFalse,
		Reason:  ReasonWaiting,
		Message: "Claim is waiting for composite resource to become Ready",
	}
}

func deleting(xr string) common.Condition {
	return common.Deleting().WithMessage(fmt.Sprintf("Waiting for composite resource %q to be deleted (compositeDeletePolicy Foreground)", xr))
}
