package bus

import (
	"context"
	"errors"
	"time"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// Request is one unit of work handed to a Handler: the latest event for a
// target. It names the target; it never carries the target's state, which the
// handler must read afresh.
type Request struct {
	// Event is the latest event received for Target.
	Event *eventsv1.Event
	// Target is the object to reconcile: Event.Target, or Event.Object when
	// the target is unset. Never nil.
	Target *eventsv1.ObjectRef
	// Delivery is how many times this event has been delivered, starting at
	// 1; backoff and dead-lettering count from it.
	Delivery int
	// Coalesced is how many older events for Target this replica received
	// while Target was being handled and skipped in favour of this one (they
	// are acked). Events replaced in the stream before any replica received
	// them are not counted: the server does not report them.
	Coalesced int
}

// Result says when a handled target needs handling again.
type Result struct {
	// RequeueAfter, when positive, asks for the target to be handled again
	// after this long, even if no new event arrives. Zero means done. A
	// requeue is not a failure: it does not count towards MaxDeliver.
	RequeueAfter time.Duration
}

// Handler reconciles one target. The worker runtime calls it with a context
// that carries the event's trace and is cancelled when the per-message
// timeout passes, when the replica loses the partition, or when a graceful
// drain runs out of time; a handler must return promptly once it is
// cancelled, because the runtime's exclusivity guarantee (one handler per
// target across all replicas) relies on it. Handlers must be idempotent: a
// target may be handled again with no change at all.
//
// The returned error decides what happens to the event: nil acks it (or
// requeues it after Result.RequeueAfter); an error wrapped with Permanent
// dead-letters it at once; any other error retries it with exponential
// backoff until MaxDeliver, then dead-letters it.
type Handler interface {
	Handle(ctx context.Context, r Request) (Result, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, r Request) (Result, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, r Request) (Result, error) { return f(ctx, r) }

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent wraps err to tell the worker runtime not to retry: the event is
// dead-lettered at once with err as the reason, and terminated. A handler
// should have recorded the failure on the object (a condition) first.
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, came from Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}
