// Package event records Kubernetes Events about the objects the renderer
// reconciles. The renderer emits an Event only when something happened
// (a composition was selected, a composed resource was deleted, a new error
// appeared), never on a render that changed nothing: Events are API writes
// too.
package event

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Event types.
const (
	TypeNormal  = "Normal"
	TypeWarning = "Warning"
)

// Reasons of the renderer's Events.
const (
	ReasonSelectComposition   = "SelectComposition"
	ReasonComposeResources    = "ComposeResources"
	ReasonDeleteResources     = "DeleteComposedResources"
	ReasonInvalidDefinition   = "InvalidDefinition"
	ReasonEstablishDefinition = "EstablishDefinition"
	ReasonDeleteDefinition    = "DeleteDefinition"
	ReasonCreateRevision      = "CreateRevision"
)

// A Recorder records an Event about an object. Implementations must not
// block on the API server.
type Recorder interface {
	Event(obj runtime.Object, eventType, reason, action, message string)
}

// Nop is a Recorder that records nothing.
type Nop struct{}

// Event does nothing.
func (Nop) Event(runtime.Object, string, string, string, string) {}

// APIRecorder records Events through the events.k8s.io API.
type APIRecorder struct {
	rec events.EventRecorder
}

// NewAPIRecorder returns a Recorder writing through rec, which batches and
// sends Events asynchronously.
func NewAPIRecorder(rec events.EventRecorder) *APIRecorder { return &APIRecorder{rec: rec} }

// Event records an Event. The message is not a format string.
func (r *APIRecorder) Event(obj runtime.Object, eventType, reason, action, message string) {
	r.rec.Eventf(obj, nil, eventType, reason, action, "%s", message)
}
