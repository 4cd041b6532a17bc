package object

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationReady is kept on cached objects the watcher holds in full other
// than XRs (whose AnnotationStatus says more): the status of the object's
// Ready condition ("True", "False", "Unknown"), empty when it has none. Like
// the digest it exists only in the watcher's cache. Comparing two versions
// tells a composed resource turning Ready (TurnedReady) from one whose
// status changed in another way.
const AnnotationReady = "loom.dev/watcher-ready"

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
	ready := ""
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			ready, _ = m["status"].(string)
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
