//go:build e2e

// Package bench is Loom's scale benchmark (issue 10). Run starts a local
// stack of its own (pkg/stack), measures the API server's raw ceiling
// (NopResource creates per second by concurrent clients, with nothing else
// writing), installs the benchmark's XRD, Composition and ReferenceRule
// (testdata/setup.yaml), creates N claims as fast as the API server accepts
// them, waits with watches until each is Ready, and then restarts the
// watcher to check that a full resync writes nothing.
//
// It reads the API server's request counters (apiserver_request_total)
// and, unless told not to, its audit log, which attributes every request
// to a client (Loom's services by ServiceAccount, the test provider, the
// harness); the peak resident memory and CPU time of every process from
// /proc; and the message counts of Loom's JetStream work streams.
//
// RunVS (issue 19) instead measures Loom side by side with upstream
// Crossplane core on fresh stacks of the same control plane and test
// provider, alternating engines, with the baseline's workload
// (testdata/vs): N claims to Ready, one new claim at rest, and one new
// claim while a burst of N claims in another namespace is processed.
// `make bench VS=crossplane` runs it and writes
// bench/results/vs-crossplane.json.
//
// `make bench` runs cmd/loombench, which writes bench/results/latest.json
// and appends a row to BENCHMARKS.md; TestBenchSmall runs a small N and
// asserts only relative properties.
package bench
