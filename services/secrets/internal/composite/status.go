package composite

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/condition"
	"github.com/loomxr/loom/pkg/event"
	"github.com/loomxr/loom/pkg/reconcile"
	"github.com/loomxr/loom/services/secrets/internal/connection"
	"github.com/loomxr/loom/services/secrets/internal/kube"
)

// condition returns the XR's ConnectionDetailsReady condition after a
// publication (or a pending one), and false if none should be written.
func (r *Reconciler) condition(st *xrState, res connection.Result, published bool) (common.Condition, bool) {
	if len(res.Missing) > 0 {
		msg := fmt.Sprintf("%s cannot provide the connection secret keys that CompositeResourceDefinition %q declares: %s",
			st.comp.Name, st.xrd.GetName(), strings.Join(res.Missing, ", "))
		return newCondition(corev1.ConditionFalse, ReasonMissingKeys, msg), true
	}
	_, had := condition.Find(condition.Observed(st.xr), TypeConnectionDetailsReady)
	switch {
	case st.comp.Plan.Pipeline && !st.staged && (had || condition.IsTrue(st.xr, common.TypeReady)):
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
	observed := condition.Observed(st.xr)
	have, had := condition.Find(observed, TypeConnectionDetailsReady)
	last, _, _ := unstructured.NestedString(st.xr.Object, "status", "connectionDetails", "lastPublishedTime")
	if !set {
		if !had && !published {
			return nil
		}
		want, set = have, had
	}
	if set && !had && !published && want.Status == corev1.ConditionTrue && !wroteStatus(st.xr) {
		// Crossplane published this XR's Secret before Loom took over
		// (the secrets service never wrote its status), and the Secret
		// is as Loom would write it: the condition, Loom's addition, is
		// not worth a write on its own and comes with the next
		// publication.
		return nil
	}
	conditionChanged := set && (!had || !have.Equal(want))
	if !conditionChanged && !published {
		return nil
	}
	want = condition.Settle(observed, metav1.NewTime(r.now()), want)[0]
	if published {
		last = r.now().UTC().Format(time.RFC3339)
	}
	status := map[string]any{}
	if set {
		status["conditions"] = condition.List(want)
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

// wroteStatus reports whether the secrets service ever applied xr's status.
func wroteStatus(xr *unstructured.Unstructured) bool {
	for _, e := range xr.GetManagedFields() {
		if e.Manager == kube.FieldManager && e.Subresource == "status" {
			return true
		}
	}
	return false
}

// reportConflicts records a Warning event per key conflict when the XR's
// set of conflicts changed since this replica last reported it.
func (r *Reconciler) reportConflicts(st *xrState, cs []connection.Conflict) {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	if !r.memo.conflictsChanged(st.xr.GetUID(), b.String()) {
		return
	}
	for _, c := range cs {
		r.rec.Event(st.xr, event.TypeWarning, ReasonKeyConflict, c.String())
	}
}

func newCondition(s corev1.ConditionStatus, reason common.ConditionReason, msg string) common.Condition {
	const maxMessage = 2048
	if len(msg) > maxMessage {
		msg = msg[:maxMessage-3] + "..."
	}
	return common.Condition{Type: TypeConnectionDetailsReady, Status: s, Reason: reason, Message: msg}
}
