package fieldpath

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	type want struct {
		s   Segments
		err error
	}
	f := func(s string) Segment { return Segment{Type: SegmentField, Field: s} }
	ix := func(i uint) Segment { return Segment{Type: SegmentIndex, Index: i} }

	cases := map[string]struct {
		reason string
		path   string
		want   want
	}{
		"Empty": {
			reason: "The empty path has no segments.",
			path:   "",
			want:   want{s: Segments{}},
		},
		"SingleField": {
			reason: "A path without separators is one field.",
			path:   "spec",
			want:   want{s: Segments{f("spec")}},
		},
		"DottedFields": {
			reason: "Periods separate fields.",
			path:   "metadata.name",
			want:   want{s: Segments{f("metadata"), f("name")}},
		},
		"Index": {
			reason: "A bracketed unsigned integer is an index.",
			path:   "spec.containers[0].name",
			want:   want{s: Segments{f("spec"), f("containers"), ix(0), f("name")}},
		},
		"BracketedFieldWithPeriods": {
			reason: "Periods within brackets are part of the field name.",
			path:   "data[.config.yml]",
			want:   want{s: Segments{f("data"), f(".config.yml")}},
		},
		"QuotedBracketedField": {
			reason: "Quotes around a bracketed field are trimmed.",
			path:   "metadata.annotations['crossplane.io/external-name']",
			want:   want{s: Segments{f("metadata"), f("annotations"), f("crossplane.io/external-name")}},
		},
		"DoubleQuotedBracketedField": {
			reason: "Double quotes are trimmed too.",
			path:   `metadata.labels["app"]`,
			want:   want{s: Segments{f("metadata"), f("labels"), f("app")}},
		},
		"QuotedDottedField": {
			reason: "Quotes are trimmed from dotted fields as well.",
			path:   `a.'b'`,
			want:   want{s: Segments{f("a"), f("b")}},
		},
		"QuotedNumberIsField": {
			reason: "A quoted number is not an unsigned integer, so it is a field.",
			path:   `a['0']`,
			want:   want{s: Segments{f("a"), f("0")}},
		},
		"HugeNumberIsField": {
			reason: "A number beyond 32 bits is a field name.",
			path:   `a[4294967296]`,
			want:   want{s: Segments{f("a"), f("4294967296")}},
		},
		"NegativeNumberIsField": {
			reason: "A negative number is a field name.",
			path:   `a[-1]`,
			want:   want{s: Segments{f("a"), f("-1")}},
		},
		"ConsecutiveIndices": {
			reason: "Brackets may follow each other.",
			path:   "spec.items[0][8]",
			want:   want{s: Segments{f("spec"), f("items"), ix(0), ix(8)}},
		},
		"LeadingIndex": {
			reason: "A path may start with a bracket.",
			path:   "[42]",
			want:   want{s: Segments{ix(42)}},
		},
		"FieldAfterBracketWithoutPeriod": {
			reason: "A field may follow a bracket directly, as upstream allows.",
			path:   "a[0]b",
			want:   want{s: Segments{f("a"), ix(0), f("b")}},
		},
		"Wildcards": {
			reason: "A * is a wildcard field in either notation.",
			path:   "spec.items[*].tags.*",
			want:   want{s: Segments{f("spec"), f("items"), f("*"), f("tags"), f("*")}},
		},
		"LeadingPeriod": {
			reason: "A path may not start with a period.",
			path:   ".metadata.name",
			want:   want{err: &ParseError{Path: ".metadata.name", Pos: 0, Problem: "unexpected '.'"}},
		},
		"TrailingPeriod": {
			reason: "A path may not end with a period.",
			path:   "metadata.name.",
			want:   want{err: &ParseError{Path: "metadata.name.", Pos: 13, Problem: "unexpected '.'"}},
		},
		"DoublePeriod": {
			reason: "Two periods in a row are invalid.",
			path:   "metadata..name",
			want:   want{err: &ParseError{Path: "metadata..name", Pos: 9, Problem: "unexpected '.'"}},
		},
		"PeriodBeforeBracket": {
			reason: "A period may not precede a bracket.",
			path:   "spec.containers.[0].name",
			want:   want{err: &ParseError{Path: "spec.containers.[0].name", Pos: 16, Problem: "unexpected '['"}},
		},
		"EmptyBrackets": {
			reason: "Brackets may not be empty.",
			path:   "spec.containers[]",
			want:   want{err: &ParseError{Path: "spec.containers[]", Pos: 16, Problem: "unexpected ']'"}},
		},
		"UnterminatedBracket": {
			reason: "A bracket must be closed.",
			path:   "spec.containers[0",
			want:   want{err: &ParseError{Path: "spec.containers[0", Pos: 15, Problem: "unterminated '['"}},
		},
		"RightBracketInField": {
			reason: "A right bracket may not appear in a field name.",
			path:   "spec]",
			want:   want{err: &ParseError{Path: "spec]", Pos: 4, Problem: "unexpected ']'"}},
		},
		"LeftBracketInBrackets": {
			reason: "A left bracket may not appear within brackets.",
			path:   "a[b[0]]",
			want:   want{err: &ParseError{Path: "a[b[0]]", Pos: 3, Problem: "unexpected '['"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.path)
			if diff := cmp.Diff(tc.want.err, err); diff != "" {
				t.Errorf("%s\nParse(%q): -want error, +got error:\n%s", tc.reason, tc.path, diff)
			}
			if diff := cmp.Diff(tc.want.s, got); diff != "" {
				t.Errorf("%s\nParse(%q): -want, +got:\n%s", tc.reason, tc.path, diff)
			}
		})
	}
}

func TestParseErrorMessage(t *testing.T) {
	_, err := Parse("spec..a")
	want := `invalid field path "spec..a": unexpected '.' at position 5`
	if err == nil || err.Error() != want {
		t.Errorf("Parse(%q): want error %q, got %v", "spec..a", want, err)
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Errorf("Parse(%q): want a *ParseError, got %T", "spec..a", err)
	}
}

func TestSegmentsString(t *testing.T) {
	cases := map[string]struct {
		reason string
		path   string
		want   string
	}{
		"Plain":    {reason: "Fields are joined by periods.", path: "metadata.name", want: "metadata.name"},
		"Index":    {reason: "Indices are bracketed.", path: "a[0].b[1][2]", want: "a[0].b[1][2]"},
		"Period":   {reason: "A field with a period is bracketed.", path: "a['b.c'].d", want: "a[b.c].d"},
		"Wildcard": {reason: "Wildcards are bracketed.", path: "a.*.b", want: "a[*].b"},
		"Quotes":   {reason: "Trimmed quotes do not come back.", path: `a["b"]`, want: "a.b"},
		"Leading":  {reason: "A leading index has no period before it.", path: "[3].a", want: "[3].a"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Parse(tc.path)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.path, err)
			}
			if diff := cmp.Diff(tc.want, s.String()); diff != "" {
				t.Errorf("%s\nString(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// FuzzParse checks that the parser never panics, and that every path it
// accepts renders to a path that parses back to the same segments.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "a", "metadata.name", "spec.containers[0].name", "data[.config.yml]",
		"metadata.annotations['crossplane.io/external-name']", "spec.items[0][8]", "[42]",
		"a[*].b.*", ".a", "a.", "a..b", "a.[0]", "a[]", "a[0", "a]", "a[b[0]]", `a["b"]`, "a[0]b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		s, err := Parse(path)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q): want a *ParseError, got %T", path, err)
			}
			if pe.Pos < 0 || pe.Pos > len(path) {
				t.Fatalf("Parse(%q): error position %d is outside the path", path, pe.Pos)
			}
			return
		}
		for _, seg := range s {
			if seg.Type == SegmentField && seg.Field == "" {
				return // Empty field names have no syntax of their own.
			}
		}
		again, err := Parse(s.String())
		if err != nil {
			t.Fatalf("Parse(%q) = %q, which does not parse: %v", path, s.String(), err)
		}
		if diff := cmp.Diff(s, again); diff != "" {
			t.Fatalf("Parse(%q) does not round-trip through %q: -first, +second:\n%s", path, s.String(), diff)
		}
	})
}
