package composite

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/pkg/apis/common"
	loomv1alpha1 "github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
	"github.com/loomxr/loom/pkg/apply"
	"github.com/loomxr/loom/pkg/condition"
	"github.com/loomxr/loom/pkg/telemetry"
	"github.com/loomxr/loom/pkg/xcrd"
	"github.com/loomxr/loom/services/renderer/internal/event"
	"github.com/loomxr/loom/services/renderer/internal/kube"
)

// Reasons of the per-resource summary.
const (
	reasonAvailable      = "Available"
	reasonCreating       = "Creating"
	reasonNotReady       = "ReadinessCheckFailed"
	reasonTemplateFailed = "RenderFailed"
	reasonApplyFailed    = "ApplyFailed"
	reasonKept           = "Unchanged"
)

// writeStatus applies the XR's status after a render, unless the XR already
// shows it: Synced from err, Ready from the composed resources, the status
// fields the render writes, Loom's summary and the publication of the XR's
// connection Secret (see Publication). After a render that failed as
// a whole, the fields the renderer owns keep their observed values and only
// Synced changes. A new error is also recorded as a Warning Event.
func (r *Reconciler) writeStatus(ctx context.Context, st *state, out *rendered, err error) error {
	xr := st.xr
	observed := condition.Observed(xr)
	// Like Crossplane v1.20, no observedGeneration on an XR's conditions.
	synced := syncedCondition(out, err)
	want := []common.Condition{synced}
	status := map[string]any{}

	if out.failed {
		owned := ownedStatus(xr)
		have, _, _ := unstructured.NestedMap(xr.Object, "status")
		for k := range owned.fields {
			if k == xcrd.FieldConditions || k == xcrd.FieldConnectionDetails {
				continue
			}
			if v, ok := have[k]; ok {
				status[k] = v
			}
		}
		for _, t := range owned.conditions {
			if t == common.TypeSynced || t == TypeConnectionDetailsReady {
				continue
			}
			if c, ok := condition.Find(observed, t); ok {
				want = append(want, c)
			}
		}
	} else {
		for k, v := range out.status {
			status[k] = v
		}
		want = append(want, readyCondition(out))
		want = append(want, out.conditions...)
		status[xcrd.FieldLoom] = summary(out)
		// Only LegacyCluster XRs have claims (and the field).
		if len(out.claimConditionTypes) > 0 && st.xrd.GetScope().Legacy() {
			types := make([]any, 0, len(out.claimConditionTypes))
			for _, t := range out.claimConditionTypes {
				types = append(types, t)
			}
			status[xcrd.FieldClaimConditionTypes] = types
		}
	}
	if len(out.watched) > 0 {
		status[xcrd.FieldWatchedResourceRefs] = watchedRefs(out.watched)
	}
	pub, handed := r.publication(xr)
	if pub.Condition != nil {
		want = append(want, *pub.Condition)
	}
	if pub.LastPublishedTime != "" {
		status[xcrd.FieldConnectionDetails] = map[string]any{"lastPublishedTime": pub.LastPublishedTime}
	}

	want = condition.Settle(observed, metav1.Now(), want...)
	status[xcrd.FieldConditions] = condition.List(want...)
	meta := map[string]any{"name": xr.GetName()}
	if xr.GetNamespace() != "" {
		meta["namespace"] = xr.GetNamespace()
	}
	intent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": xr.GetAPIVersion(),
		"kind":       xr.GetKind(),
		"metadata":   meta,
		"status":     status,
	}}
	change, aerr := apply.Changes(xr, intent, kube.FieldManager, "status")
	if aerr != nil {
		return aerr
	}
	if change {
		if change, aerr = loomAdditionsOnly(xr, intent); aerr != nil {
			return aerr
		}
	}
	if !change {
		if handed {
			r.memo.shown(xr.GetUID())
		}
		return nil
	}
	got, aerr := r.client.ApplyStatus(ctx, intent)
	if aerr != nil {
		return fmt.Errorf("cannot apply status of %s %q: %w", xr.GetKind(), xr.GetName(), aerr)
	}
	if handed {
		r.memo.shown(xr.GetUID())
	}
	r.memo.wroteStatus(xr.GetUID(), r.now())
	if r.log.Enabled(ctx, slog.LevelDebug) {
		ready := readyCondition(out)
		r.log.Debug("Wrote composite resource status", "kind", xr.GetKind(), "name", xr.GetName(),
			"ready", ready.Status, "reason", ready.Reason, "message", ready.Message, "first", !hadReady(xr), "handedOver", handed, "error", err)
	}
	if becameReady(observed, want) {
		telemetry.ObserveCompositeReady(ctx, xr.GetKind(), xr.GetCreationTimestamp().Time)
	}
	if prev, _ := condition.Find(observed, common.TypeSynced); err != nil && prev.Message != synced.Message {
		r.rec.Event(xr, event.TypeWarning, event.ReasonComposeResources, "Compose", synced.Message)
	}
	st.xr = got
	return nil
}

// statusWait returns how much longer the XR's first status waits for the
// XR to be Ready (see WithFirstStatusWait and WithUnobservedWait), or zero
// when the status is written now: the render failed or watches resources,
// the XR is Ready or has had a Ready condition, or the wait is over. The
// wait counts from the newest of the XR's and its composed resources'
// creation: an XR whose first render came late (it waited in a backlog)
// gives the resources that render creates the same time to turn Ready as
// any other.
func (r *Reconciler) statusWait(st *state, out *rendered, err error) time.Duration {
	if r.firstStatusWait <= 0 || !firstUnready(st, out, err) {
		return 0
	}
	since := st.xr.GetCreationTimestamp().Time
	unobserved := false
	for _, c := range out.resources {
		if c.observed == nil {
			continue
		}
		if t := c.observed.GetCreationTimestamp().Time; t.After(since) {
			since = t
		}
		if !c.ready && !hasStatus(c.observed) {
			unobserved = true
		}
	}
	wait := r.firstStatusWait
	if unobserved {
		wait = max(wait, r.unobservedWait)
	}
	return wait - r.now().Sub(since)
}

// hasStatus reports whether a composed resource has a status: its provider
// has looked at it.
func hasStatus(u *unstructured.Unstructured) bool {
	s, _ := u.Object["status"].(map[string]any)
	return len(s) > 0
}

// firstUnready reports whether a render that succeeded would give the XR
// its first Ready condition, and say that the XR is not Ready.
func firstUnready(st *state, out *rendered, err error) bool {
	return !hadReady(st.xr) && unready(out, err)
}

// hadReady reports whether xr has a Ready condition.
func hadReady(xr *unstructured.Unstructured) bool {
	_, had := condition.Find(condition.Observed(xr), common.TypeReady)
	return had
}

// stillUnready reports whether a render that succeeded would say that the
// XR is not Ready and it was not Ready before either (or had no Ready
// condition): progress that a newer render may restate. A turn from Ready
// to not Ready is news, never left to a later render.
func stillUnready(st *state, out *rendered, err error) bool {
	c, had := condition.Find(condition.Observed(st.xr), common.TypeReady)
	return (!had || c.Status != corev1.ConditionTrue) && unready(out, err)
}

// unready reports whether a render succeeded and would say that the XR is
// not Ready.
func unready(out *rendered, err error) bool {
	return err == nil && !out.failed && len(out.watched) == 0 && readyCondition(out).Status != corev1.ConditionTrue
}

// loomAdditionsOnly reports whether applying intent would still change the
// status of xr, an XR the renderer has never written (one Crossplane
// composed, say), if Loom's own status summary (status.loom, which
// Crossplane ignores) were left out. An adopted XR whose Crossplane status
// already says what Loom would say costs no write; the summary follows with
// the XR's next real change. XRs the renderer wrote before compare whole.
func loomAdditionsOnly(xr, intent *unstructured.Unstructured) (bool, error) {
	if _, wrote, err := apply.Owned(xr, kube.FieldManager, "status"); err != nil || wrote {
		return true, err
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(xr.Object, "status", xcrd.FieldLoom); ok {
		return true, nil
	}
	without := intent.DeepCopy()
	unstructured.RemoveNestedField(without.Object, "status", xcrd.FieldLoom)
	return apply.Changes(xr, without, kube.FieldManager, "status")
}

// becameReady reports whether want turns the Ready condition True over an
// observed one that was not.
func becameReady(observed, want []common.Condition) bool {
	before, _ := condition.Find(observed, common.TypeReady)
	after, ok := condition.Find(want, common.TypeReady)
	return ok && after.Status == corev1.ConditionTrue && before.Status != corev1.ConditionTrue
}

// owned is what the renderer owns of an XR's status.
type owned struct {
	fields     map[string]bool
	conditions []common.ConditionType
}

// ownedStatus returns the top-level status fields and the condition types
// the renderer applied to the XR before.
func ownedStatus(xr *unstructured.Unstructured) owned {
	return owned{fields: ownedStatusFields(xr), conditions: condition.Owned(xr, kube.FieldManager)}
}

// ownedStatusFields returns the top-level status fields the renderer
// applied to the XR before.
func ownedStatusFields(xr *unstructured.Unstructured) map[string]bool {
	fields := map[string]bool{}
	tree, ok, err := apply.Owned(xr, kube.FieldManager, "status")
	if err != nil || !ok {
		return fields
	}
	st, _ := tree["f:status"].(map[string]any)
	for k := range st {
		if name, ok := strings.CutPrefix(k, "f:"); ok {
			fields[name] = true
		}
	}
	return fields
}

func equalJSON(a, b any) bool { return apply.Equal(a, b) }

// unreadyListed is how many unready resources the Ready condition names,
// crossplane-runtime's DefaultFirstN.
const unreadyListed = 3

// readyCondition is the XR's Ready condition: Available when every composed
// resource is ready (or a function said the XR is), else Creating naming the
// first three unready resources.
func readyCondition(out *rendered) common.Condition {
	var unready []string
	for _, c := range out.resources {
		if !c.ready {
			unready = append(unready, c.name)
		}
	}
	if out.ready != nil {
		if *out.ready {
			return common.Available()
		}
		if len(unready) == 0 {
			return common.Creating().WithMessage("The composition function pipeline marked the composite resource not ready")
		}
	}
	if len(unready) == 0 {
		return common.Available()
	}
	slices.Sort(unready)
	return common.Creating().WithMessage("Unready resources: " + condition.FirstNAndSomeMore(unreadyListed, unready))
}

// summary is Loom's status.loom: one entry per composed resource, unready
// ones first, then by name, at most MaxResourceSummaries; the rest counted.
func summary(out *rendered) map[string]any {
	type entry struct {
		s     loomv1alpha1.ComposedResourceSummary
		ready bool
	}
	entries := make([]entry, 0, len(out.resources))
	for _, c := range out.resources {
		s := loomv1alpha1.ComposedResourceSummary{ResourceName: c.name, Ready: string(corev1.ConditionFalse)}
		obj := c.observed
		if obj == nil {
			obj = c.desired
		}
		if obj != nil {
			s.APIVersion, s.Kind, s.Name, s.Namespace = obj.GetAPIVersion(), obj.GetKind(), obj.GetName(), obj.GetNamespace()
		}
		switch {
		case c.applyErr != nil:
			s.Reason, s.Message = reasonApplyFailed, c.applyErr.Error()
		case c.err != nil:
			s.Reason, s.Message = reasonTemplateFailed, c.message
		case c.ready:
			s.Ready, s.Reason = string(corev1.ConditionTrue), reasonAvailable
		case c.observed == nil && c.desired == nil:
			s.Reason, s.Message = reasonKept, c.message
		case c.observed == nil:
			s.Reason, s.Message = reasonCreating, c.message
		default:
			s.Reason, s.Message = readyReason(c.observed), c.message
		}
		if len(s.Message) > loomv1alpha1.MaxSummaryMessageLength {
			s.Message = s.Message[:loomv1alpha1.MaxSummaryMessageLength-3] + "..."
		}
		entries = append(entries, entry{s: s, ready: c.ready})
	}
	slices.SortStableFunc(entries, func(a, b entry) int {
		if a.ready != b.ready {
			if !a.ready {
				return -1
			}
			return 1
		}
		return strings.Compare(a.s.ResourceName, b.s.ResourceName)
	})
	out2 := map[string]any{}
	n := min(len(entries), loomv1alpha1.MaxResourceSummaries)
	list := make([]any, 0, n)
	for _, e := range entries[:n] {
		m := map[string]any{"resourceName": e.s.ResourceName, "apiVersion": e.s.APIVersion, "kind": e.s.Kind, "ready": e.s.Ready}
		for k, v := range map[string]string{"name": e.s.Name, "namespace": e.s.Namespace, "reason": e.s.Reason, "message": e.s.Message} {
			if v != "" {
				m[k] = v
			}
		}
		list = append(list, m)
	}
	if len(list) > 0 {
		out2["resources"] = list
	}
	if omitted := len(entries) - n; omitted > 0 {
		out2["omittedResources"] = int64(omitted)
	}
	return out2
}

// readyReason is the reason of an object's Ready condition, or
// ReadinessCheckFailed when it has none.
func readyReason(u *unstructured.Unstructured) string {
	if c, ok := condition.Find(condition.Observed(u), common.TypeReady); ok && c.Reason != "" {
		return string(c.Reason)
	}
	return reasonNotReady
}

// watchedRefs is the JSON form of status.watchedResourceRefs.
func watchedRefs(refs []loomv1alpha1.WatchedResourceRef) []any {
	out := make([]any, 0, len(refs))
	for _, r := range refs {
		m := map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "name": r.Name}
		if r.Namespace != "" {
			m["namespace"] = r.Namespace
		}
		if r.Step != "" {
			m["step"] = r.Step
		}
		out = append(out, m)
	}
	return out
}

// progressWait returns how much longer a status that only restates that the
// XR is still not Ready (another resource turned Ready, say) waits for the
// XR's next change, or zero when it is written now: such progress is
// written at most once per first-status wait (see WithFirstStatusWait) after
// this replica's last status write of the XR, and folds into the XR's next
// status, Ready usually, when that comes sooner. The first status, a failed
// render, a render that succeeds after a failed one (Synced turns True),
// and a turn to or from Ready are written at once.
func (r *Reconciler) progressWait(st *state, out *rendered, err error) time.Duration {
	if r.firstStatusWait <= 0 || !hadReady(st.xr) || !stillUnready(st, out, err) || !condition.IsTrue(st.xr, common.TypeSynced) {
		return 0
	}
	last, ok := r.memo.statusWritten(st.xr.GetUID())
	if !ok {
		return 0
	}
	return r.firstStatusWait - r.now().Sub(last)
}

// wroteStatus records that this replica wrote the status of the XR uid at t.
func (m *memo) wroteStatus(uid types.UID, t time.Time) { m.written.Add(uid, t) }

// statusWritten returns when this replica last wrote the status of the XR
// uid.
func (m *memo) statusWritten(uid types.UID) (time.Time, bool) {
	v, ok := m.written.Get(uid)
	if !ok {
		return time.Time{}, false
	}
	return v.(time.Time), true //nolint:forcetypeassert // Only times are stored.
}
