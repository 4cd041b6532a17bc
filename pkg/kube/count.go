package kube

import (
	"context"
	"net/http"
	"sync/atomic"
)

// A Tally counts the API requests made on behalf of one unit of work (one
// render, say). Reads are GET requests (LISTs included); writes are every
// other method. It is safe for concurrent use.
type Tally struct {
	reads, writes atomic.Int64
}

// Reads returns the number of read requests counted.
func (t *Tally) Reads() int64 { return t.reads.Load() }

// Writes returns the number of write requests counted.
func (t *Tally) Writes() int64 { return t.writes.Load() }

func (t *Tally) add(method string) {
	if method == http.MethodGet || method == http.MethodHead {
		t.reads.Add(1)
		return
	}
	t.writes.Add(1)
}

type tallyKey struct{}

// WithTally returns a context whose API requests (made by clients whose
// transport was wrapped with Count) are counted in t, as well as in any tally
// of the parent context.
func WithTally(ctx context.Context, t *Tally) context.Context {
	parents, _ := ctx.Value(tallyKey{}).([]*Tally)
	all := make([]*Tally, 0, len(parents)+1)
	all = append(all, parents...)
	all = append(all, t)
	return context.WithValue(ctx, tallyKey{}, all)
}

// Count wraps a transport so that every request is counted in total and in
// the tallies of the request's context (see WithTally). total may be nil.
// Install it with rest.Config.Wrap.
func Count(total *Tally) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if total != nil {
				total.add(r.Method)
			}
			if ts, ok := r.Context().Value(tallyKey{}).([]*Tally); ok {
				for _, t := range ts {
					t.add(r.Method)
				}
			}
			return next.RoundTrip(r)
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
