// Package event records Kubernetes events about the composite resources
// (XRs) whose connection Secrets the secrets service publishes. Each event
// is an API write, so the service records one only when something happened:
// a failure that changed the XR's condition, or a new set of key conflicts.
// Event messages name keys, templates and Secrets, never values.
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
	const limit = 1000
	if len(s) <= limit {
		return s
	}
	return fmt.Sprintf("%s...", s[:limit-3])
}
