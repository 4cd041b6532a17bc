package watch

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/pkg/watchreq"
)

// followRequests mirrors the watch request bucket into the watcher until ctx
// ends. It closes initial once the bucket's current entries are applied. A
// broken watch is re-established; entries deleted meanwhile are dropped when
// the new watch's initial entries are through.
func (w *Watcher) followRequests(ctx context.Context, initial chan<- struct{}) {
	first := true
	bo := backoff.NewExponentialBackOff(backoff.WithMaxInterval(10*time.Second), backoff.WithMaxElapsedTime(0))
	for ctx.Err() == nil {
		err := w.followOnce(ctx, func() {
			if first {
				first = false
				close(initial)
			}
			bo.Reset()
		})
		if ctx.Err() != nil {
			return
		}
		d := bo.NextBackOff()
		w.log.Warn("watch of watch requests ended; retrying", "bucket", watchreq.Bucket, "err", err, "retryIn", d)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// followOnce runs one watch of the bucket until it breaks or ctx ends.
func (w *Watcher) followOnce(ctx context.Context, caughtUp func()) error {
	kw, err := w.requestsKV.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = kw.Stop() }()
	seen := map[types.UID]bool{}
	catchingUp := true
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-kw.Updates():
			if !ok {
				return errors.New("watch closed")
			}
			if e == nil {
				// The current entries are through: forget XRs whose key is gone.
				catchingUp = false
				w.dropRequestsExcept(seen)
				caughtUp()
				continue
			}
			uid := types.UID(e.Key())
			if catchingUp {
				seen[uid] = true
			}
			var reqs []watchreq.Request
			if e.Operation() == jetstream.KeyValuePut {
				if reqs, err = watchreq.Decode(e.Value()); err != nil {
					w.log.Warn("ignoring invalid watch requests", "xr", uid, "err", err)
				}
			}
			w.setRequests(uid, reqs)
		}
	}
}

// setRequests replaces the watch requests of one XR; none removes them.
func (w *Watcher) setRequests(uid types.UID, reqs []watchreq.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for gvk, byXR := range w.requests {
		delete(byXR, uid)
		if len(byXR) == 0 {
			delete(w.requests, gvk)
		}
	}
	kinds := make([]schema.GroupVersionKind, 0, len(reqs))
	for _, r := range reqs {
		gvk := r.GroupVersionKind()
		kinds = append(kinds, gvk)
		if w.requests[gvk] == nil {
			w.requests[gvk] = map[types.UID][]watchreq.Request{}
		}
		w.requests[gvk][uid] = append(w.requests[gvk][uid], r)
	}
	if added, removed := w.requested.Put(string(uid), kinds); len(added)+len(removed) > 0 {
		w.reconcile()
	}
}

// dropRequestsExcept removes the requests of every XR not in keep.
func (w *Watcher) dropRequestsExcept(keep map[types.UID]bool) {
	w.mu.RLock()
	var drop []types.UID
	for _, byXR := range w.requests {
		for uid := range byXR {
			if !keep[uid] {
				drop = append(drop, uid)
			}
		}
	}
	w.mu.RUnlock()
	for _, uid := range drop {
		w.setRequests(uid, nil)
	}
}
