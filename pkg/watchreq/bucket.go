package watchreq

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// EnsureBucket returns the watch request bucket, creating it with the given
// number of replicas (1 for a single NATS server, 3 on a cluster) when it does
// not exist. It is safe to call from several processes at once: an existing
// bucket is returned unchanged.
func EnsureBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("cannot get key-value bucket %s: %w", Bucket, err)
	}
	if replicas < 1 {
		replicas = 1
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "Objects Loom's renderer asks the watcher to watch, keyed by XR UID.",
		History:     1,
		Replicas:    replicas,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		// Another process created it between our get and create.
		kv, err = js.KeyValue(ctx, Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot create key-value bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// Put records the requests of the XR with the given UID, replacing any it had
// before. It writes nothing when the stored value already equals the new one,
// and deletes the key when reqs is empty. It is idempotent.
func Put(ctx context.Context, kv jetstream.KeyValue, xrUID string, reqs []Request) error {
	if len(reqs) == 0 {
		return Delete(ctx, kv, xrUID)
	}
	key, err := Key(xrUID)
	if err != nil {
		return fmt.Errorf("cannot put watch requests: %w", err)
	}
	val, err := Encode(reqs)
	if err != nil {
		return err
	}
	cur, err := kv.Get(ctx, key)
	switch {
	case err == nil && bytes.Equal(cur.Value(), val):
		return nil
	case err != nil && !errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("cannot get watch requests of XR %s: %w", xrUID, err)
	}
	if _, err := kv.Put(ctx, key, val); err != nil {
		return fmt.Errorf("cannot put watch requests of XR %s: %w", xrUID, err)
	}
	return nil
}

// Delete removes the requests of the XR with the given UID. Deleting a key
// that does not exist is not an error.
func Delete(ctx context.Context, kv jetstream.KeyValue, xrUID string) error {
	key, err := Key(xrUID)
	if err != nil {
		return fmt.Errorf("cannot delete watch requests: %w", err)
	}
	if _, err := kv.Get(ctx, key); errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err := kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("cannot delete watch requests of XR %s: %w", xrUID, err)
	}
	return nil
}
