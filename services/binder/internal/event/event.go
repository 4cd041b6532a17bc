// Package event records Kubernetes events about the objects the binder
// works on. The binder records an event only when something happened: a
// composite resource was bound, deleted or released, or a failure changed an
// object's conditions. Each event is an API write, so nothing is recorded for
// a reconcile that changed nothing.
package event

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Event types.
const (
	TypeNormal  = corev1.EventTypeNormal
	TypeWarning = corev1.EventTypeWarning
)

// A Recorder records an event about an object. Recording never fails the
// caller: events are best effort.
type Recorder interface {
	// Event records an event of type eventType (TypeNormal or TypeWarning)
	// about obj, with a CamelCase reason and a human-readable message.
	Event(obj runtime.Object, eventType, reason, message string)
}

// A RecorderFn is a function that satisfies Recorder.
type RecorderFn func(obj runtime.Object, eventType, reason, message string)

// Event calls fn.
func (fn RecorderFn) Event(obj runtime.Object, eventType, reason, message string) {
	fn(obj, eventType, reason, message)
}

// Nop is a Recorder that records nothing.
var Nop Recorder = RecorderFn(func(runtime.Object, string, string, string) {}) //nolint:gochecknoglobals // A stateless default.

// APIRecorder records events.k8s.io events through an events.EventRecorder
// (which aggregates repeats into series and writes asynchronously).
type APIRecorder struct {
	rec events.EventRecorder
}

// NewAPIRecorder returns a Recorder that records through rec.
func NewAPIRecorder(rec events.EventRecorder) *APIRecorder { return &APIRecorder{rec: rec} }

// Event records an event about obj; the action is the reason.
func (r *APIRecorder) Event(obj runtime.Object, eventType, reason, message string) {
	r.rec.Eventf(obj, nil, eventType, reason, reason, "%s", truncate(message))
}

// The API server rejects event notes longer than 1 kB.
func truncate(s string) string {
	const max = 1000
	if len(s) <= max {
		return s
	}
	return fmt.Sprintf("%s...", s[:max-3])
}
