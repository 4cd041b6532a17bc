package compose

import (
	"crypto/sha1" //nolint:gosec // ToSha1 is part of the API, not used for security.
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/adler32"
	"math"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/json"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// Transforms applies the transforms in order, each to the output of the
// previous one, and returns the last output. A failure is a *TransformError
// naming the transform. Transforms do not modify their input.
func Transforms(ts []v1.Transform, in any) (any, error) {
	out := in
	for i := range ts {
		var err error
		if out, err = Transform(ts[i], out); err != nil {
			return nil, &TransformError{Index: i, Type: DescribeTransform(ts[i]), Err: err}
		}
	}
	return out, nil
}

// DescribeTransform returns a short description of a transform for messages,
// e.g. "math Multiply", "string Convert ToSha256" or "convert to int64".
func DescribeTransform(t v1.Transform) string {
	switch t.GetType() { //nolint:exhaustive // Other types are described by their type alone, below.
	case v1.TransformTypeMath:
		if t.Math != nil {
			return "math " + string(t.Math.GetType())
		}
	case v1.TransformTypeString:
		if t.String != nil {
			d := "string " + string(t.String.GetType())
			if t.String.GetType() == v1.StringTransformTypeConvert && t.String.Convert != nil {
				d += " " + string(*t.String.Convert)
			}
			return d
		}
	case v1.TransformTypeConvert:
		if t.Convert != nil {
			return "convert to " + string(t.Convert.ToType)
		}
	case "":
		if t.Type == "" {
			return "unknown"
		}
	}
	return string(t.GetType())
}

// Transform applies one transform to its input. It never modifies the input,
// though it may return it. Every error is of class ErrInvalid.
func Transform(t v1.Transform, in any) (any, error) {
	switch t.GetType() {
	case v1.TransformTypeMap:
		if t.Map == nil {
			return nil, missing("map", "map")
		}
		return mapTransform(t.Map, in)
	case v1.TransformTypeMatch:
		if t.Match == nil {
			return nil, missing("match", "match")
		}
		return matchTransform(t.Match, in)
	case v1.TransformTypeMath:
		if t.Math == nil {
			return nil, missing("math", "math")
		}
		return mathTransform(t.Math, in)
	case v1.TransformTypeString:
		if t.String == nil {
			return nil, missing("string", "string")
		}
		return stringTransform(t.String, in)
	case v1.TransformTypeConvert:
		if t.Convert == nil {
			return nil, missing("convert", "convert")
		}
		return convertTransform(t.Convert, in)
	case "":
		if t.Type == "" {
			return nil, errors.New("type is required (or exactly one of map, match, math, string and convert)")
		}
	}
	return nil, fmt.Errorf("unknown transform type %q (want map, match, math, string or convert)", t.Type)
}

func missing(field, kind string) error {
	return fmt.Errorf("%s is required by transform type %s", field, kind)
}

// TypeOf returns the JSON type name of a value: string, integer, number,
// boolean, object, array or null.
func TypeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case int, int32, int64:
		return "integer"
	case float32, float64:
		return "number"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

// decodeJSON decodes raw JSON with integers as int64. Empty input is null.
func decodeJSON(raw []byte) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("cannot decode JSON value: %w", err)
	}
	return v, nil
}

func mapTransform(m *v1.MapTransform, in any) (any, error) {
	if len(m.Pairs) == 0 {
		return nil, errors.New("map is empty")
	}
	s, ok := in.(string)
	if !ok {
		return nil, fmt.Errorf("input is %s, want a string", TypeOf(in))
	}
	v, ok := m.Pairs[s]
	if !ok {
		return nil, fmt.Errorf("key %q is not in the map", s)
	}
	return decodeJSON(v.Raw)
}

func matchTransform(m *v1.MatchTransform, in any) (any, error) {
	if len(m.Patterns) == 0 {
		return nil, errors.New("patterns must list at least one pattern")
	}
	for i, p := range m.Patterns {
		ok, err := matches(p, in)
		if err != nil {
			return nil, fmt.Errorf("pattern %d: %w", i, err)
		}
		if ok {
			return decodeJSON(p.Result.Raw)
		}
	}
	switch m.FallbackTo {
	case "", v1.MatchFallbackToTypeValue:
		if m.FallbackValue == nil {
			return nil, nil
		}
		return decodeJSON(m.FallbackValue.Raw)
	case v1.MatchFallbackToTypeInput:
		return in, nil
	}
	return nil, fmt.Errorf("unknown fallbackTo %q (want Value or Input)", m.FallbackTo)
}

func matches(p v1.MatchTransformPattern, in any) (bool, error) {
	switch p.GetType() {
	case v1.MatchTransformPatternTypeLiteral:
		if p.Literal == nil {
			return false, errors.New("literal is required by pattern type literal")
		}
		s, ok := in.(string)
		return ok && s == *p.Literal, nil
	case v1.MatchTransformPatternTypeRegexp:
		if p.Regexp == nil {
			return false, errors.New("regexp is required by pattern type regexp")
		}
		re, err := regexp.Compile(*p.Regexp)
		if err != nil {
			return false, fmt.Errorf("invalid regexp %q: %w", *p.Regexp, err)
		}
		s, ok := in.(string)
		if !ok {
			return false, fmt.Errorf("input is %s, want a string to match regexp %q", TypeOf(in), *p.Regexp)
		}
		return re.MatchString(s), nil
	}
	return false, fmt.Errorf("unknown pattern type %q (want literal or regexp)", p.Type)
}

func mathTransform(m *v1.MathTransform, in any) (any, error) {
	var (
		i     int64
		f     float64
		float bool
	)
	switch n := in.(type) {
	case int:
		i = int64(n)
	case int32:
		i = int64(n)
	case int64:
		i = n
	case float64:
		f, float = n, true
	default:
		return nil, fmt.Errorf("input is %s, want a number", TypeOf(in))
	}

	switch m.GetType() {
	case v1.MathTransformTypeMultiply:
		if m.Multiply == nil {
			return nil, errors.New("multiply is required by math type Multiply")
		}
		if float {
			return finite(f * float64(*m.Multiply))
		}
		return i * *m.Multiply, nil
	case v1.MathTransformTypeClampMin, v1.MathTransformTypeClampMax:
		// Crossplane compares the input truncated to an integer and returns
		// the clamp as an integer, or the input unchanged.
		cmpWith := i
		if float {
			cmpWith = int64(f)
		}
		if m.GetType() == v1.MathTransformTypeClampMin {
			if m.ClampMin == nil {
				return nil, errors.New("clampMin is required by math type ClampMin")
			}
			if cmpWith < *m.ClampMin {
				return *m.ClampMin, nil
			}
		} else {
			if m.ClampMax == nil {
				return nil, errors.New("clampMax is required by math type ClampMax")
			}
			if cmpWith > *m.ClampMax {
				return *m.ClampMax, nil
			}
		}
		if float {
			return f, nil
		}
		return i, nil
	}
	return nil, fmt.Errorf("unknown math type %q (want Multiply, ClampMin or ClampMax)", m.Type)
}

func stringTransform(s *v1.StringTransform, in any) (any, error) {
	switch s.GetType() {
	case v1.StringTransformTypeFormat:
		if s.Format == nil {
			return nil, errors.New("fmt is required by string type Format")
		}
		return fmt.Sprintf(*s.Format, in), nil
	case v1.StringTransformTypeConvert:
		if s.Convert == nil {
			return nil, errors.New("convert is required by string type Convert")
		}
		return stringConvert(*s.Convert, in)
	case v1.StringTransformTypeTrimPrefix, v1.StringTransformTypeTrimSuffix:
		if s.Trim == nil {
			return nil, fmt.Errorf("trim is required by string type %s", s.GetType())
		}
		if s.GetType() == v1.StringTransformTypeTrimPrefix {
			return strings.TrimPrefix(fmt.Sprintf("%v", in), *s.Trim), nil
		}
		return strings.TrimSuffix(fmt.Sprintf("%v", in), *s.Trim), nil
	case v1.StringTransformTypeRegexp:
		if s.Regexp == nil {
			return nil, errors.New("regexp is required by string type Regexp")
		}
		return stringRegexp(s.Regexp, in)
	case v1.StringTransformTypeJoin:
		if s.Join == nil {
			return nil, errors.New("join is required by string type Join")
		}
		arr, ok := in.([]any)
		if !ok {
			return nil, fmt.Errorf("input is %s, want an array", TypeOf(in))
		}
		parts := make([]string, len(arr))
		for i, v := range arr {
			parts[i] = fmt.Sprintf("%v", v)
		}
		return strings.Join(parts, s.Join.Separator), nil
	case v1.StringTransformTypeReplace:
		if s.Replace == nil {
			return nil, errors.New("replace is required by string type Replace")
		}
		if s.Replace.Search == "" {
			return nil, errors.New("replace.search must not be empty")
		}
		return strings.ReplaceAll(fmt.Sprintf("%v", in), s.Replace.Search, s.Replace.Replace), nil
	}
	return nil, fmt.Errorf("unknown string type %q (want Format, Convert, TrimPrefix, TrimSuffix, Regexp, Join or Replace)", s.Type)
}

func stringRegexp(r *v1.StringTransformRegexp, in any) (any, error) {
	re, err := regexp.Compile(r.Match)
	if err != nil {
		return nil, fmt.Errorf("invalid regexp %q: %w", r.Match, err)
	}
	group := 0
	if r.Group != nil {
		group = *r.Group
	}
	s := fmt.Sprintf("%v", in)
	m := re.FindStringSubmatch(s)
	if m == nil {
		return nil, fmt.Errorf("regexp %q does not match %q", r.Match, s)
	}
	if group < 0 || group >= len(m) {
		return nil, fmt.Errorf("regexp %q has no group %d", r.Match, group)
	}
	return m[group], nil
}

func stringConvert(c v1.StringConversionType, in any) (any, error) {
	switch c {
	case v1.StringConversionTypeToUpper:
		return strings.ToUpper(fmt.Sprintf("%v", in)), nil
	case v1.StringConversionTypeToLower:
		return strings.ToLower(fmt.Sprintf("%v", in)), nil
	case v1.StringConversionTypeToBase64:
		return base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%v", in))), nil
	case v1.StringConversionTypeFromBase64:
		b, err := base64.StdEncoding.DecodeString(fmt.Sprintf("%v", in))
		if err != nil {
			return nil, fmt.Errorf("input is not valid base64: %w", err)
		}
		return string(b), nil
	case v1.StringConversionTypeToJSON:
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("cannot encode input as JSON: %w", err)
		}
		return string(b), nil
	case v1.StringConversionTypeToSHA1, v1.StringConversionTypeToSHA256, v1.StringConversionTypeToSHA512, v1.StringConversionTypeToAdler32:
		b, err := hashInput(in)
		if err != nil {
			return nil, err
		}
		switch c { //nolint:exhaustive // Only the hashes reach here.
		case v1.StringConversionTypeToSHA1:
			h := sha1.Sum(b) //nolint:gosec // See the import.
			return hex.EncodeToString(h[:]), nil
		case v1.StringConversionTypeToSHA256:
			h := sha256.Sum256(b)
			return hex.EncodeToString(h[:]), nil
		case v1.StringConversionTypeToSHA512:
			h := sha512.Sum512(b)
			return hex.EncodeToString(h[:]), nil
		default:
			return strconv.FormatUint(uint64(adler32.Checksum(b)), 10), nil
		}
	}
	return nil, fmt.Errorf("unknown string conversion %q (want ToUpper, ToLower, ToBase64, FromBase64, ToJson, ToSha1, ToSha256, ToSha512 or ToAdler32)", c)
}

// hashInput returns the bytes a hash conversion hashes: a string as is,
// anything else as JSON.
func hashInput(in any) ([]byte, error) {
	if s, ok := in.(string); ok {
		return []byte(s), nil
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("cannot encode input as JSON: %w", err)
	}
	return b, nil
}

// ioType returns the convert transform type name of a value's Go type, or
// "" if convert does not accept it.
func ioType(v any) v1.TransformIOType {
	switch v.(type) {
	case string:
		return v1.TransformIOTypeString
	case bool:
		return v1.TransformIOTypeBool
	case int, int32, int64:
		return v1.TransformIOTypeInt64
	case float64:
		return v1.TransformIOTypeFloat64
	case map[string]any:
		return v1.TransformIOTypeObject
	case []any:
		return v1.TransformIOTypeArray
	}
	return ""
}

func convertTransform(c *v1.ConvertTransform, in any) (any, error) {
	to := c.ToType
	if to == v1.TransformIOTypeInt {
		to = v1.TransformIOTypeInt64
	}
	switch to {
	case v1.TransformIOTypeString, v1.TransformIOTypeBool, v1.TransformIOTypeInt64,
		v1.TransformIOTypeFloat64, v1.TransformIOTypeObject, v1.TransformIOTypeArray:
	default:
		return nil, fmt.Errorf("unknown toType %q (want string, int, int64, bool, float64, object or array)", c.ToType)
	}
	format := c.GetFormat()
	switch format {
	case v1.ConvertTransformFormatNone, v1.ConvertTransformFormatQuantity, v1.ConvertTransformFormatJSON:
	default:
		return nil, fmt.Errorf("unknown format %q (want none, quantity or json)", format)
	}

	from := ioType(in)
	switch from {
	case v1.TransformIOTypeString, v1.TransformIOTypeBool, v1.TransformIOTypeInt64, v1.TransformIOTypeFloat64:
	default:
		return nil, fmt.Errorf("input is %s, want a string, integer, number or boolean", TypeOf(in))
	}
	if from == to && format == v1.ConvertTransformFormatNone {
		if i, ok := in.(int); ok {
			return int64(i), nil
		}
		if i, ok := in.(int32); ok {
			return int64(i), nil
		}
		return in, nil
	}
	unsupported := fmt.Errorf("conversion from %s to %s is not supported with format %s", from, c.ToType, format)

	switch v := in.(type) {
	case string:
		return convertString(v, to, format, unsupported)
	case bool:
		if format != v1.ConvertTransformFormatNone {
			return nil, unsupported
		}
		switch to { //nolint:exhaustive // Other targets are unsupported.
		case v1.TransformIOTypeString:
			return strconv.FormatBool(v), nil
		case v1.TransformIOTypeInt64:
			if v {
				return int64(1), nil
			}
			return int64(0), nil
		case v1.TransformIOTypeFloat64:
			if v {
				return float64(1), nil
			}
			return float64(0), nil
		}
	case float64:
		if format != v1.ConvertTransformFormatNone {
			return nil, unsupported
		}
		switch to { //nolint:exhaustive // Other targets are unsupported.
		case v1.TransformIOTypeString:
			return strconv.FormatFloat(v, 'f', -1, 64), nil
		case v1.TransformIOTypeInt64:
			return int64(v), nil
		case v1.TransformIOTypeBool:
			return v == 1, nil
		}
	default: // An integer.
		if format != v1.ConvertTransformFormatNone {
			return nil, unsupported
		}
		i := toInt64(in)
		switch to { //nolint:exhaustive // Other targets are unsupported.
		case v1.TransformIOTypeString:
			return strconv.FormatInt(i, 10), nil
		case v1.TransformIOTypeBool:
			return i == 1, nil
		case v1.TransformIOTypeFloat64:
			return float64(i), nil
		}
	}
	return nil, unsupported
}

// finite returns f, or an error if it is infinite or not a number, which JSON
// cannot represent.
func finite(f float64) (any, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("result %v is not a finite number", f)
	}
	return f, nil
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int32:
		return int64(n)
	case int64:
		return n
	}
	return 0
}

func convertString(s string, to v1.TransformIOType, format v1.ConvertTransformFormat, unsupported error) (any, error) {
	switch format {
	case v1.ConvertTransformFormatNone:
		switch to { //nolint:exhaustive // Other targets are unsupported.
		case v1.TransformIOTypeInt64:
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("cannot convert %q to int64: not a base-10 integer", s)
			}
			return i, nil
		case v1.TransformIOTypeBool:
			b, err := strconv.ParseBool(s)
			if err != nil {
				return nil, fmt.Errorf("cannot convert %q to bool: want true or false", s)
			}
			return b, nil
		case v1.TransformIOTypeFloat64:
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("cannot convert %q to float64: not a number", s)
			}
			return finite(f)
		}
	case v1.ConvertTransformFormatQuantity:
		if to == v1.TransformIOTypeFloat64 {
			q, err := resource.ParseQuantity(s)
			if err != nil {
				return nil, fmt.Errorf("cannot convert %q to float64: not a quantity: %w", s, err)
			}
			return finite(q.AsApproximateFloat64())
		}
	case v1.ConvertTransformFormatJSON:
		switch to { //nolint:exhaustive // Other targets are unsupported.
		case v1.TransformIOTypeObject:
			out := map[string]any{}
			if err := json.Unmarshal([]byte(s), &out); err != nil {
				return nil, fmt.Errorf("cannot convert to object: input is not a JSON object: %w", err)
			}
			return out, nil
		case v1.TransformIOTypeArray:
			out := []any{}
			if err := json.Unmarshal([]byte(s), &out); err != nil {
				return nil, fmt.Errorf("cannot convert to array: input is not a JSON array: %w", err)
			}
			return out, nil
		}
	}
	return nil, unsupported
}
