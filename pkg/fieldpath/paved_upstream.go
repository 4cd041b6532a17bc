//go:build fieldpath_upstream

// This file, built with -tags fieldpath_upstream, puts crossplane-runtime's
// fieldpath package behind Loom's API, so that the render benchmark of
// pkg/compose can compare the two implementations on the same code path:
//
//	go test -run '^$' -bench BenchmarkRenderBenchComposition ./compose/
//	go test -tags fieldpath_upstream -run '^$' -bench BenchmarkRenderBenchComposition ./compose/
//
// Upstream's API takes string paths, so every operation on parsed Segments
// renders them back to a string that upstream parses again, as a caller
// of upstream's API would do.

package fieldpath

import (
	"errors"
	"fmt"

	xp "github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"k8s.io/apimachinery/pkg/util/json"
)

func parse(path string) (Segments, error) {
	s, err := xp.Parse(path)
	if err != nil {
		return nil, err
	}
	out := make(Segments, len(s))
	for i := range s {
		out[i] = Segment{Type: SegmentType(s[i].Type), Field: s[i].Field, Index: s[i].Index}
	}
	return out, nil
}

// DefaultMaxFieldPathIndex is upstream's.
const DefaultMaxFieldPathIndex = xp.DefaultMaxFieldPathIndex

// ErrNotFound is matched by IsNotFound.
var ErrNotFound = errors.New("field path not found")

// IsNotFound reports whether err says that a field path does not exist.
func IsNotFound(err error) bool { return xp.IsNotFound(err) || errors.Is(err, ErrNotFound) }

// A Paved object backed by upstream's.
type Paved struct {
	p *xp.Paved
}

// An Option configures a Paved.
type Option func(*[]xp.PavedOption)

// WithMaxFieldPathIndex sets the largest array index SetValue accepts.
func WithMaxFieldPathIndex(max uint) Option {
	return func(o *[]xp.PavedOption) { *o = append(*o, xp.WithMaxFieldPathIndex(max)) }
}

// Pave wraps object.
func Pave(object map[string]any, o ...Option) *Paved {
	if object == nil {
		object = map[string]any{}
	}
	var opts []xp.PavedOption
	for _, fn := range o {
		fn(&opts)
	}
	return &Paved{p: xp.Pave(object, opts...)}
}

// UnstructuredContent returns the underlying object.
func (p *Paved) UnstructuredContent() map[string]any { return p.p.UnstructuredContent() }

// GetValue returns the value at path.
func (p *Paved) GetValue(path string) (any, error) { return p.p.GetValue(path) }

// GetSegments returns the value at s within v.
func GetSegments(v any, s Segments) (any, error) {
	if len(s) == 0 {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the root is not an object")
	}
	return xp.Pave(m).GetValue(s.String())
}

// GetValueInto decodes the value at path into out.
func (p *Paved) GetValueInto(path string, out any) error { return p.p.GetValueInto(path, out) }

// GetString returns the string at path.
func (p *Paved) GetString(path string) (string, error) { return p.p.GetString(path) }

// GetBool returns the boolean at path.
func (p *Paved) GetBool(path string) (bool, error) { return p.p.GetBool(path) }

// GetInteger returns the integer at path.
func (p *Paved) GetInteger(path string) (int64, error) { return p.p.GetInteger(path) }

// GetStringArray returns the array of strings at path.
func (p *Paved) GetStringArray(path string) ([]string, error) { return p.p.GetStringArray(path) }

// GetStringObject returns the object with string values at path.
func (p *Paved) GetStringObject(path string) (map[string]string, error) {
	return p.p.GetStringObject(path)
}

// SetValue sets the value at path.
func (p *Paved) SetValue(path string, value any) error { return p.p.SetValue(path, value) }

// SetSegments is SetValue for a parsed path.
func (p *Paved) SetSegments(s Segments, value any) error {
	if len(s) == 0 {
		return nil
	}
	return p.p.SetValue(s.String(), value)
}

// ToJSON round-trips v through JSON.
func ToJSON(v any) (any, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cannot encode value as JSON: %w", err)
	}
	var out any
	if err := json.Unmarshal(j, &out); err != nil {
		return nil, fmt.Errorf("cannot decode value from JSON: %w", err)
	}
	return out, nil
}

// DeleteField deletes the value at path.
func (p *Paved) DeleteField(path string) error { return p.p.DeleteField(path) }

// ExpandWildcards returns the concrete paths that path denotes.
func (p *Paved) ExpandWildcards(path string) ([]string, error) { return p.p.ExpandWildcards(path) }

// ExpandSegments is ExpandWildcards for a parsed path.
func (p *Paved) ExpandSegments(s Segments) ([]Segments, error) {
	paths, err := p.p.ExpandWildcards(s.String())
	if err != nil {
		return nil, err
	}
	out := make([]Segments, len(paths))
	for i := range paths {
		if out[i], err = parse(paths[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MergeOptions say how MergeValue combines values.
type MergeOptions struct {
	KeepMapValues bool
	AppendSlice   bool
}

func (o *MergeOptions) upstream() *xp.MergeOptions {
	if o == nil {
		return nil
	}
	return &xp.MergeOptions{KeepMapValues: &o.KeepMapValues, AppendSlice: &o.AppendSlice}
}

// MergeValue merges value into the value at path.
func (p *Paved) MergeValue(path string, value any, o *MergeOptions) error {
	return p.p.MergeValue(path, value, o.upstream())
}

// MergeSegments is MergeValue for a parsed path.
func (p *Paved) MergeSegments(s Segments, value any, o *MergeOptions) error {
	if len(s) == 0 {
		return nil
	}
	return p.p.MergeValue(s.String(), value, o.upstream())
}
