package bus

import (
	"github.com/loomxr/loom/pkg/reconcile"
)

// Request is the unit of work the runtime hands a Handler (see
// reconcile.Request); the runtime fills in Delivery and Coalesced.
type Request = reconcile.Request

// Result is what a Handler returns besides its error (see reconcile.Result).
type Result = reconcile.Result

// Handler reconciles one target (see reconcile.Handler). The worker runtime
// calls it with a context that carries the event's trace and is cancelled
// when the per-message timeout passes, when the replica loses the partition,
// or when a graceful drain runs out of time; a handler must return promptly
// once it is cancelled, because the runtime's exclusivity guarantee (one
// handler per target across all replicas) relies on it.
//
// The outcome decides what happens to the event: (Result{}, nil) acks it;
// Result.Requeue or Result.RequeueAfter requeues it (not counted as a
// delivery); Result.Wait holds it in memory, unsettled and holding no slot,
// until the channel is closed or RequeueAfter passes; an error made by reconcile.Terminal dead-letters it at once;
// any other error retries it with exponential backoff until MaxDeliver, then
// dead-letters it.
type Handler = reconcile.Handler

// HandlerFunc adapts a function to Handler.
type HandlerFunc = reconcile.HandlerFunc
