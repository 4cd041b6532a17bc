//go:build e2e

package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/mirror"
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

// JetStreamUsage is what the NATS servers' JetStream holds at one moment:
// the object mirror, Loom's work streams and its small buckets (members,
// leases, watch requests). The servers run inside the harness process
// (the embedded default), so their memory is part of the harness's
// resident memory (peak_rss_mb_by_process), which also holds the load
// generator; MemoryMiB is only what JetStream keeps in memory storage.
type JetStreamUsage struct {
	// StoreMiB is JetStream's file storage in use, as it accounts it
	// (the streams' messages); DiskMiB is the size of the store folders
	// on disk (messages, indexes and metadata).
	StoreMiB float64 `json:"store_mib"`
	DiskMiB  float64 `json:"disk_mib"`
	// MemoryMiB is JetStream's memory storage in use.
	MemoryMiB float64 `json:"memory_mib"`
	Streams   int     `json:"streams"`
	// MirrorEntries and MirrorMiB are the object mirror's bucket: one
	// entry per object it holds (history 1) and their bytes.
	MirrorEntries uint64  `json:"mirror_entries"`
	MirrorMiB     float64 `json:"mirror_mib"`
}

// usage reads JetStream's account usage and the mirror bucket's state, and
// measures the store folders under storeDir on disk.
func (b *busStats) usage(ctx context.Context, storeDir string) (JetStreamUsage, error) {
	const mib = 1 << 20
	ai, err := b.js.AccountInfo(ctx)
	if err != nil {
		return JetStreamUsage{}, fmt.Errorf("cannot read JetStream's account usage: %w", err)
	}
	u := JetStreamUsage{StoreMiB: float64(ai.Store) / mib, MemoryMiB: float64(ai.Memory) / mib, Streams: ai.Streams}
	kv, err := b.js.KeyValue(ctx, mirror.Bucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
	case err != nil:
		return u, fmt.Errorf("cannot open the mirror bucket: %w", err)
	default:
		st, err := kv.Status(ctx)
		if err != nil {
			return u, fmt.Errorf("cannot read the mirror bucket: %w", err)
		}
		u.MirrorEntries, u.MirrorMiB = st.Values(), float64(st.Bytes())/mib
	}
	var disk int64
	err = filepath.WalkDir(storeDir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		disk += fi.Size()
		return nil
	})
	if err != nil {
		return u, fmt.Errorf("cannot measure the JetStream store on disk: %w", err)
	}
	u.DiskMiB = float64(disk) / mib
	return u, nil
}
