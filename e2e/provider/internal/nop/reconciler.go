package nop

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// AnnotationPaused pauses reconciliation when set to "true", as in Crossplane.
const AnnotationPaused = "crossplane.io/paused"

// A Reconciler reconciles one NopResource per call. It is idempotent: a
// reconcile that finds nothing to change makes no API call at all (the
// NopResource comes from the informer cache and the Publisher remembers its
// Secrets). A change costs one status patch, plus one Secret write when the
// connection details changed.
type Reconciler struct {
	client    client.Client
	publisher *Publisher
	recorder  events.EventRecorder
	now       func() time.Time
}

// An Option configures a Reconciler.
type Option func(*Reconciler)

// WithRecorder sets the recorder of warning events. Events are emitted only
// when a reconcile fails; by default none are emitted.
func WithRecorder(e events.EventRecorder) Option { return func(r *Reconciler) { r.recorder = e } }

// NewReconciler returns a Reconciler that reads NopResources through c,
// patches their status through c and publishes Secrets through p.
func NewReconciler(c client.Client, p *Publisher, opts ...Option) *Reconciler {
	r := &Reconciler{client: c, publisher: p, now: time.Now}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Options configure Setup.
type Options struct {
	// MaxConcurrentReconciles is how many NopResources are reconciled at
	// once.
	MaxConcurrentReconciles int

	// MaxReconcileRate caps reconciles per second across all NopResources;
	// zero or less means no cap.
	MaxReconcileRate float64
}

// Setup registers a NopResource controller with mgr. The manager's client
// must not cache Secrets (see NewPublisher). Reconciles are triggered by
// creation, spec (generation) and annotation changes, and by the condition
// timers themselves; the provider's own status writes trigger nothing.
func Setup(mgr ctrl.Manager, o Options) error {
	var r reconcile.Reconciler = NewReconciler(mgr.GetClient(), NewPublisher(mgr.GetClient()),
		WithRecorder(mgr.GetEventRecorder("provider-nop")))
	if o.MaxReconcileRate > 0 {
		r = rateLimited(r, rate.NewLimiter(rate.Limit(o.MaxReconcileRate), max(1, int(o.MaxReconcileRate))))
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("nopresource").
		For(&NopResource{}, builder.WithPredicates(reconcileTriggers())).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: o.MaxConcurrentReconciles,
			// Failures (a Secret namespace that does not exist yet, say)
			// are retried with backoff capped at 30s, and without
			// controller-runtime's overall 10 per second bucket, which
			// would throttle a burst of failing NopResources.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, 30*time.Second),
		}).
		Complete(r)
}

// rateLimited makes every reconcile wait for a token of l first.
func rateLimited(r reconcile.Reconciler, l *rate.Limiter) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if err := l.Wait(ctx); err != nil {
			return reconcile.Result{}, fmt.Errorf("cannot wait for the reconcile rate limiter: %w", err)
		}
		return r.Reconcile(ctx, req)
	})
}

// Reconcile brings one NopResource's status and connection Secret up to
// date, and asks to be called again exactly when its next scheduled
// condition falls due.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nr := &NopResource{}
	if err := r.client.Get(ctx, req.NamespacedName, nr); err != nil {
		if kerrors.IsNotFound(err) {
			r.publisher.Forget(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("cannot get NopResource: %w", err)
	}
	if nr.GetDeletionTimestamp() != nil {
		// The provider adds no finalizer; its Secret goes with the
		// NopResource through the garbage collector.
		return reconcile.Result{}, nil
	}

	now := r.now()
	gen := nr.GetGeneration()
	want := nr.DeepCopy()

	if nr.GetAnnotations()[AnnotationPaused] == "true" {
		want.Status.Conditions = SetCondition(want.Status.Conditions, Condition{
			Type: TypeSynced, Status: string(corev1.ConditionFalse), Reason: ReasonReconcilePaused,
			Message: "Reconciliation is paused via the pause annotation", ObservedGeneration: gen,
		}, metav1.NewTime(now))
		return reconcile.Result{}, r.patchStatus(ctx, nr, want)
	}

	next, pending, err := Observe(want, now)
	if err != nil {
		// Only a spec change can fix this: report it and do not retry.
		r.warn(nr, "CannotParseSchedule", err)
		want.Status.Conditions = SetCondition(want.Status.Conditions, synced(err, gen), metav1.NewTime(now))
		return reconcile.Result{}, r.patchStatus(ctx, nr, want)
	}

	// Publish before reporting conditions, so that whoever sees Ready also
	// finds the Secret.
	// A failure is logged by controller-runtime, which retries it.
	pubErr := r.publisher.Publish(ctx, nr)
	if pubErr != nil {
		r.warn(nr, "CannotPublishConnectionDetails", pubErr)
	}
	want.Status.Conditions = SetCondition(want.Status.Conditions, synced(pubErr, gen), metav1.NewTime(now))

	if err := r.patchStatus(ctx, nr, want); err != nil {
		return reconcile.Result{}, err
	}
	if pubErr != nil {
		return reconcile.Result{}, pubErr
	}
	if pending {
		return reconcile.Result{RequeueAfter: next}, nil
	}
	return reconcile.Result{}, nil
}

// Observe sets what nr's pretend external resource reports at now into
// nr.Status: atProvider.fields mirrors spec.forProvider.fields, and every
// condition of spec.forProvider.conditionAfter that is due, stamped with
// nr's generation. It returns how long after now the next scheduled
// condition falls due (pending false when none remains). It fails, leaving
// the conditions alone, when the schedule does not parse. Observe makes no
// API call; the Synced condition is the caller's.
func Observe(nr *NopResource, now time.Time) (next time.Duration, pending bool, err error) {
	nr.Status.AtProvider.Fields = cloneSlice(nr.Spec.ForProvider.Fields)
	s, err := ParseSchedule(nr.Spec.ForProvider.ConditionAfter)
	if err != nil {
		return 0, false, err
	}
	due, next, pending := s.Due(now.Sub(nr.GetCreationTimestamp().Time))
	stamp := metav1.NewTime(now)
	for _, c := range due {
		c.ObservedGeneration = nr.GetGeneration()
		nr.Status.Conditions = SetCondition(nr.Status.Conditions, c, stamp)
	}
	return next, pending, nil
}

// patchStatus writes the difference between got's and want's status as one
// JSON merge patch of the status subresource, and nothing when there is none.
// The patch carries no resourceVersion: only the provider writes a
// NopResource's status, so it cannot lose a concurrent writer's change, and
// spec writers (renderer, binder) never make it conflict.
func (r *Reconciler) patchStatus(ctx context.Context, got, want *NopResource) error {
	data, err := StatusPatch(got, want)
	if err != nil {
		return err
	}
	if data == nil {
		return nil
	}
	if err := r.client.Status().Patch(ctx, want, client.RawPatch(types.MergePatchType, data)); err != nil {
		if kerrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("cannot patch status of NopResource %s: %w", got.GetName(), err)
	}
	return nil
}

// StatusPatch returns the JSON merge patch that turns got's status into
// want's, or nil when they are equal. Keys of atProvider.fields that want
// lacks are deleted (null); conditions, a list, are replaced as a whole.
func StatusPatch(got, want *NopResource) ([]byte, error) {
	g, w := &NopResource{Status: got.Status}, &NopResource{Status: want.Status}
	data, err := client.MergeFrom(g).Data(w)
	if err != nil {
		return nil, fmt.Errorf("cannot compute status patch of NopResource %s: %w", got.GetName(), err)
	}
	if bytes.Equal(data, []byte("{}")) {
		return nil, nil
	}
	return data, nil
}

func (r *Reconciler) warn(nr *NopResource, reason string, err error) {
	if r.recorder == nil {
		return
	}
	r.recorder.Eventf(nr, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", err.Error())
}

// synced is the Synced condition after a reconcile that ended with err.
func synced(err error, gen int64) Condition {
	if err != nil {
		return Condition{Type: TypeSynced, Status: string(corev1.ConditionFalse), Reason: ReasonReconcileError, Message: err.Error(), ObservedGeneration: gen}
	}
	return Condition{Type: TypeSynced, Status: string(corev1.ConditionTrue), Reason: ReasonReconcileSuccess, ObservedGeneration: gen}
}

// reconcileTriggers lets through what can change the outcome of a reconcile:
// creation, deletion, and updates of the generation (the spec) or of the
// annotations (the pause annotation). Status updates, including the
// provider's own, are filtered out.
func reconcileTriggers() predicate.Predicate {
	return predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})
}
