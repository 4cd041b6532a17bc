// Package fieldpath reads and writes fields of JSON-like objects
// (map[string]any) addressed by Crossplane's field path syntax, the
// "JavaScript without the leading dot" form of the Kubernetes API conventions:
//
//	metadata.name
//	spec.containers[0].name
//	data[.config.yml]
//	metadata.annotations['crossplane.io/external-name']
//	spec.items[0][8]
//	[42]
//
// A path is a sequence of segments separated by periods or written in
// brackets. The content of brackets is literal (periods do not separate) and
// is an array index if it parses as an unsigned 32-bit integer, otherwise an
// object field. Leading and trailing single and double quotes are trimmed from
// every field. A field named "*" is a wildcard that ExpandWildcards replaces
// with every existing index or key. Invalid paths: a leading, trailing or
// doubled period, a period before a bracket, empty brackets, an unterminated
// bracket, a "]" in a field name and a "[" inside brackets. The empty path
// has no segments.
//
// The syntax and the behaviour of Paved are those of crossplane-runtime's
// fieldpath package, so Compositions written for Crossplane address the same
// fields. Loom keeps its own implementation because it renders a Composition
// in half the CPU (BenchmarkRenderBenchComposition in pkg/compose, which
// builds with -tags fieldpath_upstream to run on upstream's); FuzzDifferential
// runs every operation through both and fails on any difference in result,
// in error or no error, or in whether an error means not found. Error texts
// are Loom's own.
package fieldpath

import (
	"fmt"
	"strconv"
	"strings"
)

// Wildcard is the field name that ExpandWildcards expands.
const Wildcard = "*"

const (
	period       = '.'
	leftBracket  = '['
	rightBracket = ']'
)

// A SegmentType says whether a segment names an object field or an array
// index.
type SegmentType int

// Segment types.
const (
	// SegmentField is a field of an object.
	SegmentField SegmentType = iota + 1
	// SegmentIndex is an index of an array.
	SegmentIndex
)

// A Segment is one step of a field path.
type Segment struct {
	// Type of the segment.
	Type SegmentType
	// Field is the object field name of a SegmentField.
	Field string
	// Index is the array index of a SegmentIndex.
	Index uint
}

// Segments of a field path, outermost first.
type Segments []Segment

// String renders the segments as a field path that parses back to the same
// segments (except for empty field names, which have no syntax). Fields that
// contain a period, and wildcards, are written in brackets.
func (sg Segments) String() string {
	var b strings.Builder
	for _, s := range sg {
		switch s.Type {
		case SegmentField:
			if s.Field == Wildcard || strings.ContainsRune(s.Field, period) {
				fmt.Fprintf(&b, "[%s]", s.Field)
				continue
			}
			fmt.Fprintf(&b, ".%s", s.Field)
		case SegmentIndex:
			fmt.Fprintf(&b, "[%d]", s.Index)
		}
	}
	return strings.TrimPrefix(b.String(), ".")
}

// HasWildcard reports whether any segment is a wildcard.
func (sg Segments) HasWildcard() bool {
	for _, s := range sg {
		if s.Type == SegmentField && s.Field == Wildcard {
			return true
		}
	}
	return false
}

// Field returns a segment for the object field s, with leading and trailing
// quotes trimmed.
func Field(s string) Segment {
	return Segment{Type: SegmentField, Field: strings.Trim(s, `'"`)}
}

// FieldOrIndex returns an index segment if s parses as an unsigned 32-bit
// integer, and a field segment otherwise.
func FieldOrIndex(s string) Segment {
	if i, err := strconv.ParseUint(s, 10, 32); err == nil {
		return Segment{Type: SegmentIndex, Index: uint(i)}
	}
	return Field(s)
}

// A ParseError is a field path that is not valid.
type ParseError struct {
	// Path that failed to parse.
	Path string
	// Pos is the byte offset of the offending character.
	Pos int
	// Problem says what is wrong at Pos, e.g. `unexpected '.'`.
	Problem string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("invalid field path %q: %s at position %d", e.Path, e.Problem, e.Pos)
}

// Parse splits a field path into segments. It returns a *ParseError if the
// path is not valid. The empty path has no segments.
func Parse(path string) (Segments, error) {
	return parse(path)
}

// parseLoom is Loom's parser.
func parseLoom(path string) (Segments, error) {
	p := parser{in: path}
	return p.parse()
}

// parser is a hand-written scanner with the same states as the lexer of
// crossplane-runtime: a field, a period, a bracketed field or index.
type parser struct {
	in   string
	pos  int
	segs Segments
}

func (p *parser) fail(pos int, format string, args ...any) (Segments, error) {
	return nil, &ParseError{Path: p.in, Pos: pos, Problem: fmt.Sprintf(format, args...)}
}

func (p *parser) parse() (Segments, error) {
	p.segs = make(Segments, 0, strings.Count(p.in, ".")+1)
	for {
		// A field runs until a period, a left bracket or the end.
		start := p.pos
		for p.pos < len(p.in) && p.in[p.pos] != period && p.in[p.pos] != leftBracket {
			if p.in[p.pos] == rightBracket {
				return p.fail(p.pos, "unexpected %q", rightBracket)
			}
			p.pos++
		}
		if p.pos > start {
			p.segs = append(p.segs, Field(p.in[start:p.pos]))
		}
		if p.pos == len(p.in) {
			return p.segs, nil
		}

		switch p.in[p.pos] {
		case period:
			// A period may not start or end the path, and must be followed
			// by a field name.
			if p.pos == 0 || p.pos == len(p.in)-1 {
				return p.fail(p.pos, "unexpected %q", period)
			}
			p.pos++
			if next := p.in[p.pos]; next == period || next == leftBracket {
				return p.fail(p.pos, "unexpected %q", rune(next))
			}
		case leftBracket:
			rel := strings.IndexByte(p.in[p.pos:], rightBracket)
			if rel < 0 {
				return p.fail(p.pos, "unterminated %q", leftBracket)
			}
			p.pos++ // Past the left bracket.
			if rel == 1 {
				return p.fail(p.pos, "unexpected %q", rightBracket)
			}
			content := p.in[p.pos : p.pos+rel-1]
			if i := strings.IndexByte(content, leftBracket); i >= 0 {
				return p.fail(p.pos+i, "unexpected %q", leftBracket)
			}
			p.segs = append(p.segs, FieldOrIndex(content))
			p.pos += rel // Past the content and the right bracket.
		}
	}
}
