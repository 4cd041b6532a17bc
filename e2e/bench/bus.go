//go:build e2e

package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loomxr/loom/pkg/bus"
)

// busReading is the state of Loom's work streams at one moment.
type busReading struct {
	// Published is, per stream, how many messages it has stored since it
	// was created (its last sequence number): publishes that deduplication
	// dropped are not counted.
	Published map[string]uint64
	// Pending is how many messages wait in the streams or are delivered
	// and not yet acknowledged; PendingByStream per stream.
	Pending         uint64
	PendingByStream map[string]uint64
}

// busStats reads Loom's work streams.
type busStats struct {
	nc *nats.Conn
	js jetstream.JetStream
}

func newBusStats(url string) (*busStats, error) {
	nc, err := nats.Connect(url, nats.Name("loom-bench"), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("cannot connect to NATS: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("cannot open JetStream: %w", err)
	}
	return &busStats{nc: nc, js: js}, nil
}

func (b *busStats) close() { b.nc.Close() }

// read returns the current state of every work stream that exists.
func (b *busStats) read(ctx context.Context) (busReading, error) {
	r := busReading{Published: map[string]uint64{}, PendingByStream: map[string]uint64{}}
	for _, svc := range bus.Services {
		name := bus.StreamName(svc)
		s, err := b.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return r, fmt.Errorf("cannot open stream %s: %w", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return r, fmt.Errorf("cannot read stream %s: %w", name, err)
		}
		r.Published[name] = info.State.LastSeq
		// Work-queue streams drop acknowledged messages, so what is
		// stored is what is not done yet (waiting, delayed or in flight).
		r.Pending += info.State.Msgs
		r.PendingByStream[name] = info.State.Msgs
	}
	return r, nil
}

// published returns the messages stored between before and r, by stream,
// and their total.
func (r busReading) published(before busReading) (map[string]uint64, uint64) {
	out := map[string]uint64{}
	var total uint64
	for name, seq := range r.Published {
		d := seq - before.Published[name]
		out[name] = d
		total += d
	}
	return out, total
}
