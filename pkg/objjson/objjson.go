// Package objjson encodes and decodes Kubernetes objects as JSON, the way
// unstructured.Unstructured holds them: maps of string to any, []any,
// string, bool, nil, int64 for an integer that fits one, float64 for any
// other number. Loom decodes every object it reads (from the object mirror,
// from the API server's responses and watches) and the watcher encodes
// every object it mirrors: through encoding/json's reflection that was a
// tenth of the renderer's CPU, a sixth of the secrets service's and an
// eighth of the watcher's. A codec of just the JSON values objects hold does
// the same work in a fraction of the time.
//
// Encoding writes object members in map order rather than sorted: readers
// never compare encodings byte for byte. Decoding gives what
// unstructured.Unstructured.UnmarshalJSON gives, success and failure alike
// (the tests compare the two).
package objjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ErrSyntax is the failure of decoding something that is not JSON.
var ErrSyntax = errors.New("invalid JSON")

// Append appends the JSON of v to b. It fails only for numbers JSON cannot
// hold (NaN, infinities) and values encoding/json cannot encode.
func Append(b []byte, v any) ([]byte, error) {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, t), nil
	case bool:
		return strconv.AppendBool(b, t), nil
	case int64:
		return strconv.AppendInt(b, t, 10), nil
	case int:
		return strconv.AppendInt(b, int64(t), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(t), 10), nil
	case float64:
		return appendFloat(b, t)
	case map[string]any:
		b = append(b, '{')
		first := true
		for k, e := range t {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = Append(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case []any:
		b = append(b, '[')
		for i, e := range t {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = Append(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	default:
		// Anything else (json.Number, a typed value a caller set): what
		// encoding/json makes of it.
		j, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		return append(b, j...), nil
	}
}

func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("cannot encode the number %v in JSON", f)
	}
	// The shortest form that reads back as the same float64; 'g' may use
	// an exponent, which JSON allows.
	return strconv.AppendFloat(b, f, 'g', -1, 64), nil
}

const hex = "0123456789abcdef"

// appendString appends s as a JSON string. Bytes that are not UTF-8 become
// U+FFFD, as encoding/json makes them.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decoder reads one JSON value from data.
type decoder struct {
	data []byte
	pos  int
	// lean leaves the top-level object's metadata.managedFields out;
	// depth is the nesting of objects being read (the top level is 1) and
	// inMetadata is set while the top level's metadata is read.
	lean       bool
	depth      int
	inMetadata bool
}

// Decode decodes data, which must hold one JSON object and nothing else
// but white space.
func Decode(data []byte) (map[string]any, error) {
	return decode(decoder{data: data})
}

func decode(d decoder) (map[string]any, error) {
	d.space()
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		return nil, fmt.Errorf("%w: not an object", ErrSyntax)
	}
	v, err := d.value()
	if err != nil {
		return nil, err
	}
	d.space()
	if d.pos != len(d.data) {
		return nil, d.fail("data after the object")
	}
	return v.(map[string]any), nil //nolint:forcetypeassert // The value began with '{'.
}

func (d *decoder) fail(what string) error {
	return fmt.Errorf("%w at offset %d: %s", ErrSyntax, d.pos, what)
}

func (d *decoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) value() (any, error) {
	if d.pos >= len(d.data) {
		return nil, d.fail("unexpected end")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	default:
		for _, lit := range []struct {
			text string
			v    any
		}{{"true", true}, {"false", false}, {"null", nil}} {
			if len(d.data)-d.pos >= len(lit.text) && string(d.data[d.pos:d.pos+len(lit.text)]) == lit.text {
				d.pos += len(lit.text)
				return lit.v, nil
			}
		}
		return nil, d.fail("unexpected character")
	}
}

func (d *decoder) object() (any, error) {
	d.depth++
	m, err := d.members()
	d.depth--
	return m, err
}

func (d *decoder) members() (map[string]any, error) {
	m := map[string]any{}
	d.pos++
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return m, nil
	}
	for {
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return m, d.fail("expected a member name")
		}
		k, err := d.string()
		if err != nil {
			return m, err
		}
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return m, d.fail("expected ':'")
		}
		d.pos++
		d.space()
		if d.lean && d.inMetadata && d.depth == 2 && k == "managedFields" {
			if err := d.skip(); err != nil {
				return m, err
			}
		} else {
			meta := d.lean && d.depth == 1 && k == "metadata"
			if meta {
				d.inMetadata = true
			}
			v, err := d.value()
			if meta {
				d.inMetadata = false
			}
			m[k] = v
			if err != nil {
				return m, err
			}
		}
		if end, err := d.next('}'); end || err != nil {
			return m, err
		}
	}
}

func (d *decoder) array() (any, error) {
	a := []any{}
	d.pos++
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return a, nil
	}
	for {
		d.space()
		v, err := d.value()
		a = append(a, v)
		if err != nil {
			return a, err
		}
		if end, err := d.next(']'); end || err != nil {
			return a, err
		}
	}
}

// skip reads past one JSON value without decoding it (see ValueEnd).
func (d *decoder) skip() error {
	end, ok := ValueEnd(d.data, d.pos)
	if !ok {
		return d.fail("unexpected end of a skipped value")
	}
	d.pos = end
	return nil
}

// StringEnd returns the end of the JSON string starting at data[i] (a
// quote), and false if data ends inside it.
func StringEnd(data []byte, i int) (int, bool) {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// ValueEnd returns the end of the JSON value starting at data[i], and false
// if data ends inside it: strings to their closing quote, objects and
// arrays to their matching bracket, anything else to the next delimiter. It
// checks far less than decoding does; it is for values that are skipped, or
// decoded later.
func ValueEnd(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '"':
		return StringEnd(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				end, ok := StringEnd(data, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	default:
		start := i
		for i < len(data) && data[i] != ',' && data[i] != '}' && data[i] != ']' && data[i] != ' ' &&
			data[i] != '\t' && data[i] != '\n' && data[i] != '\r' {
			i++
		}
		return i, i > start
	}
}

// next reads what follows a member or an element, a ',' or end, and
// reports whether it was end.
func (d *decoder) next(end byte) (bool, error) {
	d.space()
	if d.pos >= len(d.data) {
		return false, d.fail("unexpected end")
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		return false, nil
	case end:
		d.pos++
		return true, nil
	default:
		return false, d.fail("expected ',' or '" + string(end) + "'")
	}
}

// string reads a JSON string; d.pos is at its opening quote.
func (d *decoder) string() (string, error) {
	d.pos++
	start := d.pos
	// The common case: no escape and nothing that is not UTF-8.
	for i := start; i < len(d.data); i++ {
		c := d.data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			if i-start <= maxInterned {
				if v, ok := interned[string(d.data[start:i])]; ok {
					return v, nil
				}
			}
			return string(d.data[start:i]), nil
		case c == '\\' || c >= utf8.RuneSelf:
			return d.slowString(start)
		case c < 0x20:
			d.pos = i
			return "", d.fail("control character in a string")
		}
	}
	d.pos = len(d.data)
	return "", d.fail("unexpected end of a string")
}

// slowString reads a string holding escapes or bytes beyond ASCII, which
// it checks are UTF-8 (others become U+FFFD, as encoding/json reads them).
func (d *decoder) slowString(start int) (string, error) {
	out := make([]byte, 0, 2*(len(d.data)-start)/3+8)
	i := start
	for i < len(d.data) {
		c := d.data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return string(out), nil
		case c == '\\':
			if i+1 >= len(d.data) {
				d.pos = i
				return "", d.fail("unexpected end of a string")
			}
			i++
			switch e := d.data[i]; e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				out = append(out, unescaped(e))
				i++
			case 'u':
				r, ok := hex4(d.data, i+1)
				if !ok {
					d.pos = i
					return "", d.fail("invalid \\u escape")
				}
				i += 5
				if utf16.IsSurrogate(r) {
					// A pair makes one rune; a lone half is U+FFFD.
					r2, ok := rune(-1), false
					if i+1 < len(d.data) && d.data[i] == '\\' && d.data[i+1] == 'u' {
						r2, ok = hex4(d.data, i+2)
					}
					if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				d.pos = i
				return "", d.fail("invalid escape")
			}
		case c < 0x20:
			d.pos = i
			return "", d.fail("control character in a string")
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(d.data[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, d.data[i:i+size]...)
			}
			i += size
		}
	}
	d.pos = len(d.data)
	return "", d.fail("unexpected end of a string")
}

// unescaped returns the byte that the one-character escape \e stands for.
func unescaped(e byte) byte {
	switch e {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	default: // '"', '\\', '/'
		return e
	}
}

// hex4 reads four hexadecimal digits at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number reads a JSON number: an int64 if it is an integer that fits one,
// a float64 otherwise.
func (d *decoder) number() (any, error) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	digits := func() int {
		n := 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	intStart := d.pos
	if digits() == 0 {
		return nil, d.fail("invalid number")
	}
	if d.data[intStart] == '0' && d.pos-intStart > 1 {
		return nil, d.fail("invalid number: leading zero")
	}
	integer := true
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		integer = false
		d.pos++
		if digits() == 0 {
			return nil, d.fail("invalid number")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		integer = false
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return nil, d.fail("invalid number")
		}
	}
	if integer && d.pos-intStart <= 18 {
		// Fits an int64 whatever its digits.
		var n int64
		for _, c := range d.data[intStart:d.pos] {
			n = n*10 + int64(c-'0')
		}
		if d.data[start] == '-' {
			n = -n
		}
		return n, nil
	}
	text := string(d.data[start:d.pos])
	if integer {
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: number %s: %w", ErrSyntax, text, err)
	}
	return f, nil
}

// DecodeObject decodes data as unstructured.Unstructured's UnmarshalJSON
// does: one JSON object, with a kind.
func DecodeObject(data []byte) (*unstructured.Unstructured, error) {
	return decodeObject(decoder{data: data})
}

// DecodeObjectLean is DecodeObject without the object's
// metadata.managedFields, which it skips rather than decodes (about a third
// of a composed resource's decoding). It is for readers that never write
// the object back nor check what a write would change (package apply reads
// managedFields), such as the secrets service, which writes only Secrets.
func DecodeObjectLean(data []byte) (*unstructured.Unstructured, error) {
	return decodeObject(decoder{data: data, lean: true})
}

func decodeObject(d decoder) (*unstructured.Unstructured, error) {
	m, err := decode(d)
	if err != nil {
		return nil, err
	}
	if k, _ := m["kind"].(string); k == "" {
		return nil, errors.New("the object has no kind")
	}
	return &unstructured.Unstructured{Object: m}, nil
}
