package bus

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The services that consume work from the bus. Each has its own work stream.
const (
	Renderer = "renderer"
	Binder   = "binder"
	Secrets  = "secrets"
)

// Services lists every consuming service, in a fixed order.
var Services = []string{Renderer, Binder, Secrets} //nolint:gochecknoglobals // Treated as a constant.

// Names of the JetStream objects the bus keeps. Work streams are named
// LOOM_<SERVICE>; see StreamName.
const (
	// DeadLetterStream holds messages that failed permanently or exhausted
	// their deliveries, on subjects loom.dlq.<service>.
	DeadLetterStream = "LOOM_DLQ"
	// MembersBucket is the key-value bucket of worker heartbeats, keyed
	// <service>.<replicaID>.
	MembersBucket = "LOOM_MEMBERS"
	// LeasesBucket is the key-value bucket of partition leases, keyed
	// <service>.<partition>.
	LeasesBucket = "LOOM_LEASES"

	subjectPrefix = "loom"
	dlqToken      = "dlq"
	// metaPartitions is the stream metadata key that records the partition
	// count a work stream was created with.
	metaPartitions = "loom.dev/partitions"
)

// Defaults applied by Config to zero fields.
const (
	DefaultReplicas         = 1
	DefaultPartitions       = 32
	DefaultMaxDeliver       = 10
	DefaultAckWait          = 10 * time.Second
	DefaultDuplicateWindow  = 2 * time.Minute
	DefaultLeaseTTL         = 6 * time.Second
	DefaultDeadLetterMaxAge = 14 * 24 * time.Hour
	DefaultDeadLetterMax    = 100_000
)

// Config describes the JetStream objects of the bus and how workers use
// them. The zero value is valid: zero fields take the defaults above. The same
// Config (at least Partitions) must be given to EnsureStreams, every Publisher
// and every Worker; EnsureStreams records Partitions on each stream and
// refuses a different value later, and workers take the lease TTL from the
// bucket rather than from their own Config.
type Config struct {
	// Replicas is the replica count of every stream, consumer and key-value
	// bucket: 1 on a single server, 3 on a three-server cluster.
	Replicas int
	// Partitions is the number of partitions of each work stream; work for
	// one target always lands in the same partition (fnv-1a of its UID).
	// Changing it for existing streams is refused.
	Partitions int
	// MaxDeliver is how many times a message is delivered before it is
	// dead-lettered. Workers enforce it (the server does not, so that a message
	// is never left undeliverable in a work-queue stream).
	MaxDeliver int
	// AckWait is how long the server waits for an ack before it redelivers.
	// Workers send InProgress every AckWait/3 while a handler runs, so it
	// bounds how late a crashed replica's messages are redelivered, not how
	// long a handler may run.
	AckWait time.Duration
	// DuplicateWindow is how long a Nats-Msg-Id is remembered for publish
	// deduplication.
	DuplicateWindow time.Duration
	// LeaseTTL is how long a partition lease and a worker heartbeat live
	// without renewal: a crashed replica's partitions get a new owner after
	// about this long. At least one second.
	LeaseTTL time.Duration
	// Storage is the storage of every stream and bucket; the zero value is
	// file storage.
	Storage jetstream.StorageType
	// DeadLetterMaxAge is how long dead letters are kept.
	DeadLetterMaxAge time.Duration
	// DeadLetterMaxMsgs bounds the dead-letter stream; the oldest go first.
	DeadLetterMaxMsgs int64
}

// withDefaults returns c with zero fields set to their defaults, or an error
// if a field is invalid.
func (c Config) withDefaults() (Config, error) {
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = DefaultMaxDeliver
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.DeadLetterMaxAge == 0 {
		c.DeadLetterMaxAge = DefaultDeadLetterMaxAge
	}
	if c.DeadLetterMaxMsgs == 0 {
		c.DeadLetterMaxMsgs = DefaultDeadLetterMax
	}
	return c, c.validate()
}

// Validate reports whether c, with defaults applied, is usable.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

func (c Config) validate() error {
	var errs []error
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("replicas must be between 1 and 5, not %d", c.Replicas))
	}
	if c.Partitions < 1 || c.Partitions > 1024 {
		errs = append(errs, fmt.Errorf("partitions must be between 1 and 1024, not %d", c.Partitions))
	}
	if c.MaxDeliver < 1 {
		errs = append(errs, fmt.Errorf("max deliver must be at least 1, not %d", c.MaxDeliver))
	}
	if c.AckWait < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("ack wait must be at least 100ms, not %s", c.AckWait))
	}
	if c.DuplicateWindow < 0 {
		errs = append(errs, fmt.Errorf("duplicate window must not be negative, not %s", c.DuplicateWindow))
	}
	if c.LeaseTTL < time.Second {
		errs = append(errs, fmt.Errorf("lease TTL must be at least 1s, not %s", c.LeaseTTL))
	}
	if c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage {
		errs = append(errs, fmt.Errorf("unknown storage type %d", c.Storage))
	}
	if c.DeadLetterMaxAge < 0 {
		errs = append(errs, fmt.Errorf("dead-letter max age must not be negative, not %s", c.DeadLetterMaxAge))
	}
	if c.DeadLetterMaxMsgs < 1 {
		errs = append(errs, fmt.Errorf("dead-letter max messages must be at least 1, not %d", c.DeadLetterMaxMsgs))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid bus config: %w", err)
	}
	return nil
}

// StreamName is the work stream of a service, for example LOOM_RENDERER.
func StreamName(service string) string {
	return "LOOM_" + upper(service)
}

// ConsumerName is the durable consumer of one partition of a service's work
// stream, for example renderer-p07.
func ConsumerName(service string, partition int) string {
	return fmt.Sprintf("%s-p%02d", service, partition)
}

// UrgentConsumerName is the durable consumer of one partition's urgent lane:
// <service>-pNN-urgent.
func UrgentConsumerName(service string, partition int) string {
	return ConsumerName(service, partition) + "-" + urgentToken
}

// ResyncConsumerName is the durable consumer of one partition's resync
// lane: <service>-pNN-resync.
func ResyncConsumerName(service string, partition int) string {
	return ConsumerName(service, partition) + "-" + resyncToken
}

// OverflowConsumerName is the durable consumer of one partition's overflow
// lane: <service>-pNN-overflow.
func OverflowConsumerName(service string, partition int) string {
	return ConsumerName(service, partition) + "-" + overflowToken
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// isService reports whether s is one of Services.
func isService(s string) bool {
	for _, x := range Services {
		if x == s {
			return true
		}
	}
	return false
}

// streamConfig is the work stream of a service: work-queue retention drops
// acked messages, and one message per subject (per target) makes a newer
// request replace an unprocessed older one.
func (c Config) streamConfig(service string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              StreamName(service),
		Description:       fmt.Sprintf("Loom work requests for the %s service", service),
		Subjects:          []string{fmt.Sprintf("%s.%s.>", subjectPrefix, service)},
		Retention:         jetstream.WorkQueuePolicy,
		MaxMsgsPerSubject: 1,
		Discard:           jetstream.DiscardOld,
		Storage:           c.Storage,
		Replicas:          c.Replicas,
		Duplicates:        c.DuplicateWindow,
		Metadata:          map[string]string{metaPartitions: fmt.Sprint(c.Partitions)},
	}
}

// deadLetterConfig is the dead-letter stream shared by every service.
func (c Config) deadLetterConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        DeadLetterStream,
		Description: "Loom work requests that failed permanently or exhausted their deliveries",
		Subjects:    []string{fmt.Sprintf("%s.%s.>", subjectPrefix, dlqToken)},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      c.DeadLetterMaxAge,
		MaxMsgs:     c.DeadLetterMaxMsgs,
		Discard:     jetstream.DiscardOld,
		Storage:     c.Storage,
		Replicas:    c.Replicas,
		Duplicates:  c.DuplicateWindow,
	}
}

// consumerConfig is the durable pull consumer of one partition. The server
// never gives up on a message (MaxDeliver -1); workers dead-letter it instead
// once it reaches Config.MaxDeliver, so nothing is left stuck in a
// work-queue stream.
func (c Config) consumerConfig(service string, partition int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       ConsumerName(service, partition),
		Description:   fmt.Sprintf("Loom %s partition %d", service, partition),
		FilterSubject: partitionFilter(service, partition),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: maxLookahead,
		Replicas:      c.Replicas,
	}
}

// urgentConsumerConfig is the durable pull consumer of one partition's
// urgent lane.
func (c Config) urgentConsumerConfig(service string, partition int) jetstream.ConsumerConfig {
	return c.laneConsumerConfig(service, partition, urgentToken)
}

// resyncConsumerConfig is the durable pull consumer of one partition's
// resync lane.
func (c Config) resyncConsumerConfig(service string, partition int) jetstream.ConsumerConfig {
	return c.laneConsumerConfig(service, partition, resyncToken)
}

// overflowConsumerConfig is the durable pull consumer of one partition's
// overflow lane.
func (c Config) overflowConsumerConfig(service string, partition int) jetstream.ConsumerConfig {
	return c.laneConsumerConfig(service, partition, overflowToken)
}

// laneConsumerConfig is the durable pull consumer of the lane of one
// partition whose subjects end in token, configured as consumerConfig:
// <service>-pNN-<token> on loom.<service>.<partition>.*.<token>.
func (c Config) laneConsumerConfig(service string, partition int, token string) jetstream.ConsumerConfig {
	cc := c.consumerConfig(service, partition)
	cc.Durable = ConsumerName(service, partition) + "-" + token
	cc.Description = fmt.Sprintf("Loom %s partition %d, %s lane", service, partition, token)
	cc.FilterSubject = partitionFilter(service, partition) + "." + token
	return cc
}

// kvConfig is a key-value bucket whose entries vanish ttl after their last
// write. Limit markers make the expiry visible to watchers as a purge, so a
// waiting replica learns of it at once.
func (c Config) kvConfig(bucket string, ttl time.Duration) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:         bucket,
		History:        1,
		TTL:            ttl,
		LimitMarkerTTL: ttl,
		Storage:        c.Storage,
		Replicas:       c.Replicas,
	}
}
