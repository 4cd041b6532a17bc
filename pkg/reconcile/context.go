package reconcile

import "context"

type requestKey struct{}

// WithRequest returns a context that carries r, so that what a handler
// calls (a client's read path, say) can learn which event it handles
// without the request being passed down. The worker runtime calls it
// before every Handle.
func WithRequest(ctx context.Context, r Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// RequestFrom returns the request ctx carries, and whether it carries one.
func RequestFrom(ctx context.Context) (Request, bool) {
	r, ok := ctx.Value(requestKey{}).(Request)
	return r, ok
}

type supersededKey struct{}

// WithSuperseded returns a context whose Superseded asks f. The worker
// runtime calls it before every Handle, with a function that reports whether
// a newer event for the handled target has arrived since.
func WithSuperseded(ctx context.Context, f func() bool) context.Context {
	return context.WithValue(ctx, supersededKey{}, f)
}

// Superseded reports whether a newer event for the target being handled has
// arrived while the handler runs. The runtime then handles the target again
// right after this run, so a handler may leave out a write that only says
// "not yet" (a first status that the newer event may turn into "Ready"): the
// next run decides it anew. False when ctx does not know.
func Superseded(ctx context.Context) bool {
	f, ok := ctx.Value(supersededKey{}).(func() bool)
	return ok && f()
}
