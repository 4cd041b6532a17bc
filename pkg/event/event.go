// Package event records Kubernetes events (events.k8s.io) about the objects
// Loom's services work on. A service records an event only when something
// happened (an object was bound, created or deleted, or a failure changed an
// object's conditions): each event is an API write, so nothing is recorded
// for a reconcile that changed nothing.
//
// Every note is cut to NoteLimit bytes, on a rune boundary and with a marker,
// because the API server rejects a longer one and the event is then lost.
// Messages are the caller's and must be deterministic (sorted maps, no
// timestamps), so that repeats aggregate into one series.
package event

import (
	"context"
	"fmt"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
)

// Event types.
const (
	TypeNormal  = corev1.EventTypeNormal
	TypeWarning = corev1.EventTypeWarning
)

// NoteLimit is the longest event note, in bytes, that the API server
// accepts.
const NoteLimit = 1024

// truncated ends a note that was cut.
const truncated = " [truncated]"

// A Recorder records an event about an object. Recording never fails the
// caller and never blocks on the API server: events are best effort.
type Recorder interface {
	// Event records an event of type eventType (TypeNormal or TypeWarning)
	// about obj, with a CamelCase reason (also its action) and a
	// human-readable message.
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

// APIRecorder records events through an events.EventRecorder, which
// aggregates repeats into series and writes asynchronously. It is safe for
// concurrent use.
type APIRecorder struct {
	rec events.EventRecorder
}

// NewAPIRecorder returns a Recorder that records through rec.
func NewAPIRecorder(rec events.EventRecorder) *APIRecorder { return &APIRecorder{rec: rec} }

// Event records an event about obj whose action is its reason.
func (r *APIRecorder) Event(obj runtime.Object, eventType, reason, message string) {
	r.Action(obj, eventType, reason, reason, message)
}

// Action records an event about obj with an action of its own (what was
// being done: "Create", "Delete", "RunFunction").
func (r *APIRecorder) Action(obj runtime.Object, eventType, reason, action, message string) {
	r.rec.Eventf(obj, nil, eventType, reason, action, "%s", Truncate(message))
}

// Actions is an APIRecorder seen by callers that name an action with each
// event: its Event method takes the action before the message.
type Actions struct{ r *APIRecorder }

// WithActions returns r as Actions.
func (r *APIRecorder) WithActions() Actions { return Actions{r: r} }

// Event records an event about obj with the supplied action.
func (a Actions) Event(obj runtime.Object, eventType, reason, action, message string) {
	a.r.Action(obj, eventType, reason, action, message)
}

// Truncate returns note cut to at most NoteLimit bytes: a longer note keeps
// as many whole runes as fit before a " [truncated]" marker.
func Truncate(note string) string {
	if len(note) <= NoteLimit {
		return note
	}
	cut := NoteLimit - len(truncated)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + truncated
}

// StartRecorder starts recording events to the API server through cs's
// events.k8s.io/v1 API, reported by component (a service's field manager,
// say), and returns the recorder and a function that stops recording,
// flushing what is queued. Recording runs until stop is called or ctx ends.
func StartRecorder(ctx context.Context, cs kubernetes.Interface, component string) (*APIRecorder, func(), error) {
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, nil, fmt.Errorf("cannot start recording events: %w", err)
	}
	return NewAPIRecorder(b.NewRecorder(runtime.NewScheme(), component)), b.Shutdown, nil
}
