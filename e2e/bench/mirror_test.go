//go:build e2e

package bench

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// mirrorClaims is the N of each run of TestBenchMirror.
const mirrorClaims = 20

// mirrorEnv enables TestBenchMirror, which starts two stacks of its own
// (like TestBenchSmall: see smallEnv).
const mirrorEnv = "LOOM_BENCH_MIRROR"

// maxMirrorReadShare is the largest share of the API reads per claim
// without the state plane that a run with it may make (issue 18: workers
// read from JetStream, the API server sees Loom's writes).
const maxMirrorReadShare = 1.0 / 2

// TestBenchMirror runs the benchmark's claims to Ready twice on the real
// control plane, with the state plane off and then on (stack.Options.NoMirror:
// the watcher writes the object mirror and the workers read through it),
// and checks, from the API server's own counters, that Loom's GETs and
// reads per claim fall to half or less with it on, that its writes per
// claim do not grow, that a forced full resync writes nothing with it on,
// and that nothing else changes: every claim Ready with its Secret, every
// XR with its three composed resources, every reference resolved, and the
// composed resources of the same shapes. It never looks at times. Run it
// with
//
//	LOOM_BENCH_MIRROR=1 go test -tags e2e -p 1 -run TestBenchMirror -v ./bench
func TestBenchMirror(t *testing.T) {
	if os.Getenv(mirrorEnv) == "" {
		t.Skipf("set %s=1 to compare the benchmark with and without the object mirror", mirrorEnv)
	}
	runs := map[bool]*Result{}
	for _, mirror := range []bool{false, true} {
		name := map[bool]string{false: "mirror-off", true: "mirror-on"}[mirror]
		res, err := Run(t.Context(), Config{
			Claims:   mirrorClaims,
			Creators: 4,
			Ceiling:  -1,
			NoMirror: !mirror,
			Quiet:    3 * time.Second,
			Name:     name,
			Log:      t.Output(),
		})
		if err != nil {
			t.Fatalf("%s: benchmark failed: %v", name, err)
		}
		t.Logf("%s: %.2f API reads per claim by verb %v, by client %v; %.2f writes per claim by client %v", name,
			res.APIReadsPerClaim, res.APIReadsPerClaimByVerb, res.APIReadsPerClaimByClient, res.APIWritesPerClaim, res.APIWritesPerClaimByClient)
		t.Logf("%s: a full resync made %.0f API reads (%v) and %.0f writes (%v)", name,
			res.ResyncAPIReads, res.ResyncAPIReadsByClient, res.ResyncAPIWrites, res.ResyncAPIWritesByClient)
		counts := map[string]int{
			"claims ready":        res.ClaimsReady,
			"complete XRs":        res.CompleteXRs,
			"claim Secrets":       res.ClaimSecrets,
			"resolved references": res.ResolvedReferences,
		}
		want := map[string]int{
			"claims ready":        mirrorClaims,
			"complete XRs":        mirrorClaims,
			"claim Secrets":       mirrorClaims,
			"resolved references": mirrorClaims,
		}
		if diff := cmp.Diff(want, counts); diff != "" {
			t.Errorf("%s: end state: -want, +got:\n%s", name, diff)
		}
		runs[mirror] = res
	}
	off, on := runs[false], runs[true]
	if diff := cmp.Diff(off.ComposedShapes, on.ComposedShapes); diff != "" {
		t.Errorf("composed resources by shape: -mirror off, +mirror on:\n%s", diff)
	}
	if len(off.ComposedShapes) == 0 {
		t.Errorf("no composed resource was seen, so the comparison proves nothing")
	}
	for what, v := range map[string][2]float64{
		"GETs":  {off.APIReadsPerClaimByVerb["get"], on.APIReadsPerClaimByVerb["get"]},
		"reads": {off.APIReadsPerClaim, on.APIReadsPerClaim},
	} {
		if v[0] <= 0 {
			t.Errorf("without the mirror Loom made %.2f API %s per claim: the comparison proves nothing", v[0], what)
			continue
		}
		if v[1] > v[0]*maxMirrorReadShare {
			t.Errorf("with the mirror Loom made %.2f API %s per claim, without it %.2f: want at most %.0f%% of that", v[1], what, v[0], maxMirrorReadShare*100)
		}
	}
	// Reads from the mirror may be older than the API server's answer;
	// the workers must not write more for it (a stale read written back,
	// or a state a moment from being superseded).
	if on.APIWritesPerClaim > off.APIWritesPerClaim {
		t.Errorf("with the mirror Loom made %.2f API writes per claim (%v), without it %.2f (%v): want no more",
			on.APIWritesPerClaim, on.APIWritesPerClaimByClient, off.APIWritesPerClaim, off.APIWritesPerClaimByClient)
	}
	// A full resync of an unchanged system writes nothing (issue 18), and
	// the mirror is what the workers read it from.
	if on.ResyncAPIWrites != 0 {
		t.Errorf("with the mirror a full resync made %.0f API writes (%v), want 0", on.ResyncAPIWrites, on.ResyncAPIWritesByClient)
	}
	if on.ResyncEventsConsumed <= 0 {
		t.Errorf("with the mirror the services handled no event during the resync: the check of its writes proves nothing")
	}
}
