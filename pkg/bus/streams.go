package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// attemptTimeout bounds one JetStream API call made while ensuring streams, so
// that a call stuck on a server that just went away is retried elsewhere.
const attemptTimeout = 5 * time.Second

// EnsureStreams creates or updates every JetStream object of the bus: one work
// stream per service with one durable consumer per partition, the
// dead-letter stream, and the members and leases key-value buckets, all with
// cfg.Replicas replicas. It is idempotent and safe to call from every replica
// of every service at start. While a cluster elects a leader (for the
// JetStream meta group or for one of these streams) it waits and retries
// instead of failing, until ctx ends. It refuses to change the partition
// count of an existing work stream.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	for _, svc := range Services {
		if err := ensureWorkStream(ctx, js, cfg, svc); err != nil {
			return err
		}
	}
	if err := ensureStream(ctx, js, cfg.deadLetterConfig()); err != nil {
		return err
	}
	for _, b := range []string{MembersBucket, LeasesBucket} {
		if _, err := EnsureKeyValue(ctx, js, cfg.kvConfig(b, cfg.LeaseTTL)); err != nil {
			return err
		}
	}
	return nil
}

// EnsureKeyValue creates the key-value bucket kc describes, or updates an
// existing one to kc (its replica count, for a stack moved from one server to
// a cluster), and returns it once its stream has a leader. Like
// EnsureStreams it retries while a cluster elects leaders, until ctx ends; it
// is idempotent and safe to call from several processes at once that pass
// the same kc.
func EnsureKeyValue(ctx context.Context, js jetstream.JetStream, kc jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := retry(ctx, "cannot create key-value bucket "+kc.Bucket, func(ctx context.Context) error {
		var err error
		kv, err = js.CreateOrUpdateKeyValue(ctx, kc)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := waitStreamLeader(ctx, js, "KV_"+kc.Bucket); err != nil {
		return nil, err
	}
	return kv, nil
}

func ensureWorkStream(ctx context.Context, js jetstream.JetStream, cfg Config, service string) error {
	sc := cfg.streamConfig(service)
	err := retry(ctx, "cannot read stream "+sc.Name, func(ctx context.Context) error {
		s, err := js.Stream(ctx, sc.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if got, ok := s.CachedInfo().Config.Metadata[metaPartitions]; ok && got != strconv.Itoa(cfg.Partitions) {
			return permanentAPIError{fmt.Errorf("stream %s has %s partitions, not %d: drain it and delete it to change the partition count", sc.Name, got, cfg.Partitions)}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := ensureStream(ctx, js, sc); err != nil {
		return err
	}
	for p := range cfg.Partitions {
		cc := cfg.consumerConfig(service, p)
		err := retry(ctx, "cannot create consumer "+cc.Durable, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateConsumer(ctx, sc.Name, cc)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func ensureStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig) error {
	err := retry(ctx, "cannot create stream "+sc.Name, func(ctx context.Context) error {
		_, err := js.CreateOrUpdateStream(ctx, sc)
		return err
	})
	if err != nil {
		return err
	}
	return waitStreamLeader(ctx, js, sc.Name)
}

// checkPartitions fails if service's work stream was created with another
// partition count: publishing or consuming with the wrong count would route
// work to partitions nobody consumes.
func checkPartitions(ctx context.Context, js jetstream.JetStream, service string, partitions int) error {
	s, err := js.Stream(ctx, StreamName(service))
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return permanentAPIError{fmt.Errorf("stream %s not found (call EnsureStreams first): %w", StreamName(service), err)}
		}
		return err
	}
	if got := s.CachedInfo().Config.Metadata[metaPartitions]; got != "" && got != strconv.Itoa(partitions) {
		return permanentAPIError{fmt.Errorf("stream %s has %s partitions, but this process is configured with %d", StreamName(service), got, partitions)}
	}
	return nil
}

// waitStreamLeader returns once the stream has a leader (always at once on a
// single server).
func waitStreamLeader(ctx context.Context, js jetstream.JetStream, name string) error {
	return retry(ctx, "cannot find a leader for stream "+name, func(ctx context.Context) error {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return err
		}
		if c := s.CachedInfo().Cluster; c != nil && c.Leader == "" {
			return errNoLeader
		}
		return nil
	})
}

var errNoLeader = errors.New("no leader elected yet")

// permanentAPIError marks an error that retry must not retry.
type permanentAPIError struct{ error }

func (e permanentAPIError) Unwrap() error { return e.error }

// retry calls f until it succeeds, fails with an error that waiting cannot
// fix, or ctx ends. Each call gets its own timeout.
func retry(ctx context.Context, what string, f func(context.Context) error) error {
	delay := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := f(actx)
		cancel()
		if err == nil {
			return nil
		}
		if !retryable(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// retryableCodes are JetStream API errors a cluster returns while it elects
// leaders, places replicas or recovers a server.
var retryableCodes = []jetstream.ErrorCode{ //nolint:gochecknoglobals // Treated as a constant.
	10004, // incomplete results
	10005, // no suitable peers for placement
	10007, // cluster not assigned to this server
	10008, // JetStream system temporarily unavailable
	10009, // cluster can not handle request (not leader)
	10023, // insufficient resources (a peer is missing)
	10118, // stream is offline
	10119, // consumer is offline
	10194, // stream is offline: reason
	10195, // consumer is offline: reason
	10202, // cluster member change is in progress
	jetstream.JSErrCodeJetStreamNotEnabled,
	jetstream.JSErrCodeJetStreamNotEnabledForAccount,
}

// retryable reports whether waiting may fix err: a timeout, no responders, a
// connection that is reconnecting, a missing leader, or one of
// retryableCodes.
func retryable(err error) bool {
	var perm permanentAPIError
	if errors.As(err, &perm) {
		return false
	}
	var jsErr jetstream.JetStreamError
	if errors.As(err, &jsErr) && jsErr.APIError() != nil {
		return slices.Contains(retryableCodes, jsErr.APIError().ErrorCode)
	}
	for _, e := range []error{context.DeadlineExceeded, nats.ErrTimeout, nats.ErrNoResponders,
		nats.ErrConnectionReconnecting, nats.ErrDisconnected, errNoLeader} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
