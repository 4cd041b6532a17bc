// Package event declares what the renderer's reconcilers need to record
// Kubernetes Events about the objects they reconcile, and the reasons they
// use. The renderer emits an Event only when something happened (a
// composition was selected, a composed resource was deleted, a new error
// appeared), never on a render that changed nothing: Events are API writes
// too. The recorder itself is pkg/event's (notes cut to the API server's
// limit); main.go passes its WithActions view.
package event

import (
	"k8s.io/apimachinery/pkg/runtime"

	kitevent "github.com/loomxr/loom/pkg/event"
)

// Event types.
const (
	TypeNormal  = kitevent.TypeNormal
	TypeWarning = kitevent.TypeWarning
)

// Reasons of the renderer's Events.
const (
	ReasonSelectComposition   = "SelectComposition"
	ReasonComposeResources    = "ComposeResources"
	ReasonTakeOwnership       = "TakeFieldOwnership"
	ReasonDeleteResources     = "DeleteComposedResources"
	ReasonInvalidDefinition   = "InvalidDefinition"
	ReasonEstablishDefinition = "EstablishDefinition"
	ReasonDeleteDefinition    = "DeleteDefinition"
	ReasonCreateRevision      = "CreateRevision"
)

// A Recorder records an Event about an object, naming what was being done
// (the action). Implementations must not block on the API server;
// pkg/event's Actions is the one main.go passes.
type Recorder interface {
	Event(obj runtime.Object, eventType, reason, action, message string)
}

// Nop is a Recorder that records nothing.
type Nop struct{}

// Event does nothing.
func (Nop) Event(runtime.Object, string, string, string, string) {}
