//go:build e2e

// Package chaos proves that crashes and restarts never lose, duplicate or
// orphan anything: it runs its own local stack with every Loom service at
// two replicas, creates claims, and while they converge kills Loom
// processes with SIGKILL, restarts the NATS server, restarts kube-apiserver
// and, once per wave of claims, makes a watcher exit between writing a
// change to the object mirror and publishing it. Once everything has
// converged it checks the invariants and writes a report (see Report).
//
// `make e2e` runs it with 100 claims; `make chaos` with 1,000, writing
// bench/results/chaos.json:
//
//	cd e2e && go test -tags e2e -run '^TestChaos$' -v ./chaos -claims 1000 -out ../bench/results/chaos.json
package chaos

import (
	"flag"
	"os"
	"testing"
	"time"
)

var (
	flagClaims    = flag.Int("claims", 100, "how many claims to create")
	flagOut       = flag.String("out", "", "write the report (JSON) to this file")
	flagKillEvery = flag.Duration("kill-every", 3*time.Second, "how often to SIGKILL a random Loom service replica")
	flagConverge  = flag.Duration("converge-timeout", 30*time.Minute, "how long the claims may take to converge")
	// Off, the run injects the faults it injected before the object mirror
	// existed, so its figures compare with runs of older commits.
	flagMirrorCrash = flag.Bool("mirror-crash", true, "once per wave, make a watcher exit between writing the mirror and publishing")
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}
