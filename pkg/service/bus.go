package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/mirror"
	"github.com/loomxr/loom/pkg/watchreq"
)

// Bus is a service's JetStream: the context, the layout of its streams,
// which exist, and the service's publisher. Runtime.Bus makes it.
type Bus struct {
	// JS is the JetStream context over the runtime's NATS connection.
	JS jetstream.JetStream
	// Config is the layout of the streams.
	Config bus.Config
	// Publisher publishes as Source.
	Publisher *bus.Publisher
	// Source names this replica as the publisher of an event:
	// "<service>/<replica>".
	Source string

	rt *Runtime
}

// Bus connects JetStream over the runtime's NATS connection, ensures the
// work streams cfg describes and makes the service's publisher. JetStream
// may not be up yet (the NATS server starts after the service, or has no
// quorum), so it retries with backoff, logging each failure, until the
// streams exist or ctx ends; then it returns an error that wraps ctx's
// (which Main treats as a clean stop). Close flushes the publisher before
// it drains the NATS connection, so that what the service published last
// is not lost; the run function need not.
func (rt *Runtime) Bus(ctx context.Context, cfg bus.Config) (*Bus, error) {
	if rt.NATS == nil {
		return nil, errors.New("cannot use JetStream: the service runs without NATS")
	}
	js, err := jetstream.New(rt.NATS)
	if err != nil {
		return nil, fmt.Errorf("cannot create JetStream context: %w", err)
	}
	if err := rt.retry(ctx, func() error { return bus.EnsureStreams(ctx, js, cfg) }); err != nil {
		return nil, err
	}
	source := rt.Name + "/" + rt.Config.ReplicaID
	pub := bus.NewPublisher(js, bus.WithConfig(cfg), bus.WithLogger(rt.Log), bus.WithSource(source))
	rt.mu.Lock()
	rt.publishers = append(rt.publishers, pub)
	rt.mu.Unlock()
	return &Bus{JS: js, Config: cfg, Publisher: pub, Source: source, rt: rt}, nil
}

// WatchRequests ensures the key-value bucket of watch requests (package
// watchreq) and returns it, retrying like Runtime.Bus.
func (b *Bus) WatchRequests(ctx context.Context) (jetstream.KeyValue, error) {
	return b.bucket(ctx, watchreq.EnsureBucket)
}

// Mirror ensures the object mirror's key-value bucket (package mirror),
// with the bus's replica count, and returns it, retrying like Runtime.Bus.
func (b *Bus) Mirror(ctx context.Context) (jetstream.KeyValue, error) {
	return b.bucket(ctx, mirror.EnsureBucket)
}

// ReadOptions returns the options of a worker's kube.Resources that the
// flags ask for: with f.Mirror, the read path through the object mirror
// (kube.WithMirror, ensuring the bucket like Mirror), its reader configured
// by o; otherwise none, and every read is a GET.
func (b *Bus) ReadOptions(ctx context.Context, f WorkerFlags, o ...mirror.ReaderOption) ([]kube.Option, error) {
	if !f.Mirror {
		return nil, nil
	}
	kv, err := b.Mirror(ctx)
	if err != nil {
		return nil, err
	}
	return []kube.Option{kube.WithMirror(mirror.NewReader(kv, o...))}, nil
}

// bucket calls ensure, a bucket's EnsureBucket, with the bus's replica
// count until it succeeds or ctx ends, like Runtime.Bus.
func (b *Bus) bucket(ctx context.Context, ensure func(context.Context, jetstream.JetStream, int) (jetstream.KeyValue, error)) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := b.rt.retry(ctx, func() error {
		var err error
		kv, err = ensure(ctx, b.JS, b.Config.Replicas)
		return err
	})
	return kv, err
}

// Worker creates the worker that consumes the runtime's service's work
// stream with h, with the bus's layout and logger and opts, and adds the
// readiness check "worker", which passes while the worker runs. The caller
// runs it.
func (b *Bus) Worker(h bus.Handler, opts ...bus.WorkerOption) (*bus.Worker, error) {
	opts = append([]bus.WorkerOption{bus.WithConfig(b.Config), bus.WithLogger(b.rt.Log)}, opts...)
	w, err := bus.NewWorker(b.rt.NATS, b.JS, b.rt.Name, b.rt.Config.ReplicaID, h, opts...)
	if err != nil {
		return nil, err
	}
	b.rt.AddReadinessCheck("worker", func(context.Context) error {
		if !w.Ready() {
			return errors.New("the bus worker is not running")
		}
		return nil
	})
	return w, nil
}

// retry calls f with exponential backoff (at most 5s apart) until it
// succeeds or ctx ends, logging each failure. After ctx ends it returns f's
// last error joined with ctx's.
func (rt *Runtime) retry(ctx context.Context, f func() error) error {
	bo := backoff.NewExponentialBackOff(backoff.WithMaxInterval(5*time.Second), backoff.WithMaxElapsedTime(0))
	err := backoff.RetryNotify(f, backoff.WithContext(bo, ctx), func(err error, d time.Duration) {
		rt.Log.Warn("cannot set up JetStream yet; retrying", "err", err, "retryIn", d)
	})
	if err != nil && ctx.Err() != nil {
		return errors.Join(err, ctx.Err())
	}
	return err
}
