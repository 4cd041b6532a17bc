package claim

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGenerateName(t *testing.T) {
	long := strings.Repeat("a", 100) + "-"
	cases := map[string]struct {
		reason     string
		base       string
		wantPrefix string
		wantLen    int
	}{
		"Short": {
			reason:     "A short base is kept whole and gets five characters more.",
			base:       "my-claim-",
			wantPrefix: "my-claim-",
			wantLen:    len("my-claim-") + 5,
		},
		"Long": {
			reason:     "A long base is truncated to 58 characters so the name fits in 63.",
			base:       long,
			wantPrefix: strings.Repeat("a", 58),
			wantLen:    63,
		},
		"Exactly58": {
			reason:     "A base of exactly 58 characters is not truncated.",
			base:       strings.Repeat("b", 57) + "-",
			wantPrefix: strings.Repeat("b", 57) + "-",
			wantLen:    63,
		},
	}
	g := NewRandomNames(rand.New(rand.NewPCG(1, 2)))
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := g.GenerateName(tc.base)
			if !strings.HasPrefix(got, tc.wantPrefix) {
				t.Errorf("\n%s\nGenerateName(%q) = %q, want prefix %q", tc.reason, tc.base, got, tc.wantPrefix)
			}
			if diff := cmp.Diff(tc.wantLen, len(got)); diff != "" {
				t.Errorf("\n%s\nlen(GenerateName(%q)): -want, +got:\n%s", tc.reason, tc.base, diff)
			}
			for _, c := range got[len(got)-5:] {
				if !strings.ContainsRune(nameAlphabet, c) {
					t.Errorf("\n%s\nGenerateName(%q) = %q: suffix character %q is not in %q", tc.reason, tc.base, got, c, nameAlphabet)
				}
			}
		})
	}
}

func TestGenerateNameUsesWholeAlphabet(t *testing.T) {
	// 10,000 suffix characters drawn uniformly from 27 miss one of them with
	// a probability below 1e-160: a miss means the suffix is not random.
	g := NewRandomNames(nil)
	seen := map[rune]int{}
	for range 2000 {
		n := g.GenerateName("c-")
		for _, c := range n[2:] {
			seen[c]++
		}
	}
	for _, c := range nameAlphabet {
		if seen[c] == 0 {
			t.Errorf("GenerateName never used %q in 10,000 suffix characters", c)
		}
	}
	if diff := cmp.Diff(len(nameAlphabet), len(seen)); diff != "" {
		t.Errorf("distinct suffix characters: -want, +got:\n%s", diff)
	}
}
