package composite

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/loomxr/loom/pkg/watchreq"
)

// KVWatches records watch requests in the watcher's key-value bucket
// (package watchreq).
type KVWatches struct {
	KV jetstream.KeyValue
}

// Put records the XR's requests; none deletes its key.
func (w KVWatches) Put(ctx context.Context, xrUID string, reqs []watchreq.Request) error {
	return watchreq.Put(ctx, w.KV, xrUID, reqs)
}
