package claim

import (
	"math/rand/v2"
	"strings"
)

// The API server's GenerateName algorithm (SimpleNameGenerator): the base is
// truncated so that base plus suffix fit in 63 characters, then five random
// characters from an alphabet without vowels (no accidental words) and
// without easily confused characters are appended.
const (
	nameAlphabet       = "bcdfghjklmnpqrstvwxz2456789"
	nameSuffixLength   = 5
	maxNameLength      = 63
	maxGeneratedLength = maxNameLength - nameSuffixLength
)

// A NameGenerator returns a new name that starts with base, exactly as the
// API server would for metadata.generateName.
type NameGenerator interface {
	GenerateName(base string) string
}

// A NameGeneratorFn is a function that satisfies NameGenerator.
type NameGeneratorFn func(base string) string

// GenerateName calls fn.
func (fn NameGeneratorFn) GenerateName(base string) string { return fn(base) }

// RandomNames generates names like the API server's SimpleNameGenerator,
// drawing the suffix from r (nil for the default source).
type RandomNames struct {
	r *rand.Rand
}

// NewRandomNames returns a generator drawing from r, or from the default
// source if r is nil. A generator with its own source is not safe for
// concurrent use; the default one is.
func NewRandomNames(r *rand.Rand) *RandomNames { return &RandomNames{r: r} }

// GenerateName returns base, truncated to 58 characters, followed by five
// random characters from bcdfghjklmnpqrstvwxz2456789.
func (g *RandomNames) GenerateName(base string) string {
	if len(base) > maxGeneratedLength {
		base = base[:maxGeneratedLength]
	}
	b := make([]byte, nameSuffixLength)
	for i := range b {
		var n int
		if g.r != nil {
			n = g.r.IntN(len(nameAlphabet))
		} else {
			n = rand.IntN(len(nameAlphabet)) //nolint:gosec // Names need to be unlikely to collide, not unpredictable.
		}
		b[i] = nameAlphabet[n]
	}
	return base + string(b)
}

// Generated reports whether name looks like one generated for a claim named
// claim: the claim's name (truncated as GenerateName truncates it), a dash,
// and five characters of the generator's alphabet.
func Generated(claim, name string) bool {
	base := claim + "-"
	if len(base) > maxGeneratedLength {
		base = base[:maxGeneratedLength]
	}
	suffix, ok := strings.CutPrefix(name, base)
	if !ok || len(suffix) != nameSuffixLength {
		return false
	}
	for _, c := range suffix {
		if !strings.ContainsRune(nameAlphabet, c) {
			return false
		}
	}
	return true
}
