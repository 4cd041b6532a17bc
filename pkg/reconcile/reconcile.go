// Package reconcile is the contract between Loom's message handlers and the
// worker runtime that calls them (package bus), after controller-runtime's
// reconcile package: a Request names an object and never carries its state,
// a Result says when to come back, and a Terminal error says "do not retry".
//
// Domain packages (a service's internal/ packages) speak only this contract;
// the bus adapts it to acknowledgements:
//
//   - (Result{}, nil): done; the request is acknowledged.
//   - Result.Requeue or Result.RequeueAfter, nil error: handle the target
//     again (after RequeueAfter, or after a short default delay), even if no
//     new event arrives. A requeue is not a failure and does not count as a
//     delivery. The newest run's result is the one that holds: a run that
//     succeeds asking for no requeue ends the requeues earlier runs of the
//     target asked for, as a newer event does for a run it supersedes. A
//     handler that needs a timer asks for it on every run that needs it.
//   - a non-terminal error: retry with exponential backoff, until the
//     runtime's delivery limit, then dead-letter.
//   - Terminal(err): dead-letter at once, never retry. A handler should have
//     recorded the failure on the object (a condition) first, so that a user
//     can act on it; a change of the object brings a new request.
//
// A failure the user must fix that a handler has already reported on the
// object, and that only a change of the object can cure, may equally return
// (Result{}, nil): the change brings a new request. Terminal is for requests
// that can never succeed and that an operator may want to inspect (the
// dead-letter stream keeps them).
package reconcile

import (
	"context"
	"errors"
	"time"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// Request is one unit of work: the latest event for a target. It names the
// target; it never carries the target's state, which the handler must read
// afresh. Requests are level-triggered: duplicates and reordering are harmless.
type Request struct {
	// Event is the latest event received for Target.
	Event *eventsv1.Event
	// Target is the object to reconcile: Event.Target, or Event.Object when
	// the target is unset. Never nil when the bus delivers a request.
	Target *eventsv1.ObjectRef
	// Delivery is how many times this event has been delivered, starting at
	// 1; backoff and dead-lettering count from it.
	Delivery int
	// Coalesced is how many older events for Target were skipped in favour
	// of this one while Target was being handled.
	Coalesced int
}

// Result says whether and when a handled target needs handling again. The
// zero Result means done.
type Result struct {
	// Requeue asks for the target to be handled again soon (after the
	// runtime's shortest retry delay), even if no new event arrives: for
	// example after losing an optimistic-concurrency race whose winner's
	// change may not bring an event of its own. Unlike an error it does not
	// count towards the delivery limit and is not logged as a failure.
	Requeue bool
	// RequeueAfter, when positive, asks for the target to be handled again
	// after this long. It implies Requeue.
	RequeueAfter time.Duration
	// Wait, when not nil, holds the target: its event stays unsettled, in
	// the runtime's memory, holding no handler slot, until Wait is closed
	// or RequeueAfter has passed (DefaultHoldTimeout when RequeueAfter is
	// not positive), whichever comes first; then the target is handled
	// again with its newest event. It is for work that waits on this
	// process's own state (an admission budget, say), which must let it go
	// as soon as it can proceed; an error overrides it.
	Wait <-chan struct{}
}

// DefaultHoldTimeout is the longest a Result.Wait holds a target when the
// Result sets no RequeueAfter.
const DefaultHoldTimeout = time.Minute

// IsZero reports whether r asks for nothing more.
func (r Result) IsZero() bool { return !r.Requeue && r.RequeueAfter <= 0 && r.Wait == nil }

// Handler reconciles one target. The runtime calls it with a context that
// carries the event's trace and is cancelled when the handling must stop (a
// timeout, the replica losing the target's partition, a drain running out of
// time); a handler must return promptly once it is cancelled. Handlers must
// be idempotent, and a reconcile that changes nothing writes nothing.
type Handler interface {
	Handle(ctx context.Context, r Request) (Result, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, r Request) (Result, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, r Request) (Result, error) { return f(ctx, r) }

// terminalError marks an error that retrying cannot fix.
type terminalError struct{ err error }

func (e terminalError) Error() string { return e.err.Error() }
func (e terminalError) Unwrap() error { return e.err }

// Terminal wraps err to say that retrying cannot fix it: the runtime does not
// retry the request (it dead-letters it at once). Terminal(nil) is nil, so
// `return res, reconcile.Terminal(err)` is safe when err may be nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return terminalError{err: err}
}

// IsTerminal reports whether err, or an error it wraps, came from Terminal.
func IsTerminal(err error) bool {
	var t terminalError
	return errors.As(err, &t)
}
