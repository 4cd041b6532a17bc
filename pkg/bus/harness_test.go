package bus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/bus/bustest"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// testConfig keeps leases, acks and retries short so that failover tests
// finish in seconds.
func testConfig() bus.Config {
	return bus.Config{
		Partitions: 16,
		MaxDeliver: 3,
		AckWait:    2 * time.Second,
		LeaseTTL:   2 * time.Second,
	}
}

// heldConfig is testConfig for tests that hold a handler slot busy while
// requests wait: its lease lives a minute, because on a loaded machine a
// renewal late by a second would make the worker give up the partition,
// abandon the waiting requests and wait for the held handler before taking
// the partition again, and the test would see nothing waiting.
func heldConfig() bus.Config {
	cfg := testConfig()
	cfg.LeaseTTL = time.Minute
	return cfg
}

// arrival is how long a test waits for published events to reach a worker
// and for held work to finish once released: far beyond what it takes, so
// that only lost work fails a test. On a loaded machine a lane's consumer
// may stop pulling until nats.go notices the missing heartbeat of its pull
// request, 30 s later.
const arrival = 90 * time.Second

// testLogger logs to stderr when LOOM_TEST_LOG is set, else nowhere.
func testLogger() *slog.Logger {
	if os.Getenv("LOOM_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// harness is an embedded NATS server with the bus's streams.
type harness struct {
	t   *testing.T
	srv *bustest.Server
	cfg bus.Config
	js  jetstream.JetStream
}

func newHarness(t *testing.T, cfg bus.Config) *harness {
	t.Helper()
	srv := bustest.Run(t)
	_, js := bustest.Connect(t, srv.URL())
	if err := bus.EnsureStreams(t.Context(), js, cfg); err != nil {
		t.Fatalf("EnsureStreams: %v", err)
	}
	return &harness{t: t, srv: srv, cfg: cfg, js: js}
}

// publisher returns a Publisher on its own connection.
func (h *harness) publisher(opts ...bus.PublisherOption) *bus.Publisher {
	_, js := bustest.Connect(h.t, h.srv.URL())
	return bus.NewPublisher(js, append([]bus.PublisherOption{bus.WithConfig(h.cfg), bus.WithLogger(testLogger())}, opts...)...)
}

// replica is a Worker running on its own connection.
type replica struct {
	id     string
	nc     *nats.Conn
	w      *bus.Worker
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// start runs a Worker for service as replica id; the test's cleanup stops it.
func (h *harness) start(service, id string, hd bus.Handler, opts ...bus.WorkerOption) *replica {
	h.t.Helper()
	nc, js := bustest.Connect(h.t, h.srv.URL())
	opts = append([]bus.WorkerOption{bus.WithConfig(h.cfg), bus.WithLogger(testLogger().With("replica", id))}, opts...)
	w, err := bus.NewWorker(nc, js, service, id, hd, opts...)
	if err != nil {
		h.t.Fatalf("NewWorker: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{id: id, nc: nc, w: w, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- w.Run(ctx) }()
	h.t.Cleanup(r.stop)
	return r
}

// stop stops the replica gracefully and waits for Run to return.
func (r *replica) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

// kill closes the replica's connection abruptly, as if its process died,
// then cancels it without a chance to drain, and waits for Run to return.
func (r *replica) kill() {
	r.once.Do(func() {
		r.nc.Close()
		r.cancel()
		<-r.done
	})
}

// event is a MODIFIED event for an XR with the given UID and resourceVersion.
func event(uid string, rv int) *eventsv1.Event {
	return &eventsv1.Event{
		Object: &eventsv1.ObjectRef{
			Group: "example.org", Version: "v1", Kind: "XThing",
			Name: "thing-" + uid, Uid: uid,
		},
		ResourceVersion: fmt.Sprint(rv),
		Type:            eventsv1.EventType_EVENT_TYPE_MODIFIED,
	}
}

// uid returns a fake Kubernetes UID for index i.
func uid(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// workPending is how many messages wait in service's work stream.
func (h *harness) workPending(service string) uint64 {
	s, err := h.js.Stream(context.Background(), bus.StreamName(service))
	if err != nil {
		h.t.Fatalf("cannot read stream: %v", err)
	}
	return s.CachedInfo().State.Msgs
}

// ownership records, across every replica of a test, how many replicas own
// each partition at once.
type ownership struct {
	mu         sync.Mutex
	owners     map[int]map[string]bool
	violations []string
}

func newOwnership() *ownership { return &ownership{owners: map[int]map[string]bool{}} }

func (o *ownership) hook(id string) bus.WorkerOption {
	return bus.WithOwnershipHook(func(p int, owned bool) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.owners[p] == nil {
			o.owners[p] = map[string]bool{}
		}
		if owned {
			for other := range o.owners[p] {
				o.violations = append(o.violations, fmt.Sprintf("partition %d owned by %s and %s", p, other, id))
			}
			o.owners[p][id] = true
		} else {
			delete(o.owners[p], id)
		}
	})
}

// owned returns how many partitions have an owner, and the violations so far.
func (o *ownership) state() (owned int, violations []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ids := range o.owners {
		if len(ids) > 0 {
			owned++
		}
	}
	return owned, append([]string(nil), o.violations...)
}

var errBoom = errors.New("boom")
