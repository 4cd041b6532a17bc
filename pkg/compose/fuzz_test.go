package compose

import (
	"errors"
	"testing"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/json"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/fieldpath"
)

// fuzzInput decodes a fuzzed JSON value the way Kubernetes does. It reports
// false for invalid JSON.
func fuzzInput(s string) (any, bool) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, false
	}
	return v, true
}

// checkTransform runs a transform through Transforms and checks its contract:
// no panic, errors are *TransformErrors of class ErrInvalid, and outputs can
// be written to an object (they are JSON).
func checkTransform(t *testing.T, tr v1.Transform, in any) {
	t.Helper()
	out, err := Transforms([]v1.Transform{tr}, in)
	if err != nil {
		var te *TransformError
		if !errors.As(err, &te) {
			t.Fatalf("Transforms(%+v, %#v): want a *TransformError, got %T: %v", tr, in, err, err)
		}
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("Transforms(%+v, %#v): want an error of class ErrInvalid, got %v", tr, in, err)
		}
		return
	}
	if err := fieldpath.Pave(map[string]any{}).SetValue("out", out); err != nil {
		t.Fatalf("Transforms(%+v, %#v) = %#v, which cannot be written: %v", tr, in, out, err)
	}
}

var seedInputs = []string{`"small"`, `"42"`, `3`, `-1.5`, `true`, `null`, `{"a":1}`, `[1,"b"]`, `"aGVsbG8="`, `"500m"`, `"1e400"`, `"NaN"`}

func FuzzMapTransform(f *testing.F) {
	for _, in := range seedInputs {
		f.Add("small", `"10"`, in)
	}
	f.Fuzz(func(t *testing.T, key, value, input string) {
		in, ok := fuzzInput(input)
		if !ok {
			return
		}
		if _, ok := fuzzInput(value); !ok {
			return
		}
		tr := v1.Transform{Type: v1.TransformTypeMap, Map: &v1.MapTransform{Pairs: map[string]extv1.JSON{key: {Raw: []byte(value)}}}}
		checkTransform(t, tr, in)
	})
}

func FuzzMatchTransform(f *testing.F) {
	for _, in := range seedInputs {
		f.Add("sm.*", true, "Input", in)
		f.Add("small", false, "Value", in)
	}
	f.Fuzz(func(t *testing.T, pattern string, regexp bool, fallbackTo string, input string) {
		in, ok := fuzzInput(input)
		if !ok {
			return
		}
		p := v1.MatchTransformPattern{Type: v1.MatchTransformPatternTypeLiteral, Literal: &pattern, Result: extv1.JSON{Raw: []byte(`"hit"`)}}
		if regexp {
			p = v1.MatchTransformPattern{Type: v1.MatchTransformPatternTypeRegexp, Regexp: &pattern, Result: extv1.JSON{Raw: []byte(`"hit"`)}}
		}
		tr := v1.Transform{Type: v1.TransformTypeMatch, Match: &v1.MatchTransform{
			Patterns: []v1.MatchTransformPattern{p}, FallbackTo: v1.MatchFallbackTo(fallbackTo), FallbackValue: &extv1.JSON{Raw: []byte(`{"miss":true}`)},
		}}
		checkTransform(t, tr, in)
	})
}

func FuzzMathTransform(f *testing.F) {
	for _, in := range seedInputs {
		for _, typ := range []string{"Multiply", "ClampMin", "ClampMax", "Divide"} {
			f.Add(typ, int64(1024), in)
		}
	}
	f.Fuzz(func(t *testing.T, typ string, operand int64, input string) {
		in, ok := fuzzInput(input)
		if !ok {
			return
		}
		tr := v1.Transform{Type: v1.TransformTypeMath, Math: &v1.MathTransform{Type: v1.MathTransformType(typ), Multiply: &operand, ClampMin: &operand, ClampMax: &operand}}
		checkTransform(t, tr, in)
	})
}

func FuzzStringTransform(f *testing.F) {
	types := []string{"Format", "Convert", "TrimPrefix", "TrimSuffix", "Regexp", "Join", "Replace", "Reverse"}
	conversions := []string{"ToUpper", "ToLower", "ToBase64", "FromBase64", "ToJson", "ToSha1", "ToSha256", "ToSha512", "ToAdler32"}
	for _, in := range seedInputs {
		for _, typ := range types {
			f.Add(typ, "%s-x", 0, in)
		}
		for _, c := range conversions {
			f.Add("Convert", c, 1, in)
		}
	}
	f.Fuzz(func(t *testing.T, typ, param string, group int, input string) {
		in, ok := fuzzInput(input)
		if !ok {
			return
		}
		conv := v1.StringConversionType(param)
		tr := v1.Transform{Type: v1.TransformTypeString, String: &v1.StringTransform{
			Type:    v1.StringTransformType(typ),
			Format:  &param,
			Convert: &conv,
			Trim:    &param,
			Regexp:  &v1.StringTransformRegexp{Match: param, Group: &group},
			Join:    &v1.StringTransformJoin{Separator: param},
			Replace: &v1.StringTransformReplace{Search: param, Replace: "r"},
		}}
		checkTransform(t, tr, in)
	})
}

func FuzzConvertTransform(f *testing.F) {
	for _, in := range seedInputs {
		for _, to := range []string{"string", "int", "int64", "bool", "float64", "object", "array", "decimal"} {
			for _, format := range []string{"", "none", "quantity", "json"} {
				f.Add(to, format, in)
			}
		}
	}
	f.Fuzz(func(t *testing.T, to, format, input string) {
		in, ok := fuzzInput(input)
		if !ok {
			return
		}
		fm := v1.ConvertTransformFormat(format)
		tr := v1.Transform{Type: v1.TransformTypeConvert, Convert: &v1.ConvertTransform{ToType: v1.TransformIOType(to), Format: &fm}}
		checkTransform(t, tr, in)
	})
}
