package eventsv1

// Reasons of the watcher's events that a receiver acts on beyond logging
// them (Event.Reason is otherwise free text for logs and traces).
const (
	// ReasonComposedTurnedReady: a composed resource's status changed and
	// it is Ready now. Target is its XR.
	ReasonComposedTurnedReady = "composed resource turned Ready"
	// ReasonComposedStatusChanged: a composed resource's status, and
	// nothing else of it, changed. Target is its XR.
	ReasonComposedStatusChanged = "composed resource status changed"
)

// StatusNews reports whether ev says that the status of a composed resource
// of its target changed: someone, typically its provider, has looked at it.
func StatusNews(ev *Event) bool {
	switch ev.GetReason() {
	case ReasonComposedTurnedReady, ReasonComposedStatusChanged:
		return ev.GetObject() != nil && ev.GetTarget() != nil && ev.GetObject().GetUid() != ev.GetTarget().GetUid()
	}
	return false
}
