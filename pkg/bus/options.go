package bus

import (
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// PublisherOption configures a Publisher.
type PublisherOption interface{ applyPublisher(*Publisher) }

// WorkerOption configures a Worker.
type WorkerOption interface{ applyWorker(*Worker) }

// Option configures both a Publisher and a Worker.
type Option interface {
	PublisherOption
	WorkerOption
}

type publisherOption func(*Publisher)

func (f publisherOption) applyPublisher(p *Publisher) { f(p) }

type workerOption func(*Worker)

func (f workerOption) applyWorker(w *Worker) { f(w) }

type sharedOption struct {
	pub func(*Publisher)
	wrk func(*Worker)
}

func (o sharedOption) applyPublisher(p *Publisher) { o.pub(p) }
func (o sharedOption) applyWorker(w *Worker)       { o.wrk(w) }

// WithConfig sets the bus Config. It must match the Config given to
// EnsureStreams (at least Partitions and MaxDeliver). An invalid Config makes
// NewWorker fail and every Publish return the validation error.
func WithConfig(cfg Config) Option {
	return sharedOption{
		pub: func(p *Publisher) { p.rawCfg = cfg },
		wrk: func(w *Worker) { w.rawCfg = cfg },
	}
}

// WithLogger sets the logger; the default is slog.Default(). Failures are
// logged at info, each handled event at debug.
func WithLogger(l *slog.Logger) Option {
	return sharedOption{
		pub: func(p *Publisher) {
			if l != nil {
				p.log = l
			}
		},
		wrk: func(w *Worker) {
			if l != nil {
				w.log = l
			}
		},
	}
}

// WithMaxInFlight bounds how many published events may await their
// acknowledgement from JetStream; Publish blocks while the bound is reached.
// The default is 256; values below 1 are ignored.
func WithMaxInFlight(n int) PublisherOption {
	return publisherOption(func(p *Publisher) {
		if n > 0 {
			p.maxInFlight = n
		}
	})
}

// WithSource sets the Source recorded on events that do not name one, for
// example "watcher/0".
func WithSource(source string) PublisherOption {
	return publisherOption(func(p *Publisher) { p.source = source })
}

// WithConcurrency bounds how many handlers of this replica run at once,
// across all targets and partitions. The default is 16; values below 1 are
// ignored.
func WithConcurrency(n int) WorkerOption {
	return workerOption(func(w *Worker) {
		if n > 0 {
			w.concurrency = n
		}
	})
}

// WithHandlerTimeout bounds one handler call; its context is cancelled after
// d. The default is one minute; values below one millisecond are ignored.
// The handler context is also cancelled, whatever d is, before the replica's
// lease on the partition could expire.
func WithHandlerTimeout(d time.Duration) WorkerOption {
	return workerOption(func(w *Worker) {
		if d >= time.Millisecond {
			w.handlerTimeout = d
		}
	})
}

// WithDrainTimeout bounds how long Run waits, when its context ends, for
// running handlers to finish before it cancels them. The default is 15
// seconds; negative values are ignored.
func WithDrainTimeout(d time.Duration) WorkerOption {
	return workerOption(func(w *Worker) {
		if d >= 0 {
			w.drainTimeout = d
		}
	})
}

// WithBackoff sets how failed events are retried. newBackOff is called for
// each failure and must return a fresh BackOff; the delay before delivery n+1
// is its n-th NextBackOff. If it returns backoff.Stop the event is
// dead-lettered even before MaxDeliver. The default is exponential from one
// second, doubling, with 20% jitter, capped at five minutes.
func WithBackoff(newBackOff func() backoff.BackOff) WorkerOption {
	return workerOption(func(w *Worker) {
		if newBackOff != nil {
			w.newBackOff = newBackOff
		}
	})
}

// WithOwnershipHook calls f when this replica starts owning a partition
// (before it pulls from it) and when it stops owning it (after its last
// handler has returned). Calls for one partition never overlap. For metrics,
// logs and tests.
func WithOwnershipHook(f func(partition int, owned bool)) WorkerOption {
	return workerOption(func(w *Worker) { w.ownershipHook = f })
}

// defaultBackOff is the default retry schedule of failed events.
func defaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = time.Second
	b.Multiplier = 2
	b.RandomizationFactor = 0.2
	b.MaxInterval = 5 * time.Minute
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// DefaultLookahead is how many targets of one partition lane may wait for
// a handler slot in a replica's memory (WithLookahead).
const DefaultLookahead = 64

// maxLookahead is the most a lane can look ahead: the consumers'
// MaxAckPending, beyond which JetStream delivers nothing more.
const maxLookahead = 1000

// WithLookahead bounds how many targets of one partition lane wait for a
// handler slot in this replica's memory; further pulls of the lane wait
// until one starts, except in the urgent and normal lanes, which move the
// events of a tenant over its share to the overflow lane and give tenants
// under their share as much room again (see the package documentation). Tenants take
// turns among the targets waiting in memory (see WithFairKey); each costs
// memory and one InProgress heartbeat per AckWait/2.
// It can be at most the consumers' MaxAckPending (maxLookahead), past which
// JetStream delivers no more. The default is DefaultLookahead; values below
// 1 are ignored.
func WithLookahead(n int) WorkerOption {
	return workerOption(func(w *Worker) {
		if n > 0 {
			w.lookahead = n
		}
	})
}

// WithTargetBudget bounds how many times one target is handled in any
// minute on this replica; its further events wait (in memory, holding no
// slot) until the oldest run of the minute is a minute old. It counts every
// run, whatever the outcome, so that a target that never settles (a
// reference cycle, requirements that change on every call) cannot take
// more than its share. The default is DefaultTargetBudget; 0 disables the
// budget and negative values are ignored.
func WithTargetBudget(runsPerMinute int) WorkerOption {
	return workerOption(func(w *Worker) {
		if runsPerMinute >= 0 {
			w.budget = runsPerMinute
		}
	})
}

// WithQuarantine sets how many handlers of suspect targets (failed or
// throttled within the last minute) run at once. They run in these slots
// only, on top of WithConcurrency, so that a poisoned target never holds a
// slot a healthy one waits for. The default is a quarter of the
// concurrency, at least one; values below 1 are ignored.
func WithQuarantine(n int) WorkerOption {
	return workerOption(func(w *Worker) {
		if n > 0 {
			w.quarantine = n
		}
	})
}

// WithFairKey sets the tenant key that waiting requests are served
// round-robin across (NamespaceKey by default; NoKey serves them first come,
// first served). key must be cheap and must not block.
func WithFairKey(key func(Request) string) WorkerOption {
	return workerOption(func(w *Worker) {
		if key != nil {
			w.fairKey = key
		}
	})
}

// WithArrivals calls f with every request a replica receives, as it
// arrives: before it is folded into a newer one or waits for a handler
// slot, and however long the handler of its target is busy. It is for
// bookkeeping that must not wait for a handler (a count that news of an
// object settles, say), not for work: the request is handled as usual
// afterwards. A request that waits for its time (a requeue's delay) is
// passed on when its time comes. f runs on the receiving goroutine of the
// request's partition, so it must be cheap and must not block.
func WithArrivals(f func(Request)) WorkerOption {
	return workerOption(func(w *Worker) { w.arrivals = f })
}
