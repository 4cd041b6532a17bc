package bus_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/bus/bustest"
	"github.com/loomxr/loom/pkg/testing/poll"
)

// On a three-server cluster, EnsureStreams (called before the cluster has
// elected its leaders) creates every stream, consumer and bucket with three
// replicas; work keeps flowing, and nothing is lost, when the server leading
// the work stream goes away.
func TestThreeServerCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server cluster")
	}
	c := bustest.RunCluster(t, 3)
	cfg := bus.Config{Replicas: 3, Partitions: 4, MaxDeliver: 5, AckWait: 2 * time.Second, LeaseTTL: 4 * time.Second}
	reconnect := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}
	_, js := bustest.Connect(t, c.URLs(), reconnect...)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := bus.EnsureStreams(ctx, js, cfg); err != nil {
		t.Fatalf("EnsureStreams: %v", err)
	}

	for _, name := range []string{bus.StreamName(bus.Renderer), bus.DeadLetterStream, "KV_" + bus.LeasesBucket, "KV_" + bus.MembersBucket} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info := s.CachedInfo()
		if info.Config.Replicas != 3 || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
			t.Errorf("stream %s: replicas %d, cluster %+v; want 3 replicas with a leader", name, info.Config.Replicas, info.Cluster)
		}
	}
	cons, err := js.Consumer(ctx, bus.StreamName(bus.Binder), bus.ConsumerName(bus.Binder, 3))
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.Replicas; got != 3 {
		t.Errorf("consumer replicas %d, want 3", got)
	}
	// Idempotent.
	if err := bus.EnsureStreams(ctx, js, cfg); err != nil {
		t.Fatalf("second EnsureStreams: %v", err)
	}

	var (
		mu     sync.Mutex
		latest = map[string]int{}
	)
	handler := bus.HandlerFunc(func(_ context.Context, r bus.Request) (bus.Result, error) {
		rv, _ := strconv.Atoi(r.Event.GetResourceVersion())
		mu.Lock()
		latest[r.Target.GetUid()] = max(latest[r.Target.GetUid()], rv)
		mu.Unlock()
		return bus.Result{}, nil
	})
	for _, id := range []string{"r0", "r1"} {
		nc, wjs := bustest.Connect(t, c.URLs(), reconnect...)
		w, err := bus.NewWorker(nc, wjs, bus.Renderer, id, handler, bus.WithConfig(cfg), bus.WithLogger(testLogger().With("replica", id)))
		if err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		t.Cleanup(func() { stop(); <-done })
	}
	pub := bus.NewPublisher(js, bus.WithConfig(cfg), bus.WithLogger(testLogger()))
	const objects = 100
	publish := func(rv int) {
		t.Helper()
		for o := range objects {
			if err := pub.Publish(ctx, bus.Renderer, event(uid(o), rv)); err != nil {
				t.Fatal(err)
			}
		}
		if err := pub.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	handledAll := func(rv int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for o := range objects {
				if latest[uid(o)] != rv {
					return false
				}
			}
			return true
		}
	}
	publish(1)
	poll.True(t, 30*time.Second, "every object handled on the cluster", handledAll(1))

	// Stop the server leading the renderer's work stream.
	s, err := js.Stream(ctx, bus.StreamName(bus.Renderer))
	if err != nil {
		t.Fatal(err)
	}
	leader := s.CachedInfo().Cluster.Leader
	for _, srv := range c.Servers {
		if srv.Name() == leader {
			srv.Stop()
		}
	}
	start := time.Now()
	publish(2)
	poll.True(t, 60*time.Second, "every object handled after losing the stream leader", handledAll(2))
	t.Logf("handled every object %s after stopping stream leader %s", time.Since(start).Round(time.Millisecond), leader)
	poll.True(t, 30*time.Second, "no work left", func() bool {
		s, err := js.Stream(ctx, bus.StreamName(bus.Renderer))
		return err == nil && s.CachedInfo().State.Msgs == 0
	})
	if dls, err := bus.ListDeadLetters(ctx, js, ""); err != nil || len(dls) != 0 {
		t.Errorf("dead letters: %v, %v", dls, err)
	}
}
