package mirror

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/objjson"
	"github.com/loomxr/loom/pkg/telemetry"
)

// Operations and outcomes recorded by the writes metric.
const (
	opPut       = "put"
	opPurge     = "purge"
	opReconcile = "reconcile"
	opTooLarge  = "too_large"
)

// A Writer writes objects into the mirror. The watcher is its one user. Its
// methods are safe for concurrent use; each but Send blocks until JetStream
// stored the change (or failed to).
type Writer struct {
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	writes   metric.Int64Counter
	duration metric.Float64Histogram
	attrs    *telemetry.Attrs
	opAttrs  *telemetry.Attrs
}

// NewWriter returns a Writer of the bucket kv (see EnsureBucket), which js
// reaches: Send publishes to the bucket's stream through js.
func NewWriter(js jetstream.JetStream, kv jetstream.KeyValue) *Writer {
	// Instrument creation fails only for invalid names, a constant here; a
	// failed instrument is a no-op one.
	c, _ := otel.Meter("github.com/loomxr/loom/pkg/mirror").Int64Counter("loom.mirror.writes",
		metric.WithDescription("Writes to the object mirror, by operation (put, purge, reconcile: a purge of a key whose object is gone, too_large: a purge of an object too large to mirror) and outcome (ok, error)."))
	h, _ := otel.Meter("github.com/loomxr/loom/pkg/mirror").Float64Histogram("loom.mirror.write.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a write to the object mirror took, until JetStream stored it, by operation (put, purge, reconcile, too_large); for a put sent without waiting (Send), until its answer was taken. The watcher publishes an event only once its object is written."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
	return &Writer{js: js, kv: kv, writes: c, duration: h, attrs: telemetry.NewAttrs(nil, "op", "outcome"), opAttrs: telemetry.NewAttrs(nil, "op")}
}

// Put writes obj, as JSON (package objjson), under its key, replacing what the key held. It is
// idempotent. It refuses a core Secret with ErrSecret.
//
// An object too large for one NATS message (the server's max_payload, 1 MiB
// by default, while the API server accepts up to about 1.5 MiB) is not
// mirrored: Put purges its key instead, so that readers find it Unknown
// rather than an older version, and returns nil.
func (w *Writer) Put(ctx context.Context, obj *unstructured.Unstructured) error {
	gk := obj.GroupVersionKind().GroupKind()
	if !Mirrored(gk) {
		return fmt.Errorf("cannot mirror %s %s: %w", gk.Kind, obj.GetName(), ErrSecret)
	}
	k := KeyOf(gk, obj.GetNamespace(), obj.GetName())
	data, err := objjson.Append(make([]byte, 0, 4096), obj.Object)
	if err != nil {
		return fmt.Errorf("cannot encode %s %s: %w", gk.Kind, k.Name, err)
	}
	return w.put(ctx, k, data)
}

// PutJSON is Put of an object already encoded: data is package objjson's
// encoding of the object of kind gk named namespace/name.
func (w *Writer) PutJSON(ctx context.Context, gk schema.GroupKind, namespace, name string, data []byte) error {
	if !Mirrored(gk) {
		return fmt.Errorf("cannot mirror %s %s: %w", gk.Kind, name, ErrSecret)
	}
	return w.put(ctx, KeyOf(gk, namespace, name), data)
}

func (w *Writer) put(ctx context.Context, k Key, data []byte) error {
	start := time.Now()
	_, err := w.kv.Put(ctx, k.String(), data)
	if errors.Is(err, nats.ErrMaxPayload) {
		return w.purge(ctx, opTooLarge, k)
	}
	w.observe(ctx, opPut, start)
	w.count(ctx, opPut, err)
	if err != nil {
		return fmt.Errorf("cannot mirror %s %s: %w", k.Kind, k.Name, err)
	}
	return nil
}

// Send is PutJSON that returns once the write is sent, before JetStream
// answers: Wait on the returned Pending tells how it ended. Writes sent one
// after another (by Send, or by Put, PutJSON and Delete once they return)
// are stored in that order, for Send never resends: a write whose answer
// is lost or negative fails, and the caller writes again if nothing newer
// was sent since. An object too large for one NATS message is purged, as by
// Put, before Send returns.
func (w *Writer) Send(gk schema.GroupKind, namespace, name string, data []byte) Pending {
	if !Mirrored(gk) {
		return done{fmt.Errorf("cannot mirror %s %s: %w", gk.Kind, name, ErrSecret)}
	}
	k := KeyOf(gk, namespace, name)
	start := time.Now()
	// The key subject as the bucket's own Put publishes to it.
	msg := &nats.Msg{Subject: "$KV." + w.kv.Bucket() + "." + k.String(), Data: data}
	f, err := w.js.PublishMsgAsync(msg, jetstream.WithRetryAttempts(0))
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return done{w.purge(context.Background(), opTooLarge, k)}
	case err != nil:
		w.count(context.Background(), opPut, err)
		return done{fmt.Errorf("cannot mirror %s %s: %w", k.Kind, k.Name, err)}
	}
	return &sent{w: w, k: k, f: f, start: start}
}

// A Pending is a write sent to the mirror whose answer may not have come.
type Pending interface {
	// Wait waits for the answer to the write, at most sendTimeout, and
	// returns nil if JetStream stored it. It is called once.
	Wait(ctx context.Context) error
}

// sendTimeout is how long a sent write's answer may take before the
// write counts as failed; as long as a JetStream request's default.
const sendTimeout = 5 * time.Second

// Done returns a Pending already answered with err: a write that ended
// before it was sent (a refused key, a synchronous purge, an encoding error).
func Done(err error) Pending { return done{err} }

type done struct{ err error }

func (d done) Wait(context.Context) error { return d.err }

// sent is a Pending JetStream has yet to answer.
type sent struct {
	w     *Writer
	k     Key
	f     jetstream.PubAckFuture
	start time.Time
}

func (s *sent) Wait(ctx context.Context) error {
	t := time.NewTimer(sendTimeout)
	defer t.Stop()
	var err error
	select {
	case <-s.f.Ok():
	case err = <-s.f.Err():
	case <-t.C:
		err = errors.New("no answer from JetStream in time")
	case <-ctx.Done():
		return fmt.Errorf("cannot mirror %s %s: %w", s.k.Kind, s.k.Name, ctx.Err())
	}
	s.w.observe(ctx, opPut, s.start)
	s.w.count(ctx, opPut, err)
	if err != nil {
		return fmt.Errorf("cannot mirror %s %s: %w", s.k.Kind, s.k.Name, err)
	}
	return nil
}

// Delete purges the key of an object. Purging a key that holds nothing is
// not an error. It is idempotent.
func (w *Writer) Delete(ctx context.Context, gk schema.GroupKind, namespace, name string) error {
	return w.purge(ctx, opPurge, KeyOf(gk, namespace, name))
}

func (w *Writer) purge(ctx context.Context, op string, k Key) error {
	start := time.Now()
	err := w.kv.Purge(ctx, k.String())
	w.observe(ctx, op, start)
	w.count(ctx, op, err)
	if err != nil {
		return fmt.Errorf("cannot purge %s %s from the mirror: %w", k.Kind, k.Name, err)
	}
	return nil
}

// Reconcile purges the keys of objects that are gone: it lists the bucket's
// keys, then asks exists of each, and purges every key for which exists
// returns false, and every key that is no Key. It returns how many it
// purged. Last it drops delete markers older than JetStream's default (30
// minutes), so that deleted objects do not take space for ever.
//
// exists is asked after the keys are listed, so that an object added to the
// caller's cache and then put while Reconcile lists is never purged: exists
// must answer from the caller's current view, and answer true for a key it
// cannot judge (a kind whose list is not through yet).
func (w *Writer) Reconcile(ctx context.Context, exists func(Key) bool) (int, error) {
	kl, err := w.kv.ListKeys(ctx)
	if err != nil {
		return 0, fmt.Errorf("cannot list the mirror's keys: %w", err)
	}
	// The lister may name a key twice while the bucket changes.
	keys := map[string]bool{}
	for s := range kl.Keys() {
		keys[s] = true
	}
	// The lister closes its channel both when it is through and when it
	// fails; only ctx tells the two apart.
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("cannot list the mirror's keys: %w", err)
	}
	purged := 0
	for _, s := range slices.Sorted(maps.Keys(keys)) {
		if k, err := ParseKey(s); err == nil && exists(k) {
			continue
		}
		start := time.Now()
		err := w.kv.Purge(ctx, s)
		w.observe(ctx, opReconcile, start)
		w.count(ctx, opReconcile, err)
		if err != nil {
			return purged, fmt.Errorf("cannot purge %s from the mirror: %w", s, err)
		}
		purged++
	}
	if err := w.kv.PurgeDeletes(ctx); err != nil {
		return purged, fmt.Errorf("cannot drop the mirror's old delete markers: %w", err)
	}
	return purged, nil
}

func (w *Writer) observe(ctx context.Context, op string, start time.Time) {
	w.duration.Record(context.WithoutCancel(ctx), time.Since(start).Seconds(), w.opAttrs.Option(op))
}

func (w *Writer) count(ctx context.Context, op string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	w.writes.Add(context.WithoutCancel(ctx), 1, w.attrs.Option(op, outcome))
}
