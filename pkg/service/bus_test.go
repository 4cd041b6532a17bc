package service

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/bus/bustest"
	"github.com/loomxr/loom/pkg/reconcile"
)

// newRuntime returns a runtime of service binder connected to url, without
// health endpoints, closed when the test ends.
func newRuntime(t *testing.T, url string) *Runtime {
	t.Helper()
	rt, err := New(bus.Binder, Config{Kubeconfig: kubeconfig(t), NATSURL: url, ReplicaID: "r-0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

// The bus a runtime sets up has its streams and bucket, publishes as the
// replica, and its worker is not ready before it runs.
func TestBus(t *testing.T) {
	rt := newRuntime(t, bustest.Run(t).URL())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b, err := rt.Bus(ctx, bus.Config{Replicas: 1, Partitions: 2})
	if err != nil {
		t.Fatalf("Bus(...): %v", err)
	}
	if b.Source != "binder/r-0" {
		t.Errorf("Bus(...).Source: got %q, want binder/r-0", b.Source)
	}
	if _, err := b.JS.Stream(ctx, bus.StreamName(bus.Binder)); err != nil {
		t.Errorf("Bus(...) did not create the binder's work stream: %v", err)
	}
	if kv, err := b.WatchRequests(ctx); err != nil || kv == nil {
		t.Errorf("WatchRequests(...): got %v, %v; want a bucket", kv, err)
	}
	h := reconcile.HandlerFunc(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	if _, err := b.Worker(h); err != nil {
		t.Fatalf("Worker(...): %v", err)
	}
	failed := strings.Join(rt.ready(ctx), "\n")
	if !strings.Contains(failed, "worker: the bus worker is not running") {
		t.Errorf("readiness before the worker runs: got %q, want the worker check failing", failed)
	}

}

// Set-up that retries until its context ends returns an error that wraps
// the context's, which Main treats as a clean stop.
func TestBusGivesUpWithContext(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	_ = l.Close()
	rt := newRuntime(t, url)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err = rt.Bus(ctx, bus.Config{Replicas: 1, Partitions: 2})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Bus(...) without a server: got %v, want an error wrapping the context's", err)
	}
}
