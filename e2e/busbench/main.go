// Command busbench measures the event bus on an embedded NATS server with
// JetStream (file storage) and three worker replicas, each on its own
// connection, and prints one JSON line:
//
//	{"events_per_s": N, "p50_ms": N, "p99_ms": N, "overlaps": 0}
//
// events_per_s comes from a saturating run: -events events, each for a
// different object (so none coalesce and every event is handled), published
// as fast as the publisher's in-flight bound allows; it is events divided by
// the time from the first publish until the last handling. p50_ms and p99_ms
// come from a paced run offering -rate events per second for -duration: the
// time from Publish (the event's observed time) to the start of its handling.
// overlaps counts handlings of one object that ran on two replicas at once,
// over both runs (it must be 0). Details go to stderr. `make bench-bus` runs
// it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/bus/bustest"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

type options struct {
	events      int
	rate        int
	duration    time.Duration
	replicas    int
	concurrency int
	partitions  int
	inFlight    int
	verbose     bool
}

func main() {
	var o options
	flag.IntVar(&o.events, "events", 50_000, "events in the saturating run")
	flag.IntVar(&o.rate, "rate", 1000, "events per second offered in the latency run")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of the latency run")
	flag.IntVar(&o.replicas, "replicas", 3, "worker replicas")
	flag.IntVar(&o.concurrency, "concurrency", 32, "handler concurrency per replica")
	flag.IntVar(&o.partitions, "partitions", bus.DefaultPartitions, "partitions per work stream")
	flag.IntVar(&o.inFlight, "in-flight", 2048, "publisher's bound on unacknowledged events")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of both runs to this file")
	flag.BoolVar(&o.verbose, "v", false, "log the workers' and publisher's info messages to stderr")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "busbench: cannot profile:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "busbench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// result is the JSON line busbench prints.
type result struct {
	EventsPerS int     `json:"events_per_s"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	Overlaps   int64   `json:"overlaps"`
}

// recorder is the handler of every replica: it checks exclusivity across
// replicas and records when each event's handling started.
type recorder struct {
	active   sync.Map // target UID -> *atomic.Int32
	overlaps atomic.Int64
	handled  atomic.Int64

	mu        sync.Mutex
	record    bool
	latencies []time.Duration
}

func (r *recorder) Handle(_ context.Context, req bus.Request) (bus.Result, error) {
	start := time.Now()
	n, _ := r.active.LoadOrStore(req.Target.GetUid(), new(atomic.Int32))
	c := n.(*atomic.Int32)
	if c.Add(1) > 1 {
		r.overlaps.Add(1)
	}
	defer c.Add(-1)
	if ot := req.Event.GetObservedTime(); ot != nil {
		r.mu.Lock()
		if r.record {
			r.latencies = append(r.latencies, start.Sub(ot.AsTime()))
		}
		r.mu.Unlock()
	}
	r.handled.Add(1 + int64(req.Coalesced))
	return bus.Result{}, nil
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "busbench-")
	if err != nil {
		return fmt.Errorf("cannot create store folder: %w", err)
	}
	defer os.RemoveAll(dir)
	srv, err := bustest.Start(dir)
	if err != nil {
		return err
	}
	defer srv.Stop()

	ctx := context.Background()
	cfg := bus.Config{Partitions: o.partitions}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		return fmt.Errorf("cannot connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := bus.EnsureStreams(ctx, js, cfg); err != nil {
		return err
	}

	rec := &recorder{}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.verbose {
		quiet = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	var (
		workers []*bus.Worker
		conns   []*nats.Conn
		wg      sync.WaitGroup
	)
	wctx, stop := context.WithCancel(ctx)
	defer func() {
		stop()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range o.replicas {
		wnc, err := nats.Connect(srv.URL())
		if err != nil {
			return fmt.Errorf("cannot connect: %w", err)
		}
		conns = append(conns, wnc)
		wjs, err := jetstream.New(wnc)
		if err != nil {
			return err
		}
		w, err := bus.NewWorker(wnc, wjs, bus.Renderer, "bench-"+strconv.Itoa(i), rec,
			bus.WithConfig(cfg), bus.WithConcurrency(o.concurrency), bus.WithLogger(quiet))
		if err != nil {
			return err
		}
		workers = append(workers, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(wctx); err != nil {
				fmt.Fprintln(os.Stderr, "busbench: worker:", err)
			}
		}()
	}
	// Wait until every partition has one owner and the assignment has not
	// changed for a second, so that no run measures a rebalance.
	var (
		last   string
		stable time.Time
	)
	if err := waitFor(time.Minute, "every partition to be owned by a settled set of replicas", func() bool {
		total := 0
		var cur string
		for _, w := range workers {
			owned := w.Owned()
			total += len(owned)
			cur += fmt.Sprint(owned)
		}
		if total != o.partitions || cur != last {
			last, stable = cur, time.Now()
			return false
		}
		return time.Since(stable) > time.Second
	}); err != nil {
		return err
	}

	pub := bus.NewPublisher(js, bus.WithConfig(cfg), bus.WithMaxInFlight(o.inFlight), bus.WithSource("busbench"), bus.WithLogger(quiet))

	// Saturating run: every event for a different object.
	start := time.Now()
	for i := range o.events {
		if err := pub.Publish(ctx, bus.Renderer, benchEvent("sat", i)); err != nil {
			return err
		}
	}
	if err := pub.Flush(ctx); err != nil {
		return err
	}
	published := time.Since(start)
	if err := waitFor(2*time.Minute, "every event of the saturating run to be handled", func() bool {
		return rec.handled.Load() >= int64(o.events)
	}); err != nil {
		return err
	}
	elapsed := time.Since(start)
	eps := float64(o.events) / elapsed.Seconds()
	fmt.Fprintf(os.Stderr, "saturating run: %d events published in %s, handled in %s: %.0f events/s\n",
		o.events, published.Round(time.Millisecond), elapsed.Round(time.Millisecond), eps)

	// Paced run: -rate events per second, each for a different object.
	rec.mu.Lock()
	rec.record = true
	rec.mu.Unlock()
	total := int(float64(o.rate) * o.duration.Seconds())
	interval := time.Second / time.Duration(o.rate)
	before := rec.handled.Load()
	start = time.Now()
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		if err := pub.Publish(ctx, bus.Renderer, benchEvent("paced", i)); err != nil {
			return err
		}
	}
	if err := pub.Flush(ctx); err != nil {
		return err
	}
	if err := waitFor(time.Minute, "every event of the paced run to be handled", func() bool {
		return rec.handled.Load()-before >= int64(total)
	}); err != nil {
		return err
	}
	rec.mu.Lock()
	lat := slices.Clone(rec.latencies)
	rec.mu.Unlock()
	slices.Sort(lat)
	p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
	fmt.Fprintf(os.Stderr, "paced run: %d events at %d/s; publish to handling: p50 %s, p99 %s, max %s\n",
		total, o.rate, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond))

	out, err := json.Marshal(result{
		EventsPerS: int(eps),
		P50Ms:      ms(p50),
		P99Ms:      ms(p99),
		Overlaps:   rec.overlaps.Load(),
	})
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	if rec.overlaps.Load() != 0 {
		return fmt.Errorf("%d overlapping handlings", rec.overlaps.Load())
	}
	return nil
}

// benchEvent is an event for object i of a run.
func benchEvent(run string, i int) *eventsv1.Event {
	uid := fmt.Sprintf("%s-%08d", run, i)
	return &eventsv1.Event{
		Object: &eventsv1.ObjectRef{
			Group: "bench.loom.dev", Version: "v1", Kind: "XBench",
			Name: uid, Uid: uid,
		},
		ResourceVersion: "1",
		Type:            eventsv1.EventType_EVENT_TYPE_ADDED,
	}
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

func ms(d time.Duration) float64 {
	return float64(d.Microseconds()/10) / 100
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}
