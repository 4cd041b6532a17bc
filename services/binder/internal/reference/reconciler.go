// Package reference resolves selectors and references between the composed
// resources of a composite resource (XR), for any kind, as configured by
// Loom's ReferenceRules (loom.dev/v1alpha1).
//
// For each composed resource of a kind that has a rule, a selector picks a
// target among resources of the target kind (with matchControllerRef only
// those controlled by the same XR; with matchLabels only those carrying the
// labels; the lexically smallest name when several match) and its name is
// written to the reference field; once the referenced target shows the
// rule's waitFor condition as True and has a value at fromFieldPath, that
// value is written to the value field. Policies follow crossplane-runtime:
// resolve IfNotPresent (default) or Always, resolution Required (default) or
// Optional.
//
// The binder writes only those fields, by server-side apply as field manager
// loom-binder, so the renderer (loom-renderer) must not set them and the two
// never undo each other. References that do not resolve are reported on the
// XR's ReferencesResolved condition, naming the composed resource, the field
// and what it waits for. They are retried when a target changes: the watcher
// routes a change of a composed resource to its XR. Only targets the XR does
// not control (an existing resource, a selector without matchControllerRef)
// are looked at again after a delay.
package reference

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/lru"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/apply"
	"github.com/loomxr/loom/pkg/condition"
	"github.com/loomxr/loom/pkg/event"
	kitkube "github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/reconcile"
	"github.com/loomxr/loom/pkg/telemetry"
)

// FieldManager is the binder's server-side-apply field manager.
const FieldManager = "loom-binder"

// The condition the binder sets on an XR whose composed resources have
// reference rules.
const (
	// TypeReferencesResolved is False while a reference of a composed
	// resource waits or cannot resolve, and True once every one resolved
	// after that. An XR whose references all resolved at once has none.
	TypeReferencesResolved common.ConditionType = "ReferencesResolved"

	ReasonResolved     common.ConditionReason = "Resolved"
	ReasonWaiting      common.ConditionReason = "WaitingForReferences"
	ReasonUnresolvable common.ConditionReason = "ReferenceError"

	// EventReason is the reason of events about references.
	EventReason = "ResolveReferences"
)

// maxProblemsShown bounds how many unresolved references a condition
// message lists.
const maxProblemsShown = 10

// A Client reads and writes XRs and composed resources.
type Client interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]unstructured.Unstructured, error)
	Apply(ctx context.Context, intent *unstructured.Unstructured, force bool) (*unstructured.Unstructured, error)
	ApplyStatus(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error)
}

// A Writer server-side applies composed resources.
type Writer interface {
	Apply(ctx context.Context, intent *unstructured.Unstructured, force bool) (*unstructured.Unstructured, error)
}

// Definitions finds the XRD that defines a kind of XR (nil if none does).
type Definitions interface {
	ForComposite(ctx context.Context, gk schema.GroupKind) (*xv1.CompositeResourceDefinition, error)
}

// An Option configures a Reconciler.
type Option func(*Reconciler)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(r *Reconciler) { r.log = l } }

// WithRecorder sets the event recorder (default: event.Nop).
func WithRecorder(rec event.Recorder) Option { return func(r *Reconciler) { r.record = rec } }

// WithClock sets the clock of condition transition times (default:
// time.Now).
func WithClock(now func() time.Time) Option { return func(r *Reconciler) { r.now = now } }

// WithExternalPoll sets how long to wait before looking again at a
// reference that waits for a resource the XR does not control, whose
// changes do not reach the binder (default 30s).
func WithExternalPoll(d time.Duration) Option { return func(r *Reconciler) { r.externalPoll = d } }

// WithImpersonation makes the reconciler write the resolved references of
// composed resources whose XR's XRD names a ServiceAccount
// (spec.serviceAccountRef) as that account: as returns a Writer that
// impersonates user. Without it no XRD is looked up and every write is the
// binder's own; the binder's main always sets it.
func WithImpersonation(defs Definitions, as func(user string) (Writer, error)) Option {
	return func(r *Reconciler) { r.defs, r.as = defs, as }
}

// WithConfirmedWaits makes the reconciler read a composed resource's
// targets again from the API server (kube.Latest) before it writes that a
// reference waits for one of them, when the first reading came through a
// read path that may lag the API server (the object mirror). A wait costs
// writes (the resolved reference field without its value, the XR's
// ReferencesResolved condition, and the provider's reconcile of the
// resource they change) that a target already Ready would make needless, so
// a GET of the target is cheaper than a stale wait. Without it (the
// default, right when every read is a GET) a wait is written as read.
func WithConfirmedWaits() Option { return func(r *Reconciler) { r.confirmWaits = true } }

// DefaultWaitGrace is how long, by default, the binder keeps to itself that a
// reference of an XR that shows no ReferencesResolved condition yet waits
// for its target (see WithWaitGrace).
const DefaultWaitGrace = 5 * time.Second

// WithWaitGrace makes a reference that waits for its target (not Ready yet,
// no value yet) write nothing for up to d after the XR's first wait on this
// replica, while the XR shows no ReferencesResolved condition: no reference
// field, no condition, and, with WithConfirmedWaits, no second reading from
// the API server; the XR is looked at again when d is over. A target's
// progress reaches the binder meanwhile (the watcher routes a target's
// change while a reference of its XR is unresolved), so the common wait, a
// target a provider makes Ready a moment after its creation, ends in one
// write of the resolved reference instead of the wait's writes (the
// reference without its value, the condition, and the provider's
// reconcile of the resource they change) and then the resolution's. A
// wait that outlasts d is written as before. Zero (the default) writes
// every wait at once.
func WithWaitGrace(d time.Duration) Option { return func(r *Reconciler) { r.waitGrace = d } }

// A Reconciler resolves the references of one XR's composed resources at a
// time. It is safe for concurrent use on different XRs.
type Reconciler struct {
	client       Client
	rules        *Rules
	log          *slog.Logger
	record       event.Recorder
	now          func() time.Time
	externalPoll time.Duration
	defs         Definitions
	as           func(user string) (Writer, error)
	confirmWaits bool
	waitGrace    time.Duration
	// waitingSince holds when each XR's references were first found
	// waiting within the grace, by XR UID.
	waitingSince *lru.Cache
}

// waitingSinceSize bounds the XRs whose first wait is remembered; an XR
// forgotten starts its grace again.
const waitingSinceSize = 16384

// NewReconciler returns a Reconciler that reads and writes through c and
// takes its rules from rules.
func NewReconciler(c Client, rules *Rules, o ...Option) *Reconciler {
	r := &Reconciler{
		client:       c,
		rules:        rules,
		log:          slog.New(slog.DiscardHandler),
		record:       event.Nop,
		now:          time.Now,
		externalPoll: 30 * time.Second,
		waitingSince: lru.New(waitingSinceSize),
	}
	for _, fn := range o {
		fn(r)
	}
	return r
}

// A ComposedRef is one entry of an XR's spec.resourceRefs.
type ComposedRef struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

// GroupVersionKind returns the kind of the referenced resource.
func (r ComposedRef) GroupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(r.APIVersion, r.Kind)
}

// ResourceRefs returns the composed resources an XR lists in
// spec.resourceRefs (spec.crossplane.resourceRefs for the Namespaced and
// Cluster scopes). A namespaced XR's references have no namespace: they are
// in the XR's.
func ResourceRefs(xr *unstructured.Unstructured) []ComposedRef {
	raw, ok, _ := unstructured.NestedSlice(xr.Object, "spec", "resourceRefs")
	if !ok {
		raw, _, _ = unstructured.NestedSlice(xr.Object, "spec", "crossplane", "resourceRefs")
	}
	out := make([]ComposedRef, 0, len(raw))
	for _, e := range raw {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		s := func(k string) string { v, _ := m[k].(string); return v }
		r := ComposedRef{APIVersion: s("apiVersion"), Kind: s("kind"), Namespace: s("namespace"), Name: s("name")}
		if r.Namespace == "" {
			r.Namespace = xr.GetNamespace()
		}
		if r.Kind != "" && r.Name != "" {
			out = append(out, r)
		}
	}
	return out
}

// Reconcile re-reads the XR of kind gvk named namespace/name, resolves the
// references of its composed resources that have rules, writes what
// resolved, and sets the XR's ReferencesResolved condition (when a reference
// waits or fails, or the condition is there already). With refresh it
// reloads the rules first (a rule changed). It writes nothing when nothing
// changed. A returned error means "retry later".
func (r *Reconciler) Reconcile(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, refresh bool) (reconcile.Result, error) {
	log := r.log.With("composite", name, "kind", gvk.Kind)
	if refresh {
		if err := r.rules.Refresh(ctx); err != nil {
			return reconcile.Result{}, err
		}
	}
	// Every write that follows is a server-side apply (of resolved fields
	// and of the XR's status): the XR, its composed resources and their
	// targets may come from the read path at any version it holds.
	ctx = kitkube.Guarded(ctx)
	xr, err := r.client.Get(ctx, gvk, namespace, name)
	if kerrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cannot get composite resource %q: %w", name, err)
	}
	if xr.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}

	var writer Writer = r.client
	account, err := r.account(ctx, gvk)
	if err != nil {
		return reconcile.Result{}, err
	}
	if account != nil {
		if writer, err = r.impersonate(account); err != nil {
			return reconcile.Result{}, err
		}
	}

	w := newWorld(r.client, xr)
	governed := 0
	var problems []Problem
	var errs []error
	_, had := condition.Find(condition.Observed(xr), TypeReferencesResolved)
	grace, since := r.graceLeft(xr, had)
	var deferred []Problem // waits kept to ourselves within the grace
	refs := ResourceRefs(xr)
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].Kind != refs[j].Kind {
			return refs[i].Kind < refs[j].Kind
		}
		return refs[i].Name < refs[j].Name
	})
	for _, ref := range refs {
		rule, err := r.rules.For(ctx, ref.GroupVersionKind().GroupKind())
		if err != nil {
			return reconcile.Result{}, err
		}
		if rule == nil {
			continue
		}
		obj, err := w.Get(ctx, ref.GroupVersionKind(), ref.Namespace, ref.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// The renderer may not have created it yet (its creation brings
		// us back), or it is going away; either way nothing to resolve.
		if obj == nil || obj.GetDeletionTimestamp() != nil || !controlledBy(obj, xr) {
			continue
		}
		governed++
		intent, probs, err := Resolve(ctx, w, xr, obj, rule, FieldManager)
		if err == nil && grace > 0 && waits(probs) && !fails(probs) {
			// Within the grace: the target's progress brings us back.
			deferred = append(deferred, probs...)
			continue
		}
		if err == nil && r.confirmWaits && waits(probs) {
			// The targets may be Ready already, and the mirror not yet
			// know: ask the API server before writing the wait.
			intent, probs, err = Resolve(kitkube.Latest(ctx), newWorld(r.client, xr), xr, obj, rule, FieldManager)
		}
		if err != nil {
			problems = append(problems, Problem{Resource: describe(obj), Field: "references", Message: err.Error(), Error: true})
			continue
		}
		problems = append(problems, probs...)
		changed, err := apply.Changes(obj, intent, FieldManager, "")
		if err != nil {
			return reconcile.Result{}, err
		}
		if !changed {
			continue
		}
		if _, err := writer.Apply(ctx, intent, false); err != nil {
			if account != nil && kerrors.IsForbidden(err) {
				// The XRD's ServiceAccount may not: whoever owns its RBAC
				// must act.
				problems = append(problems, Problem{Resource: describe(obj), Field: "references",
					Message: forbidden(account, obj, err), Error: true})
				continue
			}
			if kerrors.IsConflict(err) || kerrors.IsInvalid(err) || kerrors.IsBadRequest(err) {
				// Another field manager owns one of the fields, or the
				// resource's schema has no such field: a user must fix
				// the rule or the Composition.
				problems = append(problems, Problem{Resource: describe(obj), Field: "references",
					Message: fmt.Sprintf("cannot be written: %v", err), Error: true})
				continue
			}
			errs = append(errs, fmt.Errorf("cannot write resolved references of %s: %w", describe(obj), err))
			continue
		}
		log.Debug("Wrote resolved references", "resource", describe(obj))
	}
	problems = append(problems, Cycles(problems)...)

	waiting := len(deferred)
	for _, p := range problems {
		if !p.Error {
			waiting++
		}
	}
	telemetry.SetReferencesWaiting(string(xr.GetUID()), waiting)
	if len(deferred) > 0 && !fails(problems) {
		// Nothing to report yet: what resolved is written, the waits are
		// looked at again when the grace is over (or a target's change
		// comes first).
		r.waitingSince.Add(xr.GetUID(), since)
		return reconcile.Result{RequeueAfter: grace}, errors.Join(errs...)
	}
	r.waitingSince.Remove(xr.GetUID())
	// Reported with an error, the waits are reported too.
	problems = append(problems, deferred...)
	if (governed == 0 && !slices.Contains(condition.Owned(xr, FieldManager), TypeReferencesResolved)) || (len(problems) == 0 && !had) {
		// Nothing to report: no composed resource has rules, or every
		// reference resolved and the XR never said otherwise. The
		// condition is written when a reference waits or fails, and
		// then when it resolves; an XR whose references resolved at
		// once carries none, which saves a write of its status per XR.
		// (The watcher brings the binder's own "not resolved" back to
		// it once its mirror holds it, so that a binder that forgot
		// that write, on a restart, still turns it True.)
		return reconcile.Result{}, errors.Join(errs...)
	}
	if err := r.setCondition(ctx, xr, problems, governed); err != nil {
		errs = append(errs, err)
	}
	res := reconcile.Result{}
	for _, p := range problems {
		if p.External && !p.Error {
			res.RequeueAfter = r.externalPoll
		}
	}
	return res, errors.Join(errs...)
}

// graceLeft returns how much of the wait grace is left for xr (none when
// there is no grace, or the XR shows a ReferencesResolved condition: had),
// and when its references were first found waiting within the grace (now
// if they were not).
func (r *Reconciler) graceLeft(xr *unstructured.Unstructured, had bool) (time.Duration, time.Time) {
	since := r.now()
	if v, ok := r.waitingSince.Get(xr.GetUID()); ok {
		since = v.(time.Time) //nolint:forcetypeassert // Only times are stored.
	}
	if r.waitGrace <= 0 || had {
		return 0, since
	}
	return max(r.waitGrace-r.now().Sub(since), 0), since
}

// setCondition applies the XR's ReferencesResolved condition, carrying the
// other conditions the binder owns there, and records a warning event when
// the condition changed to an error.
func (r *Reconciler) setCondition(ctx context.Context, xr *unstructured.Unstructured, problems []Problem, governed int) error {
	c := common.Condition{
		Type:   TypeReferencesResolved,
		Status: corev1.ConditionTrue,
		Reason: ReasonResolved,
	}
	isErr := false
	if len(problems) > 0 {
		sort.Slice(problems, func(i, j int) bool {
			if problems[i].Error != problems[j].Error {
				return problems[i].Error
			}
			return problems[i].String() < problems[j].String()
		})
		lines := make([]string, 0, len(problems))
		for i, p := range problems {
			if i == maxProblemsShown {
				lines = append(lines, fmt.Sprintf("and %d more", len(problems)-maxProblemsShown))
				break
			}
			lines = append(lines, p.String())
			isErr = isErr || p.Error
		}
		c.Status = corev1.ConditionFalse
		c.Reason = ReasonWaiting
		if isErr {
			c.Reason = ReasonUnresolvable
		}
		c.Message = fmt.Sprintf("%d unresolved references among %d composed resources: %s", len(problems), governed, strings.Join(lines, "; "))
	}
	in := &unstructured.Unstructured{Object: map[string]any{}}
	in.SetGroupVersionKind(xr.GroupVersionKind())
	in.SetName(xr.GetName())
	if xr.GetNamespace() != "" {
		in.SetNamespace(xr.GetNamespace())
	}
	in.Object["status"] = map[string]any{"conditions": condition.Intent(xr, FieldManager, metav1.NewTime(r.now()), c)}
	changed, err := apply.Changes(xr, in, FieldManager, "status")
	if err != nil || !changed {
		return err
	}
	if _, err := r.client.ApplyStatus(ctx, in); err != nil {
		if kerrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("cannot set condition %s of composite resource %q: %w", TypeReferencesResolved, xr.GetName(), err)
	}
	if isErr {
		r.record.Event(xr, event.TypeWarning, EventReason, c.Message)
	}
	return nil
}

// world is the World of one reconcile: it reads through the client and
// remembers what it read, so that a target read for one composed resource is
// not read again for the next.
type world struct {
	client Client
	xr     *unstructured.Unstructured
	cache  map[string]*unstructured.Unstructured
}

// waits reports whether probs hold a wait (a problem that is no error).
func waits(probs []Problem) bool {
	return slices.ContainsFunc(probs, func(p Problem) bool { return !p.Error })
}

// fails reports whether probs hold an error.
func fails(probs []Problem) bool {
	return slices.ContainsFunc(probs, func(p Problem) bool { return p.Error })
}

func newWorld(c Client, xr *unstructured.Unstructured) *world {
	return &world{client: c, xr: xr, cache: map[string]*unstructured.Unstructured{}}
}

func (w *world) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	key := gvk.GroupKind().String() + "/" + namespace + "/" + name
	if o, ok := w.cache[key]; ok {
		return o, nil
	}
	o, err := w.client.Get(ctx, gvk, namespace, name)
	if kerrors.IsNotFound(err) {
		o, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot get %s %q: %w", gvk.Kind, name, err)
	}
	w.cache[key] = o
	return o, nil
}

func (w *world) Candidates(ctx context.Context, gvk schema.GroupVersionKind, namespace string, ctrl *unstructured.Unstructured, matchLabels map[string]string) ([]*unstructured.Unstructured, error) {
	sel := labels.SelectorFromSet(matchLabels)
	var out []*unstructured.Unstructured
	if ctrl != nil {
		for _, ref := range ResourceRefs(ctrl) {
			if ref.GroupVersionKind().GroupKind() != gvk.GroupKind() {
				continue
			}
			o, err := w.Get(ctx, ref.GroupVersionKind(), ref.Namespace, ref.Name)
			if err != nil {
				return nil, err
			}
			if o == nil || o.GetDeletionTimestamp() != nil || !controlledBy(o, ctrl) || !sel.Matches(labels.Set(o.GetLabels())) {
				continue
			}
			out = append(out, o)
		}
		return out, nil
	}
	items, err := w.client.List(ctx, gvk, namespace, sel)
	if err != nil {
		return nil, err
	}
	for i := range items {
		if items[i].GetDeletionTimestamp() == nil {
			out = append(out, &items[i])
		}
	}
	return out, nil
}
