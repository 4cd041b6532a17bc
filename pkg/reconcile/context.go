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
