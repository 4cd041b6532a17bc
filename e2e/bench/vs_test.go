//go:build e2e

package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSpreadOf(t *testing.T) {
	cases := map[string]struct {
		reason string
		xs     []float64
		want   Spread
	}{
		"Empty": {reason: "No values give the zero spread.", want: Spread{}},
		"Odd":   {reason: "The median of an odd count is the middle value.", xs: []float64{3, 1, 2}, want: Spread{Min: 1, Median: 2, Max: 3, Values: []float64{3, 1, 2}}},
		"Even":  {reason: "The median of an even count is the mean of the middle two.", xs: []float64{4, 1}, want: Spread{Min: 1, Median: 2.5, Max: 4, Values: []float64{4, 1}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, spreadOf(tc.xs)); diff != "" {
				t.Errorf("%s\nspreadOf(%v): -want, +got:\n%s", tc.reason, tc.xs, diff)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	rep := VSReport{Rounds: 2, Runs: []EngineResult{
		{Engine: EngineCrossplane, Round: 1, ClaimsPerS: 10, EngineRequestsPerClaim: 56, SteadyNewClaimP99S: 0.9},
		{Engine: EngineLoom, Round: 1, ClaimsPerS: 15, EngineRequestsPerClaim: 28, SteadyNewClaimP99S: 0.6},
		{Engine: EngineCrossplane, Round: 2, ClaimsPerS: 8, EngineRequestsPerClaim: 56, SteadyNewClaimP99S: 0.9},
		{Engine: EngineLoom, Round: 2, ClaimsPerS: 16, EngineRequestsPerClaim: 28, SteadyNewClaimP99S: 0.6},
	}}
	rep.summarize()
	type figures struct {
		Ratio                 Spread
		XPClaimsPerS          Spread
		RequestsRatio, Steady float64
	}
	got := figures{rep.ClaimsPerSRatio, rep.Summary[EngineCrossplane].ClaimsPerS, rep.EngineRequestsRatio, rep.SteadyNewClaimP99Ratio}
	want := figures{
		Ratio:         Spread{Min: 1.5, Median: 1.75, Max: 2, Values: []float64{1.5, 2}},
		XPClaimsPerS:  Spread{Min: 8, Median: 9, Max: 10, Values: []float64{10, 8}},
		RequestsRatio: 2, Steady: 1.5,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("The claims/s ratio is Loom's over Crossplane's per round; the other ratios Crossplane's median over Loom's.\n-want, +got:\n%s", diff)
	}
}

func TestAppendVSRow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	before := "# Benchmarks\n\n" + vsTableHeader + "\n|---|\n| old row |\n\n## Results\n\n| other | table |\n"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := VSReport{StartedAt: time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC), Claims: 50, Rounds: 2, Runs: []EngineResult{
		{Engine: EngineCrossplane, Round: 1, ClaimsPerS: 8, LoadAvgAtStart: "3.5 2 1"},
		{Engine: EngineLoom, Round: 1, ClaimsPerS: 12, LoadAvgAtStart: "4.0 2 1"},
	}}
	rep.summarize()
	if err := AppendVSRow(path, rep); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if got, want := len(lines), len(strings.Split(before, "\n"))+1; got != want {
		t.Fatalf("AppendVSRow added %d lines, want 1:\n%s", got-want+1, b)
	}
	if row := lines[5]; !strings.HasPrefix(row, "| 2026-11-26 18:00 |") || !strings.Contains(row, "| 8.00 | 12.00 | 1.50 |") || !strings.Contains(row, "load 3.5/4.0") {
		t.Errorf("The row goes below the table's last row, with both engines' claims/s and the ratio; got line 5 %q in:\n%s", row, b)
	}
}

func TestAppendVSRowNoTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := os.WriteFile(path, []byte("# Benchmarks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := AppendVSRow(path, VSReport{}); err == nil {
		t.Error("A file without the side-by-side table is an error, not a row appended anywhere.")
	}
}
