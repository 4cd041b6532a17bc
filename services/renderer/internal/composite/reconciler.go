// Package composite renders composite resources (XRs): it selects an XR's
// Composition and revision, reads the composed resources the XR references,
// renders the desired ones (patch and transform for mode Resources, the
// function pipeline for mode Pipeline), records them in the XR's
// spec.resourceRefs, applies them, deletes those that left the Composition,
// and applies the XR's status: the fields the Composition writes back,
// Synced and Ready, and Loom's per-resource summary.
//
// # API economy
//
// A render reads the XR and each composed resource it references (GET, never
// LIST), and reads revisions through a short-lived cache. It writes only what
// changes, and at most once per object: one merge patch of the XR's spec
// (selection refs and resourceRefs together, before any composed resource is
// created, so that nothing can leak, and with them whatever the patches of
// a patch-and-transform render wrote to the XR's spec, labels and
// annotations, which Crossplane persists too), one server-side apply per composed
// resource whose applied fields differ from the cluster's (see package apply),
// one delete per resource that left the Composition, and one server-side
// apply of the XR's status whose content differs (conditions keep their
// lastTransitionTime unless they really change). Rendering an unchanged XR
// therefore writes nothing.
//
// # Errors
//
// Every failure is reported on the XR's Synced condition with a message that
// names the failing template, patch, step or resource and quotes the cause,
// and as a Warning Event when the message is new. Invalid input (a patch
// that cannot apply, an incompatible Composition, a fatal function result)
// returns a permanent error: the renderer waits for the input to change. Missing input (no compatible
// Composition, no revision, a missing EnvironmentConfig) waits for the
// change that brings it, which the watcher or the revision fan-out delivers.
// A composed resource the API server refuses (invalid per its CRD's schema,
// say) is the exception among invalid input: what fixes it may be no input
// of the render (the CRD), so the render is requeued with a backoff of two
// seconds doubling to a minute, while the XR's other resources are applied
// and Synced names the refused one and the cause.
// Anything else (the API server, a function that is unreachable) returns an
// error that the bus retries with backoff.
//
// # Connection details
//
// After a Pipeline render has applied its resources, the connection details
// the functions returned for the XR (the whole set, empty when none) are
// handed to the secrets service (package connection), which builds the XR's
// connection Secret from them; they change nothing else and go nowhere
// else. Only XRs with a connection Secret (legacy XRs that name one, or
// whose Composition gives them one) hand them over. An unreachable secrets
// service is retried with backoff. A renderer without a secrets endpoint
// reports, on Synced and in a Warning Event, every such XR whose functions
// return connection details, since it cannot publish them.
package composite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/compose"
	"github.com/loomxr/loom/pkg/fn"
	kitkube "github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/reconcile"
	"github.com/loomxr/loom/pkg/watchreq"
	"github.com/loomxr/loom/pkg/xcrd"
	"github.com/loomxr/loom/services/renderer/internal/connection"
	"github.com/loomxr/loom/services/renderer/internal/event"
	"github.com/loomxr/loom/services/renderer/internal/kube"
)

// AnnotationPaused pauses the reconciliation of an XR.
const AnnotationPaused = "crossplane.io/paused"

// errInvalidSpec marks invalid input found by the renderer itself.
var errInvalidSpec = errors.New("invalid input")

// errNoSecretsEndpoint marks connection details a renderer without a
// secrets endpoint cannot publish: only its configuration can fix that.
var errNoSecretsEndpoint = errors.New("the renderer is not configured with a secrets endpoint (--secrets-endpoint)")

// A Client reads and writes objects.
type Client interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]unstructured.Unstructured, error)
	Apply(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error)
	ApplyStatus(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error)
	MergePatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch map[string]any) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, uid types.UID) error
	Namespaced(gvk schema.GroupVersionKind) (bool, error)
}

// Definitions finds the XRD that defines a kind of XR.
type Definitions interface {
	ForComposite(ctx context.Context, gk schema.GroupKind) (*v1.CompositeResourceDefinition, error)
}

// Revisions reads CompositionRevisions (see revision.Store).
type Revisions interface {
	List(ctx context.Context, composition string, fresh bool) ([]*v1.CompositionRevision, error)
	Get(ctx context.Context, name string, fresh bool) (*v1.CompositionRevision, error)
}

// A Pipeline runs function pipelines (see fn.Executor).
type Pipeline interface {
	Run(ctx context.Context, steps []fn.Step, observed fn.State, o ...fn.RunOption) (fn.Outcome, error)
}

// Watches records what the watcher must watch on behalf of an XR (see
// package watchreq).
type Watches interface {
	Put(ctx context.Context, xrUID string, reqs []watchreq.Request) error
}

// A DetailsPublisher hands the connection details that the functions of a
// Pipeline XR returned to the secrets service (see connection.Publisher).
type DetailsPublisher interface {
	// Publish sends the whole set of details of xr, rendered with the
	// given CompositionRevision, unless they are what it last sent (force:
	// anyway). It returns once they are stored; an error wrapping
	// connection.ErrInvalid cannot be fixed by retrying.
	Publish(ctx context.Context, xr *unstructured.Unstructured, revision string, details map[string][]byte, force bool) error
	// Forget drops what it remembers of a gone XR.
	Forget(uid types.UID)
}

// A SecretReader reads the data of a Secret; a Secret that does not exist
// reads as nil data without error.
type SecretReader interface {
	ReadSecret(ctx context.Context, namespace, name string) (map[string][]byte, error)
}

// A Request names the XR to render.
type Request struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
	UID       types.UID
	// Revision, when set, names a CompositionRevision the render was asked
	// for because revisions changed: the render reads the Composition's
	// revisions afresh unless its cache already holds that revision.
	Revision string
	// Republish says the secrets service asked for the render (a
	// connection Secret changed, or the XR's stored details are gone): the
	// connection details of a Pipeline XR are handed over even if they look
	// unchanged.
	Republish bool
	// Publication, when set, is what the secrets service published for
	// the XR: the render writes it to the XR's status.
	Publication *Publication
}

// A Reconciler renders XRs. It is safe for concurrent use on different XRs;
// the bus never hands it the same XR twice at once.
type Reconciler struct {
	client    Client
	defs      Definitions
	revisions Revisions
	pipeline  Pipeline
	watches   Watches
	secrets   SecretReader
	details   DetailsPublisher
	as        func(user string) (Client, error)
	rec       event.Recorder
	log       *slog.Logger

	// memo remembers, per XR UID, what the renderer last told the watcher
	// and which function results it last emitted, so that unchanged ones
	// cost nothing.
	memo *memo

	firstStatusWait time.Duration
	unobservedWait  time.Duration
	publicationWait time.Duration
	now             func() time.Time

	// admission, when not nil, holds renders that would create composed
	// resources while their tenant (tenant of the bus request) has too
	// many unobserved ones.
	admission *Admission
	tenant    func(reconcile.Request) string
}

// An Option configures a Reconciler.
type Option func(*Reconciler)

// WithMemoSize sets how many XRs the reconciler remembers what it last told
// the watcher and last emitted as function results for (default
// DefaultMemoSize). Beyond it the least recently rendered are forgotten and
// checked again on their next render.
func WithMemoSize(n int) Option {
	return func(rc *Reconciler) {
		if n > 0 {
			rc.memo = newMemo(n)
		}
	}
}

// WithRecorder sets the Event recorder (default: none).
func WithRecorder(r event.Recorder) Option { return func(rc *Reconciler) { rc.rec = r } }

// WithLogger sets the logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(rc *Reconciler) { rc.log = l } }

// WithPipeline sets the function pipeline runner. Without one, XRs of
// Compositions in mode Pipeline fail.
func WithPipeline(p Pipeline) Option { return func(rc *Reconciler) { rc.pipeline = p } }

// WithWatches sets where watch requests are recorded. Without it nothing is
// recorded (and nothing re-renders an XR when its EnvironmentConfigs or
// extra resources change).
func WithWatches(w Watches) Option { return func(rc *Reconciler) { rc.watches = w } }

// WithSecrets sets how connection Secrets are read for the observed state of
// function pipelines. Without it, observed connection details are empty.
func WithSecrets(s SecretReader) Option { return func(rc *Reconciler) { rc.secrets = s } }

// WithConnectionDetails sets where the connection details that functions
// return for Pipeline XRs are published. Without it, an XR whose functions
// return some fails its render (Synced False) naming --secrets-endpoint.
func WithConnectionDetails(p DetailsPublisher) Option { return func(rc *Reconciler) { rc.details = p } }

// WithImpersonation sets how the renderer acts as the ServiceAccount an XRD
// names in spec.serviceAccountRef: as returns a Client that impersonates
// user, and the renderer creates, updates and deletes the composed resources
// of that XRD's XRs through it, so that RBAC decides which kinds they may
// be composed of. Without it, an XRD that names a ServiceAccount fails its
// XRs' renders rather than compose them with Loom's own identity.
func WithImpersonation(as func(user string) (Client, error)) Option {
	return func(rc *Reconciler) { rc.as = as }
}

// DefaultFirstStatusWait is how long, by default, an XR's first status
// waits for the XR to be Ready (see WithFirstStatusWait).
const DefaultFirstStatusWait = 5 * time.Second

// WithFirstStatusWait sets how long after its creation an XR's first status
// may wait for the XR to be Ready (default DefaultFirstStatusWait; zero or
// negative: not at all). Until then a render that succeeds but finds
// composed resources not Ready writes no status and asks for the XR again
// at the end of the wait; the composed resources turning Ready bring it
// back sooner. An XR whose resources are Ready within seconds so gets one
// status, Ready, instead of one per resource turning Ready ("Unready
// resources: ..."), and its claim one status too. A failed render, and an
// XR that has a Ready condition already, are written at once.
func WithFirstStatusWait(d time.Duration) Option {
	return func(rc *Reconciler) { rc.firstStatusWait = d }
}

// DefaultUnobservedWait is how long, by default, an XR's first status may
// wait while a composed resource has no status yet (see
// WithUnobservedWait).
const DefaultUnobservedWait = 30 * time.Second

// WithUnobservedWait sets how long after the newest composed resource's
// creation an XR's first status may wait, beyond the first status wait,
// while a composed resource that is not Ready has no status at all (default
// DefaultUnobservedWait; at most the first status wait when shorter): its
// provider has not looked at it yet, and "Creating" would tell a user
// nothing the resource's next change does not (it waits in the provider's
// queue, which a burst of claims makes longer than the first status wait).
// A resource whose provider reports progress (a status that says not Ready)
// ends this part of the wait. Zero or negative: no wait beyond the first
// status wait.
func WithUnobservedWait(d time.Duration) Option {
	return func(rc *Reconciler) { rc.unobservedWait = d }
}

// WithAdmission bounds each tenant's composed resources that their
// providers have not observed yet (see Admission); tenant names the tenant
// of a bus request (the bus's fair key, so that the tenants Loom's queues
// take turns among are the ones admitted apart). A nil Admission admits
// everything.
func WithAdmission(a *Admission, tenant func(reconcile.Request) string) Option {
	return func(rc *Reconciler) { rc.admission, rc.tenant = a, tenant }
}

// WithClock sets the clock that measures the first status wait (default
// time.Now).
func WithClock(now func() time.Time) Option { return func(rc *Reconciler) { rc.now = now } }

// NewReconciler returns a Reconciler.
func NewReconciler(c Client, d Definitions, revs Revisions, o ...Option) *Reconciler {
	r := &Reconciler{client: c, defs: d, revisions: revs, rec: event.Nop{}, log: slog.Default(), memo: newMemo(DefaultMemoSize),
		firstStatusWait: DefaultFirstStatusWait, unobservedWait: DefaultUnobservedWait, publicationWait: DefaultPublicationWait, now: time.Now}
	for _, fn := range o {
		fn(r)
	}
	return r
}

// state is one render's view of its XR.
type state struct {
	xr        *unstructured.Unstructured
	xrd       *v1.CompositeResourceDefinition
	machinery []string

	// composer writes the composed resources: the renderer's own client,
	// or one that impersonates the XRD's ServiceAccount (named by
	// account, "namespace/name").
	composer Client
	account  string
}

func (s *state) path(fields ...string) []string {
	return append(append(make([]string, 0, len(s.machinery)+len(fields)), s.machinery...), fields...)
}

func (s *state) getString(fields ...string) string {
	v, _, _ := unstructured.NestedString(s.xr.Object, s.path(fields...)...)
	return v
}

func (s *state) namespaced() bool { return s.xrd.GetScope() == v1.CompositeResourceScopeNamespaced }

// CrossplaneFinalizer is the finalizer Crossplane v1's XR controller puts on
// every XR it composes and removes once their composed resources are gone.
// Loom never adds it; it removes it from an XR being deleted, so that an XR
// Crossplane composed before the switch can go.
const CrossplaneFinalizer = "composite.apiextensions.crossplane.io"

// dropCrossplaneFinalizer removes CrossplaneFinalizer from xr, an XR being
// deleted, if it is there. The patch carries xr's resourceVersion, so it
// never drops a finalizer another controller added since xr was read.
func (r *Reconciler) dropCrossplaneFinalizer(ctx context.Context, xr *unstructured.Unstructured) error {
	fs := xr.GetFinalizers()
	keep := make([]any, 0, len(fs))
	for _, f := range fs {
		if f != CrossplaneFinalizer {
			keep = append(keep, f)
		}
	}
	if len(keep) == len(fs) {
		return nil
	}
	patch := map[string]any{"metadata": map[string]any{"resourceVersion": xr.GetResourceVersion(), "finalizers": keep}}
	if _, err := r.client.MergePatch(ctx, xr.GroupVersionKind(), xr.GetNamespace(), xr.GetName(), patch); err != nil && !kerrors.IsNotFound(err) {
		return fmt.Errorf("cannot remove finalizer %q from %s %q: %w", CrossplaneFinalizer, xr.GetKind(), xr.GetName(), err)
	}
	r.log.Debug("Removed Crossplane's finalizer from a composite resource being deleted", "kind", xr.GetKind(), "name", xr.GetName())
	return nil
}

// Reconcile renders the XR the request names. It is idempotent and writes
// only what changed. The result asks for the XR again when a function's TTL
// runs out.
func (r *Reconciler) Reconcile(ctx context.Context, req Request) (reconcile.Result, error) {
	tally := &kube.Tally{}
	ctx = kube.WithTally(ctx, tally)
	start := time.Now()
	res, err := r.reconcile(ctx, req)
	r.log.Debug("Rendered composite resource", "kind", req.GVK.Kind, "name", req.Name, "namespace", req.Namespace,
		"reads", tally.Reads(), "writes", tally.Writes(), "duration", time.Since(start).Round(time.Millisecond), "err", err)
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, req Request) (reconcile.Result, error) {
	// Every write based on the XR is guarded, so it may come from the read
	// path at any version it holds (a composed resource's event does not
	// name the XR): the spec patch carries the resourceVersion read, and a
	// conflict reads the XR again; composed resources and the status are
	// server-side applied, and a stale render is superseded by the render
	// of the newer XR's own event.
	xr, err := r.client.Get(kitkube.Guarded(ctx), req.GVK, req.Namespace, req.Name)
	if kerrors.IsNotFound(err) {
		return reconcile.Result{}, r.forget(ctx, req.UID)
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cannot get %s %q: %w", req.GVK.Kind, req.Name, err)
	}
	if req.UID != "" && xr.GetUID() != req.UID {
		// The event was for an XR of the same name that is gone.
		if err := r.forget(ctx, req.UID); err != nil {
			return reconcile.Result{}, err
		}
	}
	xrd, err := r.defs.ForComposite(ctx, req.GVK.GroupKind())
	if err != nil {
		return reconcile.Result{}, err
	}
	if xrd == nil {
		return reconcile.Result{}, nil
	}
	if req.Publication != nil {
		r.memo.handOver(xr.GetUID(), *req.Publication, r.now())
	}
	if xr.GetDeletionTimestamp() != nil {
		// Kubernetes garbage collection deletes the composed resources
		// through their controller references, once Crossplane's
		// finalizer (on an XR Crossplane composed before Loom took over)
		// no longer holds the XR.
		if err := r.dropCrossplaneFinalizer(ctx, xr); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, r.forget(ctx, xr.GetUID())
	}
	st := &state{xr: xr, xrd: xrd, machinery: strings.Split(xcrd.SpecMachineryPath(xrd.GetScope()), "."), composer: r.client}
	if xr.GetAnnotations()[AnnotationPaused] == "true" {
		return reconcile.Result{}, r.paused(ctx, st)
	}
	sel := &selection{patch: map[string]any{}}
	if err := r.impersonate(st); err != nil {
		return r.fail(ctx, st, sel, nil, err)
	}

	if err := r.selectComposition(ctx, st, sel); err != nil {
		return r.fail(ctx, st, sel, nil, fmt.Errorf("cannot select a Composition: %w", err))
	}
	if err := r.selectRevision(ctx, st, sel, req.Revision); err != nil {
		return r.fail(ctx, st, sel, nil, fmt.Errorf("cannot select a revision of Composition %q: %w", sel.composition, err))
	}
	if err := checkCompatible(xr, sel.revision); err != nil {
		return r.fail(ctx, st, sel, nil, err)
	}
	if ns := sel.revision.Spec.WriteConnectionSecretsToNamespace; ns != nil && *ns != "" && xrd.GetScope().Legacy() {
		if st.getString(xcrd.FieldWriteConnectionSecretToRef, "name") == "" {
			sel.patch[xcrd.FieldWriteConnectionSecretToRef] = map[string]any{"name": string(xr.GetUID()), "namespace": *ns}
		}
	}

	observed, err := r.observe(ctx, st)
	if err != nil {
		return reconcile.Result{}, err
	}
	spec := &sel.revision.Spec.CompositionSpec
	var out *rendered
	switch spec.GetMode() {
	case v1.CompositionModeResources:
		out, err = r.renderResources(ctx, st, spec, observed)
	case v1.CompositionModePipeline:
		out, err = r.renderPipeline(ctx, st, spec, observed)
	default:
		err = fmt.Errorf("%w: spec.mode %q of CompositionRevision %q is neither Resources nor Pipeline", errInvalidSpec, spec.Mode, sel.revision.GetName())
	}
	if out != nil {
		if werr := r.recordWatches(ctx, st, out); werr != nil {
			return reconcile.Result{}, werr
		}
	}
	if err != nil {
		return r.fail(ctx, st, sel, out, fmt.Errorf("cannot compose resources with revision %q of Composition %q: %w", sel.revision.GetName(), sel.composition, err))
	}
	if err := r.checkScope(st, out); err != nil {
		return r.fail(ctx, st, sel, out, err)
	}

	if wait, retry := r.admit(ctx, st, out); wait != nil {
		r.log.Debug("Creation of composed resources waits for the tenant's providers", "kind", req.GVK.Kind, "name", req.Name, "retry", retry)
		return reconcile.Result{Wait: wait, RequeueAfter: retry}, nil
	}

	// Record every resource the render may create before creating any.
	gc := doomed(st, out, observed)
	if refs, change := resourceRefs(st, out, gc); change {
		sel.patch[xcrd.FieldResourceRefs] = refs
	}
	if out.environmentRefs != nil {
		sel.patch[xcrd.FieldEnvironmentConfigRefs] = out.environmentRefs
	}
	sel.writeBack = out.writeBack
	if err := r.patchSpec(ctx, st, sel); err != nil {
		if kerrors.IsConflict(err) {
			// The XR changed since it was read: render it again from
			// the API server's version (the read path GETs after a
			// conflict).
			r.log.Debug("Conflict patching the composite resource's spec; requeueing", "kind", req.GVK.Kind, "name", req.Name, "err", err)
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, err
	}
	applyErr := r.applyResources(ctx, st, out)
	gcErr := r.garbageCollect(ctx, st, gc)
	detailsErr := r.publishDetails(ctx, st, sel, out, req.Republish)

	errs := append(append([]error{}, out.errs...), applyErr, gcErr, detailsErr)
	synced := errors.Join(errs...)
	wait := r.statusWait(st, out, synced)
	if wait <= 0 {
		wait = r.readyWait(st, sel, out, synced)
	}
	if wait <= 0 {
		wait = r.holdWait(st, out, synced)
	}
	if wait <= 0 {
		wait = r.progressWait(st, out, synced)
	}
	switch {
	case wait > 0:
		// The first status waits for the XR to be Ready, a Ready
		// status for the first publication of the XR's connection
		// Secret, a publication handed over and the XR's progress
		// while it is not Ready for the XR's next change (see below).
		r.log.Debug("Status waits", "kind", req.GVK.Kind, "name", req.Name, "wait", wait)
	case stillUnready(st, out, synced) && reconcile.Superseded(ctx):
		// The status would say the XR is not Ready (for the first time,
		// or again with other unready resources), and a newer event for
		// the XR (a resource turning Ready, say) has come: the run it
		// brings, right after this one, writes the status from newer
		// news. Under load this folds an XR's progress into fewer
		// writes.
		r.log.Debug("Leaving the status to the render of a newer event", "kind", req.GVK.Kind, "name", req.Name)
	default:
		if err := r.writeStatus(ctx, st, out, synced); err != nil {
			return reconcile.Result{}, err
		}
	}
	r.emitResults(st, out)
	result := reconcile.Result{RequeueAfter: out.requeueAfter}
	if wait > 0 && (result.RequeueAfter <= 0 || wait < result.RequeueAfter) {
		result.RequeueAfter = wait
	}
	if synced == nil {
		r.memo.forgetRetries(st.xr.GetUID())
		return result, nil
	}
	if permanent(applyErr) {
		// The API server refused a composed resource. What fixes it may be
		// no input of the render (a CRD's schema, an admission policy), so
		// the render is retried with backoff rather than dead-lettered;
		// Synced already names the resource and the cause.
		retry := r.memo.retryAfter(st.xr.GetUID())
		if result.RequeueAfter <= 0 || retry < result.RequeueAfter {
			result.RequeueAfter = retry
		}
		return result, nil
	}
	if permanent(synced) {
		return result, reconcile.Terminal(synced)
	}
	return result, synced
}

// fail records a render that produced nothing to apply: the selection refs
// decided so far, the Synced condition, the watched resources. It returns the
// error classified for the bus.
func (r *Reconciler) fail(ctx context.Context, st *state, sel *selection, out *rendered, cause error) (reconcile.Result, error) {
	if err := r.patchSpec(ctx, st, sel); err != nil {
		return reconcile.Result{}, err
	}
	if out == nil {
		out = &rendered{}
	}
	out.failed = true
	if err := r.writeStatus(ctx, st, out, cause); err != nil {
		return reconcile.Result{}, err
	}
	r.emitResults(st, out)
	switch {
	case permanent(cause):
		return reconcile.Result{}, reconcile.Terminal(cause)
	case waiting(cause):
		return reconcile.Result{}, nil
	default:
		return reconcile.Result{}, cause
	}
}

// publishDetails hands the connection details the functions of a Pipeline
// XR returned to the secrets service.
func (r *Reconciler) publishDetails(ctx context.Context, st *state, sel *selection, out *rendered, force bool) error {
	if !out.pipeline || !publishesConnection(st, sel) {
		return nil
	}
	if r.details == nil {
		if len(out.connectionDetails) == 0 {
			return nil
		}
		return fmt.Errorf("cannot publish the connection details that the functions of Composition %q returned: %w", sel.composition, errNoSecretsEndpoint)
	}
	if err := r.details.Publish(ctx, st.xr, sel.revision.GetName(), out.connectionDetails, force); err != nil {
		return fmt.Errorf("cannot publish the connection details that the functions of Composition %q returned: %w", sel.composition, err)
	}
	return nil
}

// publishesConnection reports whether the XR has a connection Secret that
// Loom publishes: a legacy XR (modern ones compose their Secrets
// themselves) with a writeConnectionSecretToRef, or whose Composition
// gives it one.
func publishesConnection(st *state, sel *selection) bool {
	if !st.xrd.GetScope().Legacy() {
		return false
	}
	if st.getString(xcrd.FieldWriteConnectionSecretToRef, "name") != "" {
		return true
	}
	ns := sel.revision.Spec.WriteConnectionSecretsToNamespace
	return ns != nil && *ns != ""
}

// permanent reports whether retrying cannot help until the input changes.
func permanent(err error) bool {
	if errors.Is(err, errInvalidSpec) || errors.Is(err, compose.ErrInvalid) || fn.IsPermanent(err) ||
		errors.Is(err, errNoSecretsEndpoint) || errors.Is(err, connection.ErrInvalid) {
		return true
	}
	var se *kerrors.StatusError
	if errors.As(err, &se) {
		return kerrors.IsInvalid(err) || kerrors.IsBadRequest(err)
	}
	return false
}

// waiting reports whether the render waits for input that an event will
// announce when it appears.
func waiting(err error) bool {
	return errors.Is(err, errNoCompatible) || errors.Is(err, errNoRevision) || errors.Is(err, compose.ErrUnavailable)
}

// paused records that the XR's reconciliation is paused.
func (r *Reconciler) paused(ctx context.Context, st *state) error {
	out := &rendered{failed: true, paused: true}
	return r.writeStatus(ctx, st, out, nil)
}

// forget drops what the renderer recorded for a gone XR.
func (r *Reconciler) forget(ctx context.Context, uid types.UID) error {
	if uid == "" {
		return nil
	}
	defer r.memo.forget(uid)
	if r.admission != nil {
		r.admission.Forget(uid)
	}
	if r.details != nil {
		r.details.Forget(uid)
	}
	if r.watches == nil || !r.memo.hasWatches(uid) {
		return nil
	}
	if err := r.watches.Put(ctx, string(uid), nil); err != nil {
		return err
	}
	return nil
}

// recordWatches tells the watcher what to watch for the XR, when that
// changed since this replica last said.
func (r *Reconciler) recordWatches(ctx context.Context, st *state, out *rendered) error {
	if r.watches == nil {
		return nil
	}
	uid := st.xr.GetUID()
	key, err := watchreq.Encode(out.watches)
	if err != nil {
		return fmt.Errorf("cannot record watch requests of %s %q: %w", st.xr.GetKind(), st.xr.GetName(), err)
	}
	if !r.memo.watchesChanged(uid, string(key)) {
		return nil
	}
	if err := r.watches.Put(ctx, string(uid), out.watches); err != nil {
		r.memo.forgetWatches(uid)
		return err
	}
	return nil
}

// DefaultMemoSize is how many XRs a replica's memo remembers by default.
const DefaultMemoSize = 16384

// memo is a bounded per-XR memory of a replica: least-recently-used
// caches, so that above its size only the XRs used longest ago are
// forgotten (a forgotten XR is checked again on its next render) instead of
// all of them at once. The caches are safe for concurrent use.
type memo struct {
	watches      *lru.Cache // types.UID to the encoding of its watch requests
	results      *lru.Cache // types.UID to the encoding of its function results
	retries      *lru.Cache // types.UID to its count of consecutive refused renders
	publications *lru.Cache // types.UID to a Publication its status may not show yet
	ready        *lru.Cache // types.UID to when a render first found it Ready, its Secret not published
	written      *lru.Cache // types.UID to when this replica last wrote its status
}

func newMemo(size int) *memo {
	return &memo{watches: lru.New(size), results: lru.New(size), retries: lru.New(size), publications: lru.New(size), ready: lru.New(size), written: lru.New(size)}
}

// Backoff of renders whose composed resources the API server refused:
// firstRetry, doubling with each consecutive refused render, at most
// maxRetry (Crossplane's controllers back off from one second to a minute).
const (
	firstRetry = 2 * time.Second
	maxRetry   = time.Minute
)

// retryAfter returns how long to wait before rendering uid again after
// another consecutive refused render, and counts it. Handlers of one XR never
// run at once (the bus guarantees it), so the read and the write need no lock
// of their own.
func (m *memo) retryAfter(uid types.UID) time.Duration {
	n := 0
	if v, ok := m.retries.Get(uid); ok {
		n = v.(int) //nolint:forcetypeassert // Only ints are stored.
	}
	m.retries.Add(uid, n+1)
	d := firstRetry
	for range n {
		if d *= 2; d >= maxRetry {
			return maxRetry
		}
	}
	return d
}

// forgetRetries ends the backoff of uid: its render succeeded.
func (m *memo) forgetRetries(uid types.UID) {
	m.retries.Remove(uid)
}

// changed reports whether key differs from what c holds for uid (unknown
// counts as changed), and records key.
func changed(c *lru.Cache, uid types.UID, key string) bool {
	if prev, ok := c.Get(uid); ok && prev.(string) == key { //nolint:forcetypeassert // Only strings are stored.
		return false
	}
	c.Add(uid, key)
	return true
}

// watchesChanged reports whether key differs from what was last recorded
// for uid (unknown counts as changed: the watcher may hold requests from
// before a restart), and records key.
func (m *memo) watchesChanged(uid types.UID, key string) bool { return changed(m.watches, uid, key) }

// hasWatches reports whether uid may have watch requests recorded.
func (m *memo) hasWatches(uid types.UID) bool {
	k, ok := m.watches.Get(uid)
	return !ok || k.(string) != noWatches //nolint:forcetypeassert // Only strings are stored.
}

// noWatches is the encoding of no watch requests.
const noWatches = "[]"

func (m *memo) forgetWatches(uid types.UID) { m.watches.Remove(uid) }

// resultsChanged reports whether key differs from the results last emitted
// for uid, and records it.
func (m *memo) resultsChanged(uid types.UID, key string) bool { return changed(m.results, uid, key) }

func (m *memo) forget(uid types.UID) {
	m.watches.Remove(uid)
	m.results.Remove(uid)
	m.retries.Remove(uid)
	m.publications.Remove(uid)
	m.ready.Remove(uid)
	m.written.Remove(uid)
}

// emitResults turns the function results of a render into Events, when they
// differ from the ones this replica emitted last for the XR.
func (r *Reconciler) emitResults(st *state, out *rendered) {
	if len(out.results) == 0 {
		return
	}
	var b strings.Builder
	for _, res := range out.results {
		fmt.Fprintf(&b, "%s\x00%s\x00%s\x00%s\x01", res.Step, res.Severity, res.Reason, res.Message)
	}
	if !r.memo.resultsChanged(st.xr.GetUID(), b.String()) {
		return
	}
	for _, res := range out.results {
		typ := event.TypeNormal
		if res.Severity != fn.SeverityNormal {
			typ = event.TypeWarning
		}
		r.rec.Event(st.xr, typ, res.Reason, "RunFunction", fmt.Sprintf("Pipeline step %q: %s", res.Step, res.Message))
	}
}

// conditionsOf is the Synced condition of a render.
func syncedCondition(out *rendered, err error) common.Condition {
	switch {
	case out.paused:
		return common.ReconcilePaused()
	case err != nil:
		return common.ReconcileError(errors.New(boundMessage(err.Error())))
	default:
		return common.ReconcileSuccess()
	}
}

// maxMessageLength bounds condition messages; the rest is cut.
const maxMessageLength = 2048

func boundMessage(s string) string {
	if len(s) <= maxMessageLength {
		return s
	}
	return s[:maxMessageLength-3] + "..."
}
