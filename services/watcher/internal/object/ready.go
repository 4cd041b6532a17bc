package object

import (
	"hash/fnv"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationReady is kept on cached objects the watcher holds in full other
// than XRs (whose AnnotationStatus says more): the status of the object's
// Ready condition ("True", "False", "Unknown"), empty when it has none. Like
// the digest it exists only in the watcher's cache. Comparing two versions
// tells a composed resource turning Ready (TurnedReady) from one whose
// status changed in another way.
const AnnotationReady = "loom.dev/watcher-ready"

// AnnotationStatusFields is kept, like AnnotationReady, on cached objects
// the watcher holds in full other than XRs: a hash of the object's status
// without its conditions. Comparing two versions tells a change of the
// conditions alone (a provider's Ready and Synced) from a change of what a
// connection detail of type FromFieldPath may read (status.atProvider,
// say). Like the digest it exists only in the watcher's cache.
const AnnotationStatusFields = "loom.dev/watcher-status-fields"

// AnnotationReadyCondition is kept, like AnnotationReady, on cached objects
// the watcher holds in full other than XRs: a hash of the status, reason and
// message of the object's Ready condition. The renderer reads those of a
// composed resource (its default readiness check, and the XR's summary of
// resources not Ready: status.loom.resources), so comparing two versions
// tells a change the renderer sees from one it sees only where its
// Composition reads the resource's status (AnnotationReadsComposedStatus).
// Like the digest it exists only in the watcher's cache.
const AnnotationReadyCondition = "loom.dev/watcher-ready-condition"

// readyCondition returns the AnnotationReadyCondition value of an object. An
// object that was cached already (it has the annotation and no status)
// keeps its value.
func readyCondition(u *unstructured.Unstructured) string {
	status, ok := u.Object["status"].(map[string]any)
	if v, has := u.GetAnnotations()[AnnotationReadyCondition]; !ok && has {
		return v
	}
	ready := readyConditionIn(status)
	h := fnv.New64a()
	for _, k := range [...]string{"status", "reason", "message"} {
		hashValue(h, ready[k])
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// ReadyConditionChanged reports whether a change from old to cur of one
// object changed the status, reason or message of its Ready condition, or
// may have: it is true when either version was not cached in full.
func ReadyConditionChanged(old, cur Meta) bool {
	return old.ReadyCondition == "" || cur.ReadyCondition == "" || old.ReadyCondition != cur.ReadyCondition
}

// statusFields returns the AnnotationStatusFields value of an object. An
// object that was cached already (it has the annotation and no status)
// keeps its value.
func statusFields(u *unstructured.Unstructured) string {
	status, ok := u.Object["status"].(map[string]any)
	if v, has := u.GetAnnotations()[AnnotationStatusFields]; !ok && has {
		return v
	}
	// No status and a status of conditions alone are the same.
	h := fnv.New64a()
	hashWithout(h, status, []string{"conditions"})
	return strconv.FormatUint(h.Sum64(), 16)
}

// StatusFieldsChanged reports whether a change from old to cur of one
// object changed its status outside its conditions, or may have: it is true
// when either version was not cached in full.
func StatusFieldsChanged(old, cur Meta) bool {
	return old.StatusFields == "" || cur.StatusFields == "" || old.StatusFields != cur.StatusFields
}

// readyStatus returns the AnnotationReady value of an object. An object that
// was cached already (it has the annotation and no status) keeps its value.
func readyStatus(u *unstructured.Unstructured) string {
	status, ok := u.Object["status"].(map[string]any)
	if !ok {
		return u.GetAnnotations()[AnnotationReady]
	}
	return readyIn(status)
}

// readyIn returns the status of the Ready condition in an object's status
// (the last one, should there be several), empty when it has none.
func readyIn(status map[string]any) string {
	ready, _ := readyConditionIn(status)["status"].(string)
	return ready
}

// readyConditionIn returns the Ready condition in an object's status (the
// last one, should there be several), nil when it has none.
func readyConditionIn(status map[string]any) map[string]any {
	var ready map[string]any
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			ready = m
		}
	}
	return ready
}

// TurnedReady reports whether a change from old to cur of one object turned
// its Ready condition's status True. It is false for kinds the watcher does
// not cache in full, whose status it never sees.
func TurnedReady(old, cur Meta) bool {
	return old.UID == cur.UID && cur.Ready == "True" && old.Ready != "True"
}
