//go:build e2e

package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/loomxr/loom/pkg/stack"
)

// smallClaims is the N of TestBenchSmall: enough to see per-claim costs,
// small enough for `make e2e`.
const smallClaims = 50

// maxWritesPerClaim is issue 10's budget of Loom's API writes per claim of
// three composed resources, connection Secrets included.
const maxWritesPerClaim = 12

// smallEnv enables TestBenchSmall. It is off by default because the test
// starts a stack of its own next to the e2e package's, and because Loom
// does not meet its write budget yet (see BENCHMARKS.md); `make test`
// will set it once it does.
const smallEnv = "LOOM_BENCH_SMALL"

// TestBenchSmall runs the benchmark with a few claims and checks only
// relative properties, never times: every claim Ready with its three
// composed resources, its resolved reference and its connection Secret;
// Loom's writes per claim within budget; a full resync that publishes
// events but writes nothing. The results go to
// bench/results/tmp/small.json. Run it with
//
//	LOOM_BENCH_SMALL=1 go test -tags e2e -run TestBenchSmall -v ./bench
func TestBenchSmall(t *testing.T) {
	if os.Getenv(smallEnv) == "" {
		t.Skipf("set %s=1 to run the small benchmark", smallEnv)
	}
	res, err := Run(t.Context(), Config{
		Claims:  smallClaims,
		Ceiling: 3 * time.Second,
		Name:    "small",
		Log:     t.Output(),
	})
	if res != nil {
		root, rerr := stack.FindRepoRoot(".")
		if rerr == nil {
			path := filepath.Join(root, "bench", "results", "tmp", "small.json")
			if werr := WriteJSON(path, res); werr != nil {
				t.Errorf("cannot write results: %v", werr)
			}
			t.Logf("results: %s", path)
		}
	}
	if err != nil {
		t.Fatalf("benchmark failed: %v", err)
	}
	t.Logf("Loom writes per claim by client and request: %v", res.APIWritesPerClaimByClient)
	t.Logf("conflicts: %v", res.Conflicts)

	counts := map[string]int{
		"claims ready":        res.ClaimsReady,
		"complete XRs":        res.CompleteXRs,
		"claim Secrets":       res.ClaimSecrets,
		"resolved references": res.ResolvedReferences,
	}
	want := map[string]int{
		"claims ready":        smallClaims,
		"complete XRs":        smallClaims,
		"claim Secrets":       smallClaims,
		"resolved references": smallClaims,
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("end state: -want, +got:\n%s", diff)
	}
	if res.APIWritesPerClaim > maxWritesPerClaim {
		t.Errorf("Loom wrote %.2f times per claim, want at most %d: %v", res.APIWritesPerClaim, maxWritesPerClaim, res.APIWritesPerClaimByClient)
	}
	if res.ResyncEventsConsumed <= 0 {
		t.Errorf("the services handled no event during the resync, so it proves nothing")
	}
	if res.ResyncAPIWrites != 0 {
		t.Errorf("a full resync in steady state caused %.0f API writes, want 0: %v", res.ResyncAPIWrites, res.ResyncAPIWritesByClient)
	}
}

func TestParseRequests(t *testing.T) {
	cases := map[string]struct {
		reason  string
		text    string
		want    requestCounts
		wantErr bool
	}{
		"Series": {
			reason: "Series of apiserver_request_total are summed by verb, group, resource, subresource and code; other metrics are ignored.",
			text: `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
apiserver_request_total{code="201",component="apiserver",dry_run="",group="nop.crossplane.io",resource="nopresources",scope="resource",subresource="",verb="POST",version="v1alpha1"} 12
apiserver_request_total{code="200",component="apiserver",dry_run="",group="nop.crossplane.io",resource="nopresources",scope="resource",subresource="status",verb="APPLY",version="v1alpha1"} 3
apiserver_request_total{code="201",component="apiserver",dry_run="All",group="nop.crossplane.io",resource="nopresources",scope="resource",subresource="",verb="POST",version="v1alpha1"} 1
apiserver_request_count{code="200"} 7
`,
			want: requestCounts{
				{Verb: "POST", Group: "nop.crossplane.io", Resource: "nopresources", Code: "201"}:                         13,
				{Verb: "APPLY", Group: "nop.crossplane.io", Resource: "nopresources", Subresource: "status", Code: "200"}: 3,
			},
		},
		"Escapes": {
			reason: "Escaped quotes and commas inside label values do not split labels.",
			text:   `apiserver_request_total{code="200",resource="a\",b",verb="GET"} 2` + "\n",
			want:   requestCounts{{Verb: "GET", Resource: `a",b`, Code: "200"}: 2},
		},
		"Malformed": {
			reason:  "A line without a value is an error.",
			text:    `apiserver_request_total{code="200"}` + "\n",
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseRequests(tc.text)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nparseRequests(...): error %v, want error %t", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" && !tc.wantErr {
				t.Errorf("%s\nparseRequests(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	cases := map[string]struct {
		reason string
		xs     []float64
		p      float64
		want   float64
	}{
		"Empty":  {reason: "No values give 0.", p: 0.5, want: 0},
		"Median": {reason: "Nearest rank: the 50th percentile of 1..4 is 2.", xs: []float64{4, 1, 3, 2}, p: 0.5, want: 2},
		"P99":    {reason: "The 99th percentile of 100 values is the 99th smallest.", xs: seq(100), p: 0.99, want: 99},
		"Max":    {reason: "The 100th percentile is the largest value.", xs: []float64{3, 9, 1}, p: 1, want: 9},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := percentile(tc.xs, tc.p); got != tc.want {
				t.Errorf("%s\npercentile(%v, %v) = %v, want %v", tc.reason, tc.xs, tc.p, got, tc.want)
			}
		})
	}
}

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i + 1)
	}
	return out
}

func TestClientOf(t *testing.T) {
	cases := map[string]struct {
		reason string
		user   string
		want   string
	}{
		"Service":    {reason: "Loom's services are named by their ServiceAccount.", user: "system:serviceaccount:loom-system:loom-renderer", want: "renderer"},
		"Provider":   {reason: "So is the test provider.", user: "system:serviceaccount:loom-system:loom-provider-nop", want: ClientProvider},
		"Harness":    {reason: "The admin certificate is the harness.", user: "loom-admin", want: ClientHarness},
		"Crossplane": {reason: "Upstream Crossplane core runs as its own ServiceAccount (RunVS).", user: "system:serviceaccount:crossplane-system:crossplane", want: ClientCrossplane},
		"KCM":        {reason: "Controllers of kube-controller-manager use kube-system ServiceAccounts.", user: "system:serviceaccount:kube-system:generic-garbage-collector", want: ClientKCM},
		"Other":      {reason: "Anyone else keeps their user name.", user: "system:anonymous", want: "system:anonymous"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := clientOf(tc.user); got != tc.want {
				t.Errorf("%s\nclientOf(%q) = %q, want %q", tc.reason, tc.user, got, tc.want)
			}
		})
	}
}

func TestServiceOf(t *testing.T) {
	cases := map[string]struct {
		reason  string
		process string
		want    string
	}{
		"Replica":      {reason: "A replica belongs to its service.", process: "renderer-2", want: "renderer"},
		"Hyphenated":   {reason: "A hyphenated service keeps its name.", process: "provider-nop-0", want: "provider-nop"},
		"ControlPlane": {reason: "Other processes are their own service.", process: "kube-apiserver", want: "kube-apiserver"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := serviceOf(tc.process); got != tc.want {
				t.Errorf("%s\nserviceOf(%q) = %q, want %q", tc.reason, tc.process, got, tc.want)
			}
		})
	}
}
