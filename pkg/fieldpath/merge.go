//go:build !fieldpath_upstream

package fieldpath

import (
	"fmt"
	"reflect"
)

// MergeOptions say how MergeValue combines a value with the one already at
// the path. They mirror Crossplane's mergeOptions.
type MergeOptions struct {
	// KeepMapValues keeps the values of keys that already exist in a merged
	// object (unless they are empty: "", 0, false, null, [] or {}); otherwise
	// the merged-in value wins.
	KeepMapValues bool
	// AppendSlice appends to existing arrays instead of replacing them. At
	// the top level, elements the existing array already holds are not
	// appended again.
	AppendSlice bool
}

// MergeValue merges value into the value at path. With nil options, or when
// nothing exists at the path, it is SetValue. Otherwise objects are merged
// key by key, recursively; arrays are replaced, or appended to with
// AppendSlice; other values are replaced by the merged-in value, or kept with
// KeepMapValues when the existing value is not empty. Merging an array into a
// value of another type with AppendSlice is an error.
func (p *Paved) MergeValue(path string, value any, o *MergeOptions) error {
	s, err := Parse(path)
	if err != nil {
		return err
	}
	return p.MergeSegments(s, value, o)
}

// MergeSegments is MergeValue for a parsed path.
func (p *Paved) MergeSegments(s Segments, value any, o *MergeOptions) error {
	if o == nil || len(s) == 0 {
		return p.SetSegments(s, value)
	}
	dst, err := GetSegments(p.object, s)
	if IsNotFound(err) {
		return p.SetSegments(s, value)
	}
	if err != nil {
		return err
	}
	src, err := ToJSON(value)
	if err != nil {
		return err
	}
	if dst == nil || src == nil {
		return p.SetSegments(s, src)
	}
	if o.AppendSlice {
		src = withoutElementsOf(dst, src)
	}
	// Merge as the value of a one-key object, so the top level follows the
	// same rules as nested values.
	const key = "v"
	wrapped := map[string]any{key: dst}
	if err := mergeObject(wrapped, map[string]any{key: src}, o); err != nil {
		return fmt.Errorf("cannot merge into %s: %w", s, err)
	}
	return p.SetSegments(s, wrapped[key])
}

// withoutElementsOf returns src without the elements that dst holds, if both
// are arrays; otherwise src.
func withoutElementsOf(dst, src any) any {
	d, ok1 := dst.([]any)
	sa, ok2 := src.([]any)
	if !ok1 || !ok2 {
		return src
	}
	out := make([]any, 0, len(sa))
	for _, e := range sa {
		found := false
		for _, x := range d {
			if reflect.DeepEqual(e, x) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, e)
		}
	}
	return out
}

// mergeObject merges src into dst in place, key by key.
func mergeObject(dst, src map[string]any, o *MergeOptions) error {
	override := !o.KeepMapValues
	for k, sv := range src {
		dv, exists := dst[k]
		switch s := sv.(type) {
		case nil:
			if override {
				dst[k] = nil
			}
		case map[string]any:
			if d, ok := dv.(map[string]any); ok && len(d) > 0 {
				if err := mergeObject(d, s, o); err != nil {
					return err
				}
				continue
			}
			if override || !exists || isEmpty(dv) {
				dst[k] = s
			}
		case []any:
			d, isArray := dv.([]any)
			switch {
			case !exists || dv == nil || (isArray && len(d) == 0):
				dst[k] = s
			case o.AppendSlice:
				if !isArray {
					return fmt.Errorf("cannot append an array to a value of type %s at key %q", typeName(dv), k)
				}
				dst[k] = append(append(make([]any, 0, len(d)+len(s)), d...), s...)
			case override || isEmpty(dv):
				dst[k] = s
			}
		default:
			if override || !exists || isEmpty(dv) {
				dst[k] = s
			}
		}
	}
	return nil
}

// isEmpty reports whether v is a zero JSON value.
func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == ""
	case bool:
		return !t
	case int64:
		return t == 0
	case float64:
		return t == 0
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// typeName returns the JSON type name of v.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case int64, int, int32:
		return "integer"
	case float64, float32:
		return "number"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}
