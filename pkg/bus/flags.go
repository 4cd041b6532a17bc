package bus

import (
	"flag"
	"fmt"
	"os"
	"strconv"
)

// SchedulingFlags are the command-line flags of a Worker's scheduling that
// every consuming service offers, with environment-variable fallbacks:
// --fair-key (LOOM_FAIR_KEY), --target-budget (LOOM_TARGET_BUDGET) and
// --lookahead (LOOM_LOOKAHEAD).
type SchedulingFlags struct {
	FairKey      string
	TargetBudget int
	Lookahead    int
}

// Register adds the flags to fs, defaulting to the environment, then to
// the bus's defaults.
func (f *SchedulingFlags) Register(fs *flag.FlagSet) {
	key := os.Getenv("LOOM_FAIR_KEY")
	if key == "" {
		key = FairKeyNamespace
	}
	fs.StringVar(&f.FairKey, "fair-key", key,
		"tenant key that waiting work is served round-robin across: namespace or none (env LOOM_FAIR_KEY)")
	fs.IntVar(&f.TargetBudget, "target-budget", envInt("LOOM_TARGET_BUDGET", DefaultTargetBudget),
		"handler runs one target may have in any minute on this replica; 0 for no budget (env LOOM_TARGET_BUDGET)")
	fs.IntVar(&f.Lookahead, "lookahead", envInt("LOOM_LOOKAHEAD", DefaultLookahead),
		"targets of one partition lane that may wait for a handler slot in memory, at most 1000; once an urgent or normal lane holds that many, events of a tenant over its share go to the overflow lane, and tenants under it get as much room again; each waiting event costs an InProgress heartbeat every 5 s (env LOOM_LOOKAHEAD)")
}

// Options returns the Worker options the flags ask for, or an error naming
// the flag that is invalid.
func (f SchedulingFlags) Options() ([]WorkerOption, error) {
	key, err := f.Tenant()
	if err != nil {
		return nil, err
	}
	if f.TargetBudget < 0 {
		return nil, fmt.Errorf("invalid --target-budget: %d is negative", f.TargetBudget)
	}
	if f.Lookahead < 1 || f.Lookahead > maxLookahead {
		return nil, fmt.Errorf("invalid --lookahead: %d is not between 1 and %d (the consumers' MaxAckPending)", f.Lookahead, maxLookahead)
	}
	return []WorkerOption{WithFairKey(key), WithTargetBudget(f.TargetBudget), WithLookahead(f.Lookahead)}, nil
}

// Tenant returns the tenant key function --fair-key names, for services
// that share the bus's idea of a tenant (the renderer's admission), or an
// error naming the flag.
func (f SchedulingFlags) Tenant() (func(Request) string, error) {
	key, err := ParseFairKey(f.FairKey)
	if err != nil {
		return nil, fmt.Errorf("invalid --fair-key: %w", err)
	}
	return key, nil
}

// Flags are the command-line flags of the bus's layout that every service
// offers, with environment-variable fallbacks: --bus-replicas
// (LOOM_BUS_REPLICAS) and --bus-partitions (LOOM_BUS_PARTITIONS). Every
// service of one installation must be given the same values.
type Flags struct {
	Replicas   int
	Partitions int
}

// Register adds the flags to fs, defaulting to the environment, then to
// DefaultReplicas and DefaultPartitions.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.IntVar(&f.Replicas, "bus-replicas", envInt("LOOM_BUS_REPLICAS", DefaultReplicas),
		"replicas of JetStream streams and buckets: 1 on a single server, 3 on a cluster (env LOOM_BUS_REPLICAS)")
	fs.IntVar(&f.Partitions, "bus-partitions", envInt("LOOM_BUS_PARTITIONS", DefaultPartitions),
		"partitions of each work stream; the same for every service (env LOOM_BUS_PARTITIONS)")
}

// Config returns the bus Config the flags describe; its other fields are
// zero, which means their defaults.
func (f Flags) Config() Config {
	return Config{Replicas: f.Replicas, Partitions: f.Partitions}
}

// envInt returns the integer in the environment variable name, or def when
// it is unset or not an integer.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
