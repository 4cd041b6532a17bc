package service

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWarnOnce(t *testing.T) {
	const finalizer = `metadata.finalizers: "finalizer.apiextensions.crossplane.io": prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers`
	cases := map[string]struct {
		reason string
		// warnings are the (code, text) pairs received, in order.
		codes []int
		texts []string
		want  []string
	}{
		"RepeatedOnce": {
			reason: "A warning the API server repeats on every write is logged once.",
			codes:  []int{299, 299, 299},
			texts:  []string{finalizer, finalizer, finalizer},
			want:   []string{finalizer},
		},
		"EachDistinct": {
			reason: "Distinct warnings are each logged, once.",
			codes:  []int{299, 299, 299},
			texts:  []string{"a", "b", "a"},
			want:   []string{"a", "b"},
		},
		"NotAWarning": {
			reason: "Only code 299 is a warning the API server means for the client; others, and empty texts, are dropped.",
			codes:  []int{199, 299},
			texts:  []string{"misc", ""},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			w := &warnOnce{log: slog.New(slog.NewJSONHandler(&out, nil))}
			for i, text := range tc.texts {
				w.HandleWarningHeaderWithContext(t.Context(), tc.codes[i], "", text)
			}
			var got []string
			for line := range strings.Lines(out.String()) {
				var rec struct{ Level, Warning string }
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("cannot decode log line %q: %v", line, err)
				}
				if rec.Level != "WARN" {
					t.Errorf("%s\nlogged %q at %s, want WARN", tc.reason, rec.Warning, rec.Level)
				}
				got = append(got, rec.Warning)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nwarnings logged: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
