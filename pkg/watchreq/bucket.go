package watchreq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// EnsureBucket returns the watch request bucket, creating it with the given
// number of replicas (1 for a single NATS server, 3 on a cluster) when it does
// not exist, and changing the replica count of an existing bucket that has
// another (a stack moved from one server to a cluster). It returns once the
// bucket has a leader. It is safe to call from several processes at once,
// as long as they pass the same replica count.
func EnsureBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	if replicas < 1 {
		replicas = 1
	}
	kv, err := js.KeyValue(ctx, Bucket)
	switch {
	case err == nil:
		if err := setReplicas(ctx, js, kv, replicas); err != nil {
			return nil, err
		}
	case !errors.Is(err, jetstream.ErrBucketNotFound):
		return nil, fmt.Errorf("cannot get key-value bucket %s: %w", Bucket, err)
	default:
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
	}
	if err := waitLeader(ctx, js); err != nil {
		return nil, err
	}
	return kv, nil
}

// setReplicas changes the replica count of an existing bucket if it differs.
func setReplicas(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, replicas int) error {
	st, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("cannot get status of key-value bucket %s: %w", Bucket, err)
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || bs.StreamInfo().Config.Replicas == replicas {
		return nil
	}
	cfg := bs.Config()
	cfg.Replicas = replicas
	if _, err := js.UpdateKeyValue(ctx, cfg); err != nil {
		return fmt.Errorf("cannot set replicas of key-value bucket %s to %d: %w", Bucket, replicas, err)
	}
	return nil
}

// waitLeader returns once the bucket's stream has a leader: at once on a
// single server; on a cluster after the election that follows creating the
// bucket or losing a server.
func waitLeader(ctx context.Context, js jetstream.JetStream) error {
	for {
		s, err := js.Stream(ctx, "KV_"+Bucket)
		if err == nil {
			if c := s.CachedInfo().Cluster; c == nil || c.Leader != "" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot find a leader for key-value bucket %s: %w (last error: %v)", Bucket, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
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
