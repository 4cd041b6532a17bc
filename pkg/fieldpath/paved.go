//go:build !fieldpath_upstream

package fieldpath

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/json"
)

// DefaultMaxFieldPathIndex is the largest array index SetValue accepts by
// default, so that a path like a[4294967295] cannot allocate gigabytes.
const DefaultMaxFieldPathIndex = 1024

// ErrNotFound is matched (errors.Is) by every error that says a field path
// does not exist: a missing field, an index beyond the end of an array, or a
// null intermediate value.
var ErrNotFound = errors.New("field path not found")

// A NotFoundError says that a field path does not exist in an object.
type NotFoundError struct {
	// Path is the prefix of the requested path that does not exist.
	Path Segments
	// Problem says what is missing, e.g. "no such field".
	Problem string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("%s: %s", e.Path, e.Problem) }

// Is makes a *NotFoundError match ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// IsNotFound reports whether err says that a field path does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// A TypeError says that a field path traverses or reads a value of the wrong
// type, for example an index into an object.
type TypeError struct {
	// Path is the prefix of the requested path whose value has the wrong type.
	Path Segments
	// Want is the type the path needed there: "an object", "an array",
	// "a string", ...
	Want string
}

func (e *TypeError) Error() string {
	if len(e.Path) == 0 {
		return fmt.Sprintf("the root is not %s", e.Want)
	}
	return fmt.Sprintf("%s is not %s", e.Path, e.Want)
}

// A Paved object supports getting and setting values by field path. Its zero
// value is not usable; create one with Pave. A Paved is not safe for
// concurrent use.
type Paved struct {
	object   map[string]any
	maxIndex uint
}

// An Option configures a Paved.
type Option func(*Paved)

// WithMaxFieldPathIndex sets the largest array index SetValue accepts. Zero
// disables the limit.
func WithMaxFieldPathIndex(max uint) Option {
	return func(p *Paved) { p.maxIndex = max }
}

// Pave wraps a JSON-like object (the result of unmarshalling JSON into
// map[string]any, with integers as int64) for field path access. The object is
// used, not copied: SetValue, MergeValue and DeleteField change it.
func Pave(object map[string]any, o ...Option) *Paved {
	p := &Paved{object: object, maxIndex: DefaultMaxFieldPathIndex}
	for _, fn := range o {
		fn(p)
	}
	if p.object == nil {
		p.object = map[string]any{}
	}
	return p
}

// UnstructuredContent returns the underlying object.
func (p *Paved) UnstructuredContent() map[string]any { return p.object }

// GetValue returns the value at path. The value is not copied. A path that
// does not exist yields an error matching ErrNotFound: a missing field, an
// index beyond the end of an array, or a field of a null value. A path that
// indexes a value of the wrong type yields a *TypeError; an index into null is
// one too. The empty path yields nil, as crossplane-runtime's does.
func (p *Paved) GetValue(path string) (any, error) {
	s, err := Parse(path)
	if err != nil {
		return nil, err
	}
	return GetSegments(p.object, s)
}

// GetSegments returns the value at the parsed path s within v, with the same
// errors as Paved.GetValue.
func GetSegments(v any, s Segments) (any, error) {
	if len(s) == 0 {
		return nil, nil
	}
	return lookup(v, s)
}

// lookup is GetSegments, except that the empty path yields v.
func lookup(v any, s Segments) (any, error) {
	it := v
	for i, cur := range s {
		switch cur.Type {
		case SegmentIndex:
			arr, ok := it.([]any)
			if !ok {
				return nil, &TypeError{Path: s[:i], Want: "an array"}
			}
			if int(cur.Index) >= len(arr) {
				return nil, &NotFoundError{Path: s[:i+1], Problem: "no such element"}
			}
			it = arr[cur.Index]
		case SegmentField:
			obj, ok := it.(map[string]any)
			if !ok {
				if it == nil && i > 0 {
					return nil, &NotFoundError{Path: s[:i], Problem: "is null"}
				}
				return nil, &TypeError{Path: s[:i], Want: "an object"}
			}
			v, ok := obj[cur.Field]
			if !ok {
				return nil, &NotFoundError{Path: s[:i+1], Problem: "no such field"}
			}
			it = v
		}
	}
	return it, nil
}

// GetValueInto decodes the value at path into out, through JSON.
func (p *Paved) GetValueInto(path string, out any) error {
	v, err := p.GetValue(path)
	if err != nil {
		return err
	}
	j, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("cannot encode the value at %s as JSON: %w", path, err)
	}
	if err := json.Unmarshal(j, out); err != nil {
		return fmt.Errorf("cannot decode the value at %s: %w", path, err)
	}
	return nil
}

// GetString returns the string at path.
func (p *Paved) GetString(path string) (string, error) {
	v, err := p.GetValue(path)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", p.typeError(path, "a string")
	}
	return s, nil
}

// GetBool returns the boolean at path.
func (p *Paved) GetBool(path string) (bool, error) {
	v, err := p.GetValue(path)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, p.typeError(path, "a boolean")
	}
	return b, nil
}

// GetInteger returns the integer at path. Integers decoded from JSON are
// int64; a float64 without a fractional part is accepted too.
func (p *Paved) GetInteger(path string) (int64, error) {
	v, err := p.GetValue(path)
	if err != nil {
		return 0, err
	}
	switch n := v.(type) {
	case int64:
		return n, nil
	case int:
		return int64(n), nil
	case int32:
		return int64(n), nil
	case float64:
		if n == float64(int64(n)) {
			return int64(n), nil
		}
	}
	return 0, p.typeError(path, "an integer")
}

// GetStringArray returns the array of strings at path.
func (p *Paved) GetStringArray(path string) ([]string, error) {
	v, err := p.GetValue(path)
	if err != nil {
		return nil, err
	}
	a, ok := v.([]any)
	if !ok {
		return nil, p.typeError(path, "an array")
	}
	out := make([]string, len(a))
	for i := range a {
		s, ok := a[i].(string)
		if !ok {
			return nil, p.typeError(path, "an array of strings")
		}
		out[i] = s
	}
	return out, nil
}

// GetStringObject returns the object with string values at path.
func (p *Paved) GetStringObject(path string) (map[string]string, error) {
	v, err := p.GetValue(path)
	if err != nil {
		return nil, err
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, p.typeError(path, "an object")
	}
	out := make(map[string]string, len(o))
	for k, in := range o {
		s, ok := in.(string)
		if !ok {
			return nil, p.typeError(path, "an object of strings")
		}
		out[k] = s
	}
	return out, nil
}

func (p *Paved) typeError(path, want string) error {
	s, _ := Parse(path) // The path parsed when it was read.
	return &TypeError{Path: s, Want: want}
}

// SetValue sets the value at path, creating missing intermediate objects and
// arrays (an array created for, or too short for, index n is extended with
// nulls to length n+1). The value is first round-tripped through JSON, so the
// object only ever holds JSON types (integers as int64) and never aliases the
// caller's value. Traversing an existing value of the wrong type, including
// null, is a *TypeError; an index above the Paved's maximum is an error. The
// empty path is a no-op.
func (p *Paved) SetValue(path string, value any) error {
	s, err := Parse(path)
	if err != nil {
		return err
	}
	return p.SetSegments(s, value)
}

// SetSegments is SetValue for a parsed path.
func (p *Paved) SetSegments(s Segments, value any) error {
	if len(s) == 0 {
		return nil
	}
	v, err := ToJSON(value)
	if err != nil {
		return err
	}
	if p.maxIndex > 0 {
		for _, seg := range s {
			if seg.Type == SegmentIndex && seg.Index > p.maxIndex {
				return fmt.Errorf("%s: index %d is greater than the maximum allowed index %d", s, seg.Index, p.maxIndex)
			}
		}
	}

	var in any = p.object
	for i, cur := range s {
		final := i == len(s)-1
		switch cur.Type {
		case SegmentIndex:
			arr, ok := in.([]any)
			if !ok {
				return &TypeError{Path: s[:i], Want: "an array"}
			}
			if final {
				arr[cur.Index] = v
				return nil
			}
			prepareElement(arr, cur, s[i+1])
			in = arr[cur.Index]
		case SegmentField:
			obj, ok := in.(map[string]any)
			if !ok {
				return &TypeError{Path: s[:i], Want: "an object"}
			}
			if final {
				obj[cur.Field] = v
				return nil
			}
			prepareField(obj, cur, s[i+1])
			in = obj[cur.Field]
		}
	}
	return nil
}

// newContainer returns an empty value able to hold the next segment.
func newContainer(next Segment) any {
	if next.Type == SegmentIndex {
		return make([]any, next.Index+1)
	}
	return make(map[string]any)
}

// extend returns v extended with nulls so that it can hold the next segment,
// if v is an array and next an index.
func extend(v any, next Segment) any {
	arr, ok := v.([]any)
	if !ok || next.Type != SegmentIndex || int(next.Index) < len(arr) {
		return v
	}
	return append(arr, make([]any, int(next.Index)-len(arr)+1)...)
}

func prepareElement(arr []any, cur, next Segment) {
	if arr[cur.Index] == nil {
		arr[cur.Index] = newContainer(next)
		return
	}
	arr[cur.Index] = extend(arr[cur.Index], next)
}

func prepareField(obj map[string]any, cur, next Segment) {
	v, ok := obj[cur.Field]
	if !ok {
		obj[cur.Field] = newContainer(next)
		return
	}
	obj[cur.Field] = extend(v, next)
}

// ToJSON returns a copy of v made only of JSON types (map[string]any, []any,
// string, bool, int64, float64, nil) that shares no memory with v: the
// value a round trip through JSON gives. Values of JSON types already (an
// unstructured object's content) are copied directly, as the round trip
// would decode them, without encoding them; only values of other types
// take the round trip.
func ToJSON(v any) (any, error) {
	if out, ok := copyJSON(v); ok {
		return out, nil
	}
	return roundTrip(v)
}

// roundTrip encodes v as JSON and decodes it again.
func roundTrip(v any) (any, error) {
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

// copyJSON copies a value of JSON types as roundTrip would return it, and
// reports false, having copied nothing useful, at the first value of
// another type or one the round trip would change in another way than
// copyJSON knows (a string that is not valid UTF-8).
func copyJSON(v any) (any, bool) {
	switch tv := v.(type) {
	case nil:
		return nil, true
	case string:
		return tv, utf8.ValidString(tv)
	case bool, int64:
		return tv, true
	case float64:
		// The round trip decodes a number written without a fraction or
		// exponent, that fits, as an int64 (k8s.io/apimachinery's
		// json.Unmarshal); encoding/json writes a whole float64 below
		// 1e21 that way, in its shortest form, which is exact below 2^53.
		// Larger whole numbers take the round trip.
		if tv == math.Trunc(tv) {
			return int64(tv), math.Abs(tv) < 1<<53
		}
		return tv, !math.IsNaN(tv) && !math.IsInf(tv, 0)
	case map[string]any:
		if tv == nil {
			return nil, true
		}
		out := make(map[string]any, len(tv))
		for k, e := range tv {
			c, ok := copyJSON(e)
			if !ok || !utf8.ValidString(k) {
				return nil, false
			}
			out[k] = c
		}
		return out, true
	case []any:
		if tv == nil {
			return nil, true
		}
		out := make([]any, len(tv))
		for i, e := range tv {
			c, ok := copyJSON(e)
			if !ok {
				return nil, false
			}
			out[i] = c
		}
		return out, true
	default:
		return nil, false
	}
}

// DeleteField deletes the value at path: a field is removed from its object,
// an element from its array (later elements move down). A path that does not
// exist is a no-op. The empty path is a no-op.
func (p *Paved) DeleteField(path string) error {
	s, err := Parse(path)
	if err != nil {
		return err
	}
	if len(s) == 0 {
		return nil
	}
	parent, found, err := parentOf(p.object, s)
	if err != nil || !found {
		return err
	}
	last := s[len(s)-1]
	switch last.Type {
	case SegmentField:
		obj, ok := parent.(map[string]any)
		if !ok {
			return &TypeError{Path: s[:len(s)-1], Want: "an object"}
		}
		delete(obj, last.Field)
		return nil
	case SegmentIndex:
		arr, ok := parent.([]any)
		if !ok {
			return &TypeError{Path: s[:len(s)-1], Want: "an array"}
		}
		if int(last.Index) >= len(arr) {
			return nil
		}
		shortened := append(arr[:last.Index:last.Index], arr[last.Index+1:]...)
		// The parent array changed length, so store it back in its own
		// parent. The grandparent exists because the parent does.
		gp, _ := lookup(p.object, s[:len(s)-2])
		at := s[len(s)-2]
		switch g := gp.(type) {
		case map[string]any:
			g[at.Field] = shortened
		case []any:
			g[at.Index] = shortened
		}
	}
	return nil
}

// parentOf returns the value that holds the last segment of s, and whether it
// exists. A missing field or an index beyond the end of an array on the way
// means it does not exist; a value of the wrong type on the way, null
// included, is a *TypeError.
func parentOf(root map[string]any, s Segments) (any, bool, error) {
	var it any = root
	for i, cur := range s[:len(s)-1] {
		switch cur.Type {
		case SegmentIndex:
			arr, ok := it.([]any)
			if !ok {
				return nil, false, &TypeError{Path: s[:i], Want: "an array"}
			}
			if int(cur.Index) >= len(arr) {
				return nil, false, nil
			}
			it = arr[cur.Index]
		case SegmentField:
			obj, ok := it.(map[string]any)
			if !ok {
				return nil, false, &TypeError{Path: s[:i], Want: "an object"}
			}
			v, ok := obj[cur.Field]
			if !ok {
				return nil, false, nil
			}
			it = v
		}
	}
	return it, true, nil
}

// ExpandWildcards returns the concrete paths that a path with wildcards
// denotes in the object: each wildcard is replaced by every index of the array
// or every key of the object (in sorted order) at its position. A path
// without wildcards is returned as is if it exists. A path whose fixed prefix
// does not exist yields no paths and no error; a wildcard on null is an error
// matching ErrNotFound, and on a value that is neither an array nor an object
// a *TypeError.
func (p *Paved) ExpandWildcards(path string) ([]string, error) {
	s, err := Parse(path)
	if err != nil {
		return nil, err
	}
	expanded, err := expand(p.object, s)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(expanded))
	for i := range expanded {
		out[i] = expanded[i].String()
	}
	return out, nil
}

// ExpandSegments is ExpandWildcards for a parsed path.
func (p *Paved) ExpandSegments(s Segments) ([]Segments, error) {
	return expand(p.object, s)
}

func expand(data any, s Segments) ([]Segments, error) {
	for i, cur := range s {
		if cur.Type != SegmentField || cur.Field != Wildcard {
			continue
		}
		v, err := lookup(data, s[:i])
		if IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var concrete []Segment
		switch c := v.(type) {
		case nil:
			return nil, &NotFoundError{Path: s[:i], Problem: "is null, so the wildcard matches nothing"}
		case []any:
			for ix := range c {
				concrete = append(concrete, Segment{Type: SegmentIndex, Index: uint(ix)})
			}
		case map[string]any:
			keys := make([]string, 0, len(c))
			for k := range c {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				concrete = append(concrete, Segment{Type: SegmentField, Field: k})
			}
		default:
			return nil, &TypeError{Path: s[:i], Want: "an array or an object, as the wildcard requires"}
		}
		var out []Segments
		for _, c := range concrete {
			next := make(Segments, 0, len(s))
			next = append(append(append(next, s[:i]...), c), s[i+1:]...)
			r, err := expand(data, next)
			if err != nil {
				return nil, err
			}
			out = append(out, r...)
		}
		return out, nil
	}
	if _, err := GetSegments(data, s); err != nil {
		if IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return []Segments{s}, nil
}
