package composite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/condition"
	"github.com/loomxr/loom/pkg/event"
	"github.com/loomxr/loom/pkg/reconcile"
	"github.com/loomxr/loom/pkg/xcrd"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/secrets/internal/connection"
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

// writeStatus hands the condition and lastPublishedTime (now if the XR's
// Secret changed) over to the renderer, which writes them to the XR's status
// with the rest of it, when they differ from what the XR shows; it records a
// Warning event when it hands over a new failure condition. A hand-over is
// not repeated until the XR changes without showing it.
func (r *Reconciler) writeStatus(ctx context.Context, st *xrState, want common.Condition, set, published bool) error {
	uid := st.xr.GetUID()
	observed := condition.Observed(st.xr)
	have, had := condition.Find(observed, TypeConnectionDetailsReady)
	shown, _, _ := unstructured.NestedString(st.xr.Object, "status", "connectionDetails", "lastPublishedTime")
	prev, handed := r.memo.handedOver(uid)
	last := shown
	if published {
		last = r.now().UTC().Format(time.RFC3339)
	} else if handed && xcrd.PublishedAfter(prev.lastPublished, shown) {
		// Handed over, not shown yet.
		last = prev.lastPublished
	}
	if !set {
		if !had && last == shown {
			return nil
		}
		want, set = have, had
	}
	if set && !had && last == shown && want.Status == corev1.ConditionTrue && !handed {
		// Crossplane published this XR's Secret before Loom took over
		// (Loom never handed a publication of it over), and the Secret
		// is as Loom would write it: the condition, Loom's addition, is
		// not worth a write on its own and comes with the next
		// publication.
		return nil
	}
	conditionChanged := set && (!had || !have.Equal(want))
	if !conditionChanged && last == shown {
		return nil
	}
	p := &eventsv1.Publication{}
	if set {
		p.Status, p.Reason, p.Message = string(want.Status), string(want.Reason), want.Message
	}
	if last != "" {
		if t, err := time.Parse(time.RFC3339, last); err == nil {
			p.LastPublishedTime = timestamppb.New(t)
		}
	}
	key := strings.Join([]string{p.Status, string(p.Reason), p.Message, last}, "\x00")
	if handed && prev.key == key && prev.xrVersion == st.xr.GetResourceVersion() {
		// Handed over already; the renderer has not written the XR's
		// status since.
		return nil
	}
	if err := r.tracker.HandOver(ctx, st.target, claimNamespace(st.xr), p); err != nil {
		return err
	}
	r.memo.handOvers.Add(uid, handOver{key: key, lastPublished: last, xrVersion: st.xr.GetResourceVersion()})
	if conditionChanged && want.Status != corev1.ConditionTrue && want.Reason != ReasonWaitingForKeys && (!handed || prev.key != key) {
		r.rec.Event(st.xr, event.TypeWarning, string(want.Reason), want.Message)
	}
	return nil
}

// claimNamespace is the namespace of the XR's claim, or "".
func claimNamespace(xr *unstructured.Unstructured) string {
	ns, _, _ := unstructured.NestedString(xr.Object, "spec", "claimRef", "namespace")
	return ns
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
