// Package composite publishes the connection Secret of a composite resource
// (XR) and copies it to the XR's claim.
//
// # One reconcile
//
// For a LegacyCluster XR (Crossplane v1's kind of XR; modern XRs compose
// their Secrets themselves), the Reconciler
//
//  1. reads the XR (through the read path: this replica's last write of
//     it, the object mirror, a GET only when neither holds it), its XRD
//     (cached) and its CompositionRevision (cached; the Composition while
//     the XR has no revision yet);
//  2. finds where the XR's Secret goes: spec.writeConnectionSecretToRef,
//     or {name: <XR UID>, namespace: the Composition's
//     writeConnectionSecretsToNamespace} when the XR names none (the
//     renderer writes the same default to the XR; this service computes it
//     and writes nothing to the XR's spec);
//  3. reads the composed resources of spec.resourceRefs (read path), records
//     the Secrets they name with the tracker, then reads the connection
//     Secrets the Composition needs (only those the tracker's cache says
//     exist, and each once per resourceVersion: see readSecret); for a Composition in mode Pipeline it reads the XR's staging
//     Secret instead, which holds the connection details the functions
//     returned (package staging), and the composed resources' Secrets are
//     only tracked, so that their changes re-render the XR;
//  4. computes the Secret's data (package connection) and writes it when it
//     differs (package secret): once every expected key is there, or the
//     XR is Ready, or the Secret exists already (so that a later change,
//     a rotated password say, is published at once); a partial Secret is
//     not written while keys are still coming, which saves writes;
//  5. once the XR is Ready (as Crossplane does), copies the data to the
//     claim's Secret, spec.writeConnectionSecretToRef.name in the claim's
//     namespace, controlled by the claim (the binder copies the XR's
//     status.connectionDetails.lastPublishedTime to the claim's status
//     with the rest of it, so this service writes no claim);
//  6. hands its condition, ConnectionDetailsReady, and
//     status.connectionDetails.lastPublishedTime (set when the XR's Secret
//     data changed) over to the renderer when they differ from what the
//     XR shows: a request on the renderer's stream that carries them
//     (events.v1.Publication), which the renderer writes with the rest of
//     the XR's status. An XR whose Secret is published before it is Ready
//     so gets one status write, not one per service. A hand-over is not
//     repeated until the XR changes without showing it.
//
// This service writes no XR: Synced and Ready belong to the renderer, which
// also writes what this service hands over.
//
// # The condition
//
// ConnectionDetailsReady is True (reason Published) when the XR's Secret
// holds every expected key; False with reason MissingKeys when the XRD
// declares keys that the Composition cannot provide (the contract check;
// the message names the keys), WaitingForKeys when keys are still expected,
// InvalidConnectionDetails for connection details that are not valid, and
// PublishFailed when a Secret cannot be written because another object
// controls it. An XR without a connection Secret gets no condition, and
// none is written while the first publication is pending (unless a key is
// missing), to save writes. Failures are also Warning events, when the
// condition changes. Messages name keys and Secrets, never values.
//
// # Pipeline XRs
//
// Nothing is published for a Pipeline XR before the renderer has handed
// its functions' connection details over (its staging Secret exists): an
// XR's Secret is never emptied because they are not known yet.
package composite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/condition"
	"github.com/loomxr/loom/pkg/event"
	kitkube "github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/reconcile"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/secrets/internal/connection"
	"github.com/loomxr/loom/services/secrets/internal/definition"
	"github.com/loomxr/loom/services/secrets/internal/kube"
	"github.com/loomxr/loom/services/secrets/internal/secret"
	"github.com/loomxr/loom/services/secrets/internal/staging"
	"github.com/loomxr/loom/services/secrets/internal/tracker"
)

// TypeConnectionDetailsReady is the condition the secrets service sets on
// XRs that have a connection Secret.
const TypeConnectionDetailsReady common.ConditionType = "ConnectionDetailsReady"

// Reasons of TypeConnectionDetailsReady.
const (
	ReasonPublished      common.ConditionReason = "Published"
	ReasonMissingKeys    common.ConditionReason = "MissingKeys"
	ReasonWaitingForKeys common.ConditionReason = "WaitingForKeys"
	ReasonInvalid        common.ConditionReason = "InvalidConnectionDetails"
	ReasonPublishFailed  common.ConditionReason = "PublishFailed"
)

// ReasonKeyConflict is the reason of the Warning event about a key that
// several composed resources' Secrets hold.
const ReasonKeyConflict = "ConnectionSecretKeyConflict"

const (
	annotationPaused     = "crossplane.io/paused"
	fieldWriteConnection = "writeConnectionSecretToRef"
)

// A Client reads objects (see kube.Client).
type Client interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// Definitions reads XRDs, Compositions and revisions (see definition.Cache).
type Definitions interface {
	ForComposite(ctx context.Context, gvk schema.GroupVersionKind) (*v1.CompositeResourceDefinition, error)
	Revision(ctx context.Context, name string) (*definition.Composition, error)
	Composition(ctx context.Context, name string) (*definition.Composition, error)
}

// A Store writes connection Secrets (see secret.Store).
type Store interface {
	Ensure(ctx context.Context, d secret.Desired) (bool, error)
	Exists(k secret.Key) bool
}

// A Tracker records which Secrets an XR depends on and knows which
// connection Secrets exist (see tracker.Tracker).
type Tracker interface {
	Track(xr tracker.Target, d tracker.Deps)
	Forget(uid types.UID)
	Metadata(k secret.Key) (*metav1.PartialObjectMetadata, bool)
	// HandOver sends what this service published for the XR to the
	// renderer, which writes it to the XR's status.
	HandOver(ctx context.Context, xr tracker.Target, tenant string, p *eventsv1.Publication) error
}

// A Reconciler publishes XR connection Secrets. It is safe for concurrent
// use on different XRs; the bus never hands it the same XR twice at once.
type Reconciler struct {
	client  Client
	defs    Definitions
	store   Store
	tracker Tracker
	rec     event.Recorder
	log     *slog.Logger
	now     func() time.Time
	// staging is the namespace of the staging Secrets of Pipeline XRs.
	staging string
	memo    *memo
}

// An Option configures a Reconciler.
type Option func(*Reconciler)

// WithRecorder sets the Event recorder (default: none).
func WithRecorder(r event.Recorder) Option { return func(rc *Reconciler) { rc.rec = r } }

// WithLogger sets the logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(rc *Reconciler) { rc.log = l } }

// WithStagingNamespace sets where the staging Secrets of Pipeline XRs are
// (default staging.DefaultNamespace): the namespace of the service, where
// its staging.Server writes them.
func WithStagingNamespace(ns string) Option { return func(rc *Reconciler) { rc.staging = ns } }

// WithMemoSize sets how many XRs the reconciler's memos remember (default
// DefaultMemoSize); beyond it the least recently used are forgotten. n <= 0
// keeps the default.
func WithMemoSize(n int) Option {
	return func(rc *Reconciler) {
		if n > 0 {
			rc.memo = newMemo(n)
		}
	}
}

// NewReconciler returns a Reconciler.
func NewReconciler(c Client, d Definitions, s Store, t Tracker, o ...Option) *Reconciler {
	r := &Reconciler{client: c, defs: d, store: s, tracker: t, rec: event.Nop, log: slog.Default(), now: time.Now, staging: staging.DefaultNamespace,
		memo: newMemo(DefaultMemoSize)}
	for _, fn := range o {
		fn(r)
	}
	return r
}

// Reconcile publishes the connection Secret of the XR t names, and its
// claim's copy. It is idempotent and writes only what changed.
func (r *Reconciler) Reconcile(ctx context.Context, t tracker.Target) (reconcile.Result, error) {
	tally := &kube.Tally{}
	ctx = kube.WithTally(ctx, tally)
	start := time.Now()
	o, err := r.reconcile(ctx, t)
	// Key names at most: never values.
	r.log.Debug("Handled composite resource", "kind", t.GVK.Kind, "name", t.Name,
		"keys", o.keys, "filtered", o.filtered, "published", o.published, "claimWritten", o.claim,
		"reads", tally.Reads(), "writes", tally.Writes(), "duration", time.Since(start).Round(time.Millisecond), "err", err)
	return reconcile.Result{}, err
}

// outcome summarises a reconcile for the log line.
type outcome struct {
	keys      []string
	filtered  []string
	published bool
	claim     bool
}

// xrState is one reconcile's view of its XR.
type xrState struct {
	xr     *unstructured.Unstructured
	target tracker.Target
	xrd    *v1.CompositeResourceDefinition
	comp   *definition.Composition
	key    secret.Key
	// deps are what the XR depends on, as recorded with the tracker.
	deps tracker.Deps
	// returned are the connection details a Pipeline XR's functions
	// returned, and staged whether its staging Secret exists.
	returned map[string][]byte
	staged   bool
}

func (r *Reconciler) reconcile(ctx context.Context, t tracker.Target) (outcome, error) {
	var o outcome
	// Every write that follows is guarded: Secrets by create-and-
	// AlreadyExists or a resourceVersion precondition; the hand-over is
	// written by the renderer with server-side apply, and repeated while
	// the XR does not show it. So the XR may come from the read
	// path at any version it holds, also when the handled event names
	// another object (a composed resource, a claim, a Secret): a newer XR
	// brings an event of its own.
	xr, err := r.client.Get(kitkube.Guarded(ctx), t.GVK, "", t.Name)
	if kerrors.IsNotFound(err) {
		r.forget(t.UID)
		return o, nil
	}
	if err != nil {
		return o, fmt.Errorf("cannot get %s %q: %w", t.GVK.Kind, t.Name, err)
	}
	if t.UID != "" && xr.GetUID() != t.UID {
		// The event was for an XR of the same name that is gone.
		r.forget(t.UID)
	}
	t.UID = xr.GetUID()
	if xr.GetDeletionTimestamp() != nil || xr.GetAnnotations()[annotationPaused] == "true" {
		// Garbage collection deletes the Secrets with their owners.
		return o, nil
	}
	xrd, err := r.defs.ForComposite(ctx, t.GVK)
	if err != nil {
		return o, err
	}
	if xrd == nil || !xrd.GetScope().Legacy() {
		return o, nil
	}
	st := &xrState{xr: xr, target: t, xrd: xrd}

	if st.comp, err = r.composition(ctx, xr); err != nil {
		if errors.Is(err, connection.ErrInvalid) {
			return o, r.fail(ctx, st, ReasonInvalid, err, true)
		}
		return o, err
	}
	if st.comp == nil {
		// The renderer selects the Composition; that XR change comes back.
		return o, nil
	}
	ref, ok := r.secretRef(st)
	if !ok {
		r.forget(t.UID)
		return o, nil
	}
	if ref.Namespace == "" {
		return o, r.fail(ctx, st, ReasonPublishFailed, fmt.Errorf("spec.writeConnectionSecretToRef of %s %q names no namespace", xr.GetKind(), xr.GetName()), true)
	}
	st.key = ref

	composed, err := r.observe(ctx, st)
	if err != nil {
		return o, err
	}
	res, err := connection.Compute(connection.Input{Plan: st.comp.Plan, Resources: composed, Keys: xrd.GetConnectionSecretKeys(),
		Returned: st.returned, HasReturned: st.staged})
	if err != nil {
		return o, r.fail(ctx, st, ReasonInvalid, fmt.Errorf("cannot compute the connection details of %s: %w", st.comp.Name, err), true)
	}
	o.keys = slices.Sorted(maps.Keys(res.Data))
	r.reportConflicts(st, res.Conflicts)
	o.filtered = res.Filtered

	ready := condition.IsTrue(xr, common.TypeReady)
	publish := ready || res.Complete || r.store.Exists(st.key)
	if st.comp.Plan.Pipeline && !st.staged {
		// What the functions return is not known yet.
		publish = false
	}
	changed := false
	if publish {
		changed, err = r.store.Ensure(ctx, secret.Desired{Key: st.key, Owner: ownerRef(xr), Data: res.Data})
		if errors.Is(err, secret.ErrNotControllable) {
			return o, r.fail(ctx, st, ReasonPublishFailed, err, false)
		}
		if err != nil {
			return o, err
		}
		o.published = true
	}
	if publish && ready {
		copied, err := r.copyToClaim(ctx, st, res.Data)
		if errors.Is(err, secret.ErrNotControllable) {
			return o, r.fail(ctx, st, ReasonPublishFailed, err, false)
		}
		if err != nil {
			return o, err
		}
		o.claim = copied
	}

	cond, ok := r.condition(st, res, publish)
	return o, r.writeStatus(ctx, st, cond, ok, changed)
}

// composition returns what the XR is composed with: its revision, or its
// Composition before it has one; nil if neither is known yet.
func (r *Reconciler) composition(ctx context.Context, xr *unstructured.Unstructured) (*definition.Composition, error) {
	if name, _, _ := unstructured.NestedString(xr.Object, "spec", "compositionRevisionRef", "name"); name != "" {
		c, err := r.defs.Revision(ctx, name)
		if c != nil || err != nil {
			return c, err
		}
	}
	if name, _, _ := unstructured.NestedString(xr.Object, "spec", "compositionRef", "name"); name != "" {
		return r.defs.Composition(ctx, name)
	}
	return nil, nil
}

// secretRef returns where the XR's connection Secret goes, and false if it
// has none.
func (r *Reconciler) secretRef(st *xrState) (secret.Key, bool) {
	name, _, _ := unstructured.NestedString(st.xr.Object, "spec", fieldWriteConnection, "name")
	ns, _, _ := unstructured.NestedString(st.xr.Object, "spec", fieldWriteConnection, "namespace")
	if name != "" {
		return secret.Key{Namespace: ns, Name: name}, true
	}
	if d := st.comp.Spec.WriteConnectionSecretsToNamespace; d != nil && *d != "" {
		return secret.Key{Namespace: *d, Name: string(st.xr.GetUID())}, true
	}
	return secret.Key{}, false
}
