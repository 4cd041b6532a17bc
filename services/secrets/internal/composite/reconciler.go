// Package composite publishes the connection Secret of a composite resource
// (XR) and copies it to the XR's claim.
//
// # One reconcile
//
// For a LegacyCluster XR (Crossplane v1's kind of XR; modern XRs compose
// their Secrets themselves), the Reconciler
//
//  1. reads the XR, its XRD (cached) and its CompositionRevision (cached;
//     the Composition while the XR has no revision yet);
//  2. finds where the XR's Secret goes: spec.writeConnectionSecretToRef,
//     or {name: <XR UID>, namespace: the Composition's
//     writeConnectionSecretsToNamespace} when the XR names none (the
//     renderer writes the same default to the XR; this service computes it
//     and writes nothing to the XR's spec);
//  3. reads the composed resources of spec.resourceRefs (GET each), records
//     the Secrets they name with the tracker, then reads the connection
//     Secrets the Composition needs (only those the tracker's cache says
//     exist); for a Composition in mode Pipeline it reads the XR's staging
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
//     namespace, controlled by the claim, and sets the claim's
//     status.connectionDetails.lastPublishedTime when it changed;
//  6. applies its condition, ConnectionDetailsReady, and
//     status.connectionDetails.lastPublishedTime (set when the XR's Secret
//     data changed) to the XR's status with server-side apply (field
//     manager loom-secrets), only when they change.
//
// Synced and Ready belong to the renderer and are never touched.
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
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/reconcile"
	"github.com/loomxr/loom/services/secrets/internal/connection"
	"github.com/loomxr/loom/services/secrets/internal/definition"
	"github.com/loomxr/loom/services/secrets/internal/event"
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

// A Client reads objects and applies XR status (see kube.Client).
type Client interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	ApplyStatus(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error)
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

	// conflicts remembers, per XR, the key conflicts last reported, so that
	// each new set is reported once.
	mu        sync.Mutex
	conflicts map[types.UID]string

	// templates remembers, per XR, the template of each composed resource
	// it references, so that resources whose template contributes nothing
	// are not read again.
	templates *templateMemo
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

// NewReconciler returns a Reconciler.
func NewReconciler(c Client, d Definitions, s Store, t Tracker, o ...Option) *Reconciler {
	r := &Reconciler{client: c, defs: d, store: s, tracker: t, rec: event.Nop, log: slog.Default(), now: time.Now, staging: staging.DefaultNamespace,
		conflicts: map[types.UID]string{}, templates: newTemplateMemo(16384)}
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
	xr, err := r.client.Get(ctx, t.GVK, "", t.Name)
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

	ready := isReady(xr)
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

// observe reads the XR's composed resources and the connection Secrets the
// Composition needs (for a pipeline: the staging Secret), and records them
// with the tracker first.
func (r *Reconciler) observe(ctx context.Context, st *xrState) ([]connection.Observed, error) {
	refs, _, _ := unstructured.NestedSlice(st.xr.Object, "spec", "resourceRefs")
	var (
		out     []connection.Observed
		keys    []secret.Key
		uids    []types.UID
		secrets = map[int]secret.Key{}
	)
	for _, ref := range refs {
		m, ok := ref.(map[string]any)
		if !ok {
			continue
		}
		apiVersion, _ := m["apiVersion"].(string)
		kind, _ := m["kind"].(string)
		name, _ := m["name"].(string)
		ns, _ := m["namespace"].(string)
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil || kind == "" || name == "" {
			continue
		}
		refKey := apiVersion + "/" + kind + "/" + ns + "/" + name
		if tmpl, ok := r.templates.get(st.xr.GetUID(), refKey); ok && !contributes(st.comp.Plan, tmpl) {
			// Its template contributes nothing: no need to read it.
			continue
		}
		obj, err := r.client.Get(ctx, gv.WithKind(kind), ns, name)
		if kerrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot get composed resource %s %q: %w", kind, name, err)
		}
		if c := metav1.GetControllerOfNoCopy(obj); c == nil || c.UID != st.xr.GetUID() {
			// Not this XR's (Crossplane ignores such references too).
			continue
		}
		tmpl := obj.GetAnnotations()[v1.AnnotationCompositionResourceName]
		if tmpl == "" {
			continue
		}
		r.templates.put(st.xr.GetUID(), refKey, tmpl)
		uids = append(uids, obj.GetUID())
		o := connection.Observed{Name: tmpl, Object: obj.Object, Prefix: obj.GetAnnotations()[connection.AnnotationPrefix]}
		sn, _, _ := unstructured.NestedString(obj.Object, "spec", fieldWriteConnection, "name")
		sns, _, _ := unstructured.NestedString(obj.Object, "spec", fieldWriteConnection, "namespace")
		if sns == "" {
			sns = obj.GetNamespace()
		}
		if sn != "" && sns != "" {
			o.HasSecretRef = true
			k := secret.Key{Namespace: sns, Name: sn}
			keys = append(keys, k)
			if needsSecret(st.comp.Plan, tmpl) {
				secrets[len(out)] = k
			}
		}
		out = append(out, o)
	}
	// Record before reading, so that a Secret that changes after the read
	// requeues the XR.
	st.deps = tracker.Deps{Secrets: []secret.Key{st.key}, Composed: uids, Observed: keys, Pipeline: st.comp.Plan.Pipeline}
	if st.comp.Plan.Pipeline {
		st.deps.Secrets = append(st.deps.Secrets, staging.Key(r.staging, st.xr.GetUID()))
	}
	r.tracker.Track(st.target, st.deps)
	if st.comp.Plan.Pipeline {
		return out, r.readStaging(ctx, st)
	}
	for i, k := range secrets {
		if _, ok := r.tracker.Metadata(k); !ok {
			// It does not exist (yet): its creation requeues the XR.
			continue
		}
		s, err := r.client.GetSecret(ctx, k.Namespace, k.Name)
		if kerrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot get connection Secret %s of composed resource %q: %w", k, out[i].Name, err)
		}
		out[i].Secret = s.Data
		if out[i].Secret == nil {
			out[i].Secret = map[string][]byte{}
		}
	}
	return out, nil
}

// readStaging reads what a Pipeline XR's functions returned from its
// staging Secret. It is read even when the tracker's cache does not know it
// yet: the requeue that follows its creation may outrun the cache.
func (r *Reconciler) readStaging(ctx context.Context, st *xrState) error {
	k := staging.Key(r.staging, st.xr.GetUID())
	s, err := r.client.GetSecret(ctx, k.Namespace, k.Name)
	if kerrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot get staging Secret %s of %s %q: %w", k, st.xr.GetKind(), st.xr.GetName(), err)
	}
	if c := metav1.GetControllerOfNoCopy(s); c == nil || c.UID != st.xr.GetUID() {
		// Not this XR's: a Secret of the same name it must not trust.
		return nil
	}
	st.returned, st.staged = s.Data, true
	return nil
}

// contributes reports whether the resource of a template can contribute
// connection details: always when aggregating, otherwise when its template
// lists some. A pipeline's resources are always read: their Secrets are
// tracked, because the functions observe them.
func contributes(p connection.Plan, tmpl string) bool {
	if p.Aggregate || p.Pipeline {
		return true
	}
	for _, t := range p.Templates {
		if t.Name == tmpl {
			return len(t.Details) > 0
		}
	}
	return false
}

// needsSecret reports whether the connection details need the Secret of the
// template's resource: always when aggregating, otherwise when the template
// reads a key of it.
func needsSecret(p connection.Plan, tmpl string) bool {
	if p.Aggregate {
		return true
	}
	for _, t := range p.Templates {
		if t.Name != tmpl {
			continue
		}
		for _, d := range t.Details {
			if d.GetType() == v1.ConnectionDetailTypeFromConnectionSecretKey {
				return true
			}
		}
	}
	return false
}

// copyToClaim copies data to the Secret of the XR's claim, if it is bound
// to one that asks for it.
func (r *Reconciler) copyToClaim(ctx context.Context, st *xrState, data map[string][]byte) (bool, error) {
	apiVersion, _, _ := unstructured.NestedString(st.xr.Object, "spec", "claimRef", "apiVersion")
	kind, _, _ := unstructured.NestedString(st.xr.Object, "spec", "claimRef", "kind")
	ns, _, _ := unstructured.NestedString(st.xr.Object, "spec", "claimRef", "namespace")
	name, _, _ := unstructured.NestedString(st.xr.Object, "spec", "claimRef", "name")
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" || ns == "" || name == "" {
		return false, nil
	}
	claim, err := r.client.Get(ctx, gv.WithKind(kind), ns, name)
	if kerrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot get claim %s %s/%s: %w", kind, ns, name, err)
	}
	if bound, _, _ := unstructured.NestedString(claim.Object, "spec", "resourceRef", "name"); bound != st.xr.GetName() || claim.GetDeletionTimestamp() != nil {
		return false, nil
	}
	to, _, _ := unstructured.NestedString(claim.Object, "spec", fieldWriteConnection, "name")
	if to == "" {
		return false, nil
	}
	k := secret.Key{Namespace: ns, Name: to}
	deps := st.deps
	deps.Secrets = append(slices.Clone(st.deps.Secrets), k)
	r.tracker.Track(st.target, deps)
	wrote, err := r.store.Ensure(ctx, secret.Desired{Key: k, Owner: ownerRef(claim), Data: data})
	if err != nil || !wrote {
		return wrote, err
	}
	// Like Crossplane, the claim records when its Secret last changed.
	intent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": claim.GetAPIVersion(),
		"kind":       claim.GetKind(),
		"metadata":   map[string]any{"name": claim.GetName(), "namespace": claim.GetNamespace()},
		"status":     map[string]any{"connectionDetails": map[string]any{"lastPublishedTime": r.now().UTC().Format(time.RFC3339)}},
	}}
	if _, err := r.client.ApplyStatus(ctx, intent); err != nil {
		return true, fmt.Errorf("cannot apply the status of claim %s %s/%s: %w", kind, ns, name, err)
	}
	return true, nil
}

// condition returns the XR's ConnectionDetailsReady condition after a
// publication (or a pending one), and false if none should be written.
func (r *Reconciler) condition(st *xrState, res connection.Result, published bool) (common.Condition, bool) {
	if len(res.Missing) > 0 {
		msg := fmt.Sprintf("%s cannot provide the connection secret keys that CompositeResourceDefinition %q declares: %s",
			st.comp.Name, st.xrd.GetName(), strings.Join(res.Missing, ", "))
		return newCondition(corev1.ConditionFalse, ReasonMissingKeys, msg), true
	}
	_, had := conditionOf(st.xr, TypeConnectionDetailsReady)
	switch {
	case st.comp.Plan.Pipeline && !st.staged && (had || isReady(st.xr)):
		return newCondition(corev1.ConditionFalse, ReasonWaitingForKeys,
			fmt.Sprintf("Connection Secret %s waits for the connection details that the functions of %s return, which the renderer hands over after it renders the XR", st.key, st.comp.Name)), true
	case len(res.Absent) > 0 && (published || had):
		return newCondition(corev1.ConditionFalse, ReasonWaitingForKeys,
			fmt.Sprintf("Connection Secret %s waits for keys: %s", st.key, strings.Join(res.Absent, ", "))), true
	case !published && had:
		return newCondition(corev1.ConditionFalse, ReasonWaitingForKeys,
			fmt.Sprintf("Connection Secret %s waits for the connection Secrets of: %s", st.key, strings.Join(res.Pending, ", "))), true
	case published:
		return newCondition(corev1.ConditionTrue, ReasonPublished, fmt.Sprintf("Connection Secret %s is published", st.key)), true
	}
	return common.Condition{}, false
}

// fail records a failure on the XR's condition (and as a Warning event when
// the condition changes). A permanent failure is returned as reconcile.Terminal:
// only a change of the input can fix it, and that change is an event.
func (r *Reconciler) fail(ctx context.Context, st *xrState, reason common.ConditionReason, cause error, permanent bool) error {
	c := newCondition(corev1.ConditionFalse, reason, cause.Error())
	if err := r.writeStatus(ctx, st, c, true, false); err != nil {
		return err
	}
	if permanent {
		return reconcile.Terminal(cause)
	}
	return nil
}

// writeStatus applies the condition and lastPublishedTime (now if the XR's
// Secret changed) when they differ from the XR's, and records a Warning
// event when a failure condition is new.
func (r *Reconciler) writeStatus(ctx context.Context, st *xrState, want common.Condition, set, published bool) error {
	have, had := conditionOf(st.xr, TypeConnectionDetailsReady)
	last, _, _ := unstructured.NestedString(st.xr.Object, "status", "connectionDetails", "lastPublishedTime")
	if !set {
		if !had && !published {
			return nil
		}
		want, set = have, had
	}
	conditionChanged := set && (!had || !have.Equal(want))
	if !conditionChanged && !published {
		return nil
	}
	if had && have.Equal(want) {
		want.LastTransitionTime = have.LastTransitionTime
	}
	if published {
		last = r.now().UTC().Format(time.RFC3339)
	}
	status := map[string]any{}
	if set {
		status["conditions"] = []any{conditionMap(want)}
	}
	if last != "" {
		status["connectionDetails"] = map[string]any{"lastPublishedTime": last}
	}
	intent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": st.xr.GetAPIVersion(),
		"kind":       st.xr.GetKind(),
		"metadata":   map[string]any{"name": st.xr.GetName()},
		"status":     status,
	}}
	if _, err := r.client.ApplyStatus(ctx, intent); err != nil {
		return fmt.Errorf("cannot apply the status of %s %q: %w", st.xr.GetKind(), st.xr.GetName(), err)
	}
	if conditionChanged && want.Status != corev1.ConditionTrue && want.Reason != ReasonWaitingForKeys {
		r.rec.Event(st.xr, event.TypeWarning, string(want.Reason), want.Message)
	}
	return nil
}

// reportConflicts records a Warning event per key conflict when the XR's
// set of conflicts changed since this replica last reported it.
func (r *Reconciler) reportConflicts(st *xrState, cs []connection.Conflict) {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	uid := st.xr.GetUID()
	r.mu.Lock()
	prev, known := r.conflicts[uid]
	if len(r.conflicts) >= 16384 {
		r.conflicts = map[types.UID]string{}
	}
	r.conflicts[uid] = b.String()
	r.mu.Unlock()
	if (known && prev == b.String()) || (!known && len(cs) == 0) {
		return
	}
	for _, c := range cs {
		r.rec.Event(st.xr, event.TypeWarning, ReasonKeyConflict, c.String())
	}
}

// forget drops what is recorded for a gone XR.
func (r *Reconciler) forget(uid types.UID) {
	if uid == "" {
		return
	}
	r.tracker.Forget(uid)
	r.templates.forget(uid)
	r.mu.Lock()
	delete(r.conflicts, uid)
	r.mu.Unlock()
}

// templateMemo is a bounded map from XR UID and composed resource reference
// to the resource's template name. A composed resource keeps its template
// for life (its name is derived from it), so entries never go stale.
type templateMemo struct {
	mu  sync.Mutex
	max int
	m   map[types.UID]map[string]string
}

func newTemplateMemo(max int) *templateMemo {
	return &templateMemo{max: max, m: map[types.UID]map[string]string{}}
}

func (t *templateMemo) get(xr types.UID, ref string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tmpl, ok := t.m[xr][ref]
	return tmpl, ok
}

func (t *templateMemo) put(xr types.UID, ref, tmpl string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	refs := t.m[xr]
	if refs == nil {
		if len(t.m) >= t.max {
			t.m = map[types.UID]map[string]string{}
		}
		refs = map[string]string{}
		t.m[xr] = refs
	}
	refs[ref] = tmpl
}

func (t *templateMemo) forget(xr types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, xr)
}

func newCondition(s corev1.ConditionStatus, reason common.ConditionReason, msg string) common.Condition {
	const maxMessage = 2048
	if len(msg) > maxMessage {
		msg = msg[:maxMessage-3] + "..."
	}
	return common.Condition{Type: TypeConnectionDetailsReady, Status: s, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()}
}

// conditionOf returns the XR's condition of type t.
func conditionOf(xr *unstructured.Unstructured, t common.ConditionType) (common.Condition, bool) {
	cs, _, _ := unstructured.NestedSlice(xr.Object, "status", "conditions")
	for _, c := range cs {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != string(t) {
			continue
		}
		out := common.Condition{Type: t}
		s, _ := m["status"].(string)
		out.Status = corev1.ConditionStatus(s)
		reason, _ := m["reason"].(string)
		out.Reason = common.ConditionReason(reason)
		out.Message, _ = m["message"].(string)
		if ts, _ := m["lastTransitionTime"].(string); ts != "" {
			if p, err := time.Parse(time.RFC3339, ts); err == nil {
				out.LastTransitionTime = metav1.NewTime(p)
			}
		}
		return out, true
	}
	return common.Condition{}, false
}

func conditionMap(c common.Condition) map[string]any {
	m := map[string]any{
		"type":               string(c.Type),
		"status":             string(c.Status),
		"reason":             string(c.Reason),
		"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
	}
	if c.Message != "" {
		m["message"] = c.Message
	}
	return m
}

// isReady reports whether the XR's Ready condition is True.
func isReady(xr *unstructured.Unstructured) bool {
	c, ok := conditionOf(xr, common.TypeReady)
	return ok && c.Status == corev1.ConditionTrue
}

// ownerRef makes o the controller of a Secret.
func ownerRef(o *unstructured.Unstructured) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID(), Controller: &yes}
}
