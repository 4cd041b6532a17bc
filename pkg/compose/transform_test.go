package compose

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// fromYAML decodes YAML into out, failing the test on error.
func fromYAML[T any](t testing.TB, s string) T {
	t.Helper()
	var out T
	if err := yaml.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("cannot decode %q: %v", s, err)
	}
	return out
}

// errString returns the message of err, or "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestTransform(t *testing.T) {
	type want struct {
		out any
		err string
	}
	cases := map[string]struct {
		reason    string
		transform string
		in        any
		want      want
	}{
		// map
		"MapHit": {
			reason: "A map returns the JSON value of the input key.", transform: `{type: map, map: {small: "10", large: {gb: 100}}}`,
			in: "large", want: want{out: map[string]any{"gb": int64(100)}},
		},
		"MapMissingKey": {
			reason: "A key that is not in the map is an error naming the key.", transform: `{type: map, map: {small: "10"}}`,
			in: "huge", want: want{err: `key "huge" is not in the map`},
		},
		"MapNotString": {
			reason: "A map transform needs a string input.", transform: `{type: map, map: {small: "10"}}`,
			in: int64(3), want: want{err: "input is integer, want a string"},
		},
		"MapEmpty": {
			reason: "A map without pairs is invalid.", transform: `{type: map, map: {}}`,
			in: "a", want: want{err: "map is empty"},
		},
		"MapMissingConfig": {
			reason: "Type map needs a map.", transform: `{type: map}`,
			in: "a", want: want{err: "map is required by transform type map"},
		},

		// match
		"MatchLiteral": {
			reason: "The first matching literal returns its result.", transform: `{type: match, match: {patterns: [{type: literal, literal: a, result: 1}, {literal: b, result: 2}]}}`,
			in: "b", want: want{out: int64(2)},
		},
		"MatchRegexp": {
			reason: "A regexp pattern matches anywhere in the input.", transform: `{type: match, match: {patterns: [{type: regexp, regexp: "^eu-", result: europe}]}}`,
			in: "eu-west-1", want: want{out: "europe"},
		},
		"MatchLiteralNonString": {
			reason: "A literal never matches a non-string; the fallback applies.", transform: `{type: match, match: {patterns: [{literal: "1", result: one}], fallbackValue: other}}`,
			in: int64(1), want: want{out: "other"},
		},
		"MatchFallbackValue": {
			reason: "Without a match the fallback value is returned.", transform: `{type: match, match: {patterns: [{literal: a, result: 1}], fallbackValue: {x: z}}}`,
			in: "q", want: want{out: map[string]any{"x": "z"}},
		},
		"MatchFallbackNull": {
			reason: "Without a match and a fallback value the result is null.", transform: `{type: match, match: {patterns: [{literal: a, result: 1}]}}`,
			in: "z", want: want{out: nil},
		},
		"MatchFallbackInput": {
			reason: "fallbackTo Input returns the input.", transform: `{type: match, match: {patterns: [{literal: a, result: 1}], fallbackTo: Input}}`,
			in: "z", want: want{out: "z"},
		},
		"MatchInvalidRegexp": {
			reason: "An invalid regexp is an error naming the pattern.", transform: `{type: match, match: {patterns: [{literal: a, result: 1}, {type: regexp, regexp: "[", result: 2}]}}`,
			in: "z", want: want{err: "pattern 1: invalid regexp \"[\": error parsing regexp: missing closing ]: `[`"},
		},
		"MatchRegexpNonString": {
			reason: "A regexp pattern needs a string input.", transform: `{type: match, match: {patterns: [{type: regexp, regexp: "a", result: 1}]}}`,
			in: true, want: want{err: `pattern 0: input is boolean, want a string to match regexp "a"`},
		},
		"MatchNoPatterns": {
			reason: "A match without patterns is invalid.", transform: `{type: match, match: {fallbackValue: 1}}`,
			in: "a", want: want{err: "patterns must list at least one pattern"},
		},
		"MatchLiteralMissing": {
			reason: "A literal pattern needs a literal.", transform: `{type: match, match: {patterns: [{type: literal, result: 1}]}}`,
			in: "a", want: want{err: "pattern 0: literal is required by pattern type literal"},
		},
		"MatchRegexpMissing": {
			reason: "A regexp pattern needs a regexp.", transform: `{type: match, match: {patterns: [{type: regexp, result: 1}]}}`,
			in: "a", want: want{err: "pattern 0: regexp is required by pattern type regexp"},
		},
		"MatchUnknownPattern": {
			reason: "An unknown pattern type is invalid.", transform: `{type: match, match: {patterns: [{type: glob, literal: a, result: 1}]}}`,
			in: "a", want: want{err: `pattern 0: unknown pattern type "glob" (want literal or regexp)`},
		},
		"MatchUnknownFallback": {
			reason: "An unknown fallbackTo is invalid.", transform: `{type: match, match: {patterns: [{literal: a, result: 1}], fallbackTo: Nothing}}`,
			in: "b", want: want{err: `unknown fallbackTo "Nothing" (want Value or Input)`},
		},

		// math
		"MultiplyInt": {
			reason: "Multiplying an integer yields an int64.", transform: `{type: math, math: {type: Multiply, multiply: 1024}}`,
			in: int64(10), want: want{out: int64(10240)},
		},
		"MultiplyGoInt": {
			reason: "A Go int is an integer too.", transform: `{type: math, math: {multiply: 2}}`,
			in: 3, want: want{out: int64(6)},
		},
		"MultiplyFloat": {
			reason: "Multiplying a float yields a float64.", transform: `{type: math, math: {multiply: 2}}`,
			in: 1.25, want: want{out: 2.5},
		},
		"MultiplyString": {
			reason: "Math needs a number.", transform: `{type: math, math: {type: Multiply, multiply: 1024}}`,
			in: "10", want: want{err: "input is string, want a number"},
		},
		"MultiplyMissing": {
			reason: "Multiply needs a multiplier.", transform: `{type: math, math: {type: Multiply}}`,
			in: int64(1), want: want{err: "multiply is required by math type Multiply"},
		},
		"ClampMinBelow": {
			reason: "A value below the minimum becomes the minimum.", transform: `{type: math, math: {type: ClampMin, clampMin: 10}}`,
			in: int64(3), want: want{out: int64(10)},
		},
		"ClampMinAbove": {
			reason: "A value above the minimum is unchanged.", transform: `{type: math, math: {type: ClampMin, clampMin: 10}}`,
			in: int64(30), want: want{out: int64(30)},
		},
		"ClampMinFloatTruncated": {
			reason: "Floats are compared truncated, as upstream does: 10.5 is not below 10.", transform: `{type: math, math: {type: ClampMin, clampMin: 10}}`,
			in: 10.5, want: want{out: 10.5},
		},
		"ClampMaxAbove": {
			reason: "A value above the maximum becomes the maximum.", transform: `{type: math, math: {type: ClampMax, clampMax: 10}}`,
			in: 11.5, want: want{out: int64(10)},
		},
		"ClampMaxBelow": {
			reason: "A value below the maximum is unchanged.", transform: `{type: math, math: {type: ClampMax, clampMax: 10}}`,
			in: int64(9), want: want{out: int64(9)},
		},
		"ClampMinMissing": {
			reason: "ClampMin needs clampMin.", transform: `{type: math, math: {type: ClampMin}}`,
			in: int64(1), want: want{err: "clampMin is required by math type ClampMin"},
		},
		"ClampMaxMissing": {
			reason: "ClampMax needs clampMax.", transform: `{type: math, math: {type: ClampMax}}`,
			in: int64(1), want: want{err: "clampMax is required by math type ClampMax"},
		},
		"MathUnknown": {
			reason: "An unknown math type is invalid.", transform: `{type: math, math: {type: Divide}}`,
			in: int64(1), want: want{err: `unknown math type "Divide" (want Multiply, ClampMin or ClampMax)`},
		},

		// string
		"Format": {
			reason: "Format uses Go's fmt.", transform: `{type: string, string: {fmt: "%s.mysql.database.azure.com"}}`,
			in: "db", want: want{out: "db.mysql.database.azure.com"},
		},
		"FormatNumber": {
			reason: "Format works with any input.", transform: `{type: string, string: {type: Format, fmt: "%dGB"}}`,
			in: int64(20), want: want{out: "20GB"},
		},
		"FormatMissing": {
			reason: "Format needs fmt.", transform: `{type: string, string: {type: Format}}`,
			in: "a", want: want{err: "fmt is required by string type Format"},
		},
		"ToUpper":       {reason: "ToUpper upper-cases.", transform: `{type: string, string: {type: Convert, convert: ToUpper}}`, in: "abC", want: want{out: "ABC"}},
		"ToLower":       {reason: "ToLower lower-cases any input's %v.", transform: `{type: string, string: {type: Convert, convert: ToLower}}`, in: true, want: want{out: "true"}},
		"ToBase64":      {reason: "ToBase64 encodes with standard base64.", transform: `{type: string, string: {type: Convert, convert: ToBase64}}`, in: "hello", want: want{out: "aGVsbG8="}},
		"FromBase64":    {reason: "FromBase64 decodes.", transform: `{type: string, string: {type: Convert, convert: FromBase64}}`, in: "aGVsbG8=", want: want{out: "hello"}},
		"FromBase64Bad": {reason: "Invalid base64 is an error.", transform: `{type: string, string: {type: Convert, convert: FromBase64}}`, in: "!!", want: want{err: "input is not valid base64: illegal base64 data at input byte 0"}},
		"ToJson":        {reason: "ToJson encodes any input.", transform: `{type: string, string: {type: Convert, convert: ToJson}}`, in: map[string]any{"a": []any{int64(1), "b"}}, want: want{out: `{"a":[1,"b"]}`}},
		"ToSha1":        {reason: "ToSha1 hashes a string as is.", transform: `{type: string, string: {type: Convert, convert: ToSha1}}`, in: "hello", want: want{out: "aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d"}},
		"ToSha256":      {reason: "ToSha256 hashes a string as is.", transform: `{type: string, string: {type: Convert, convert: ToSha256}}`, in: "hello", want: want{out: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}},
		"ToSha256Object": {
			reason: "Non-strings are hashed as JSON.", transform: `{type: string, string: {type: Convert, convert: ToSha256}}`,
			in: int64(1), want: want{out: "6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b"},
		},
		"ToSha512": {
			reason: "ToSha512 hashes a string as is.", transform: `{type: string, string: {type: Convert, convert: ToSha512}}`,
			in: "hello", want: want{out: "9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca72323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e5c3adef46f73bcdec043"},
		},
		"ToAdler32":      {reason: "ToAdler32 returns the checksum in decimal.", transform: `{type: string, string: {type: Convert, convert: ToAdler32}}`, in: "hello", want: want{out: "103547413"}},
		"ConvertMissing": {reason: "Convert needs a conversion.", transform: `{type: string, string: {type: Convert}}`, in: "a", want: want{err: "convert is required by string type Convert"}},
		"ConvertUnknown": {
			reason: "An unknown conversion is invalid.", transform: `{type: string, string: {type: Convert, convert: ToRot13}}`,
			in: "a", want: want{err: `unknown string conversion "ToRot13" (want ToUpper, ToLower, ToBase64, FromBase64, ToJson, ToSha1, ToSha256, ToSha512 or ToAdler32)`},
		},
		"TrimPrefix":        {reason: "TrimPrefix removes a prefix.", transform: `{type: string, string: {type: TrimPrefix, trim: "https://"}}`, in: "https://example.org", want: want{out: "example.org"}},
		"TrimSuffix":        {reason: "TrimSuffix removes a suffix.", transform: `{type: string, string: {type: TrimSuffix, trim: "-test"}}`, in: "db-test", want: want{out: "db"}},
		"TrimMissing":       {reason: "Trim types need trim.", transform: `{type: string, string: {type: TrimSuffix}}`, in: "a", want: want{err: "trim is required by string type TrimSuffix"}},
		"RegexpWhole":       {reason: "Group 0 is the whole match.", transform: `{type: string, string: {type: Regexp, regexp: {match: "[0-9]+"}}}`, in: "v123-x", want: want{out: "123"}},
		"RegexpGroup":       {reason: "A group returns its capture.", transform: `{type: string, string: {type: Regexp, regexp: {match: "^(\\w+)-(\\w+)$", group: 2}}}`, in: "eu-west", want: want{out: "west"}},
		"RegexpNoMatch":     {reason: "No match is an error.", transform: `{type: string, string: {type: Regexp, regexp: {match: "[0-9]+"}}}`, in: "abc", want: want{err: `regexp "[0-9]+" does not match "abc"`}},
		"RegexpNoGroup":     {reason: "A missing group is an error.", transform: `{type: string, string: {type: Regexp, regexp: {match: "a", group: 1}}}`, in: "a", want: want{err: `regexp "a" has no group 1`}},
		"RegexpInvalid":     {reason: "An invalid regexp is an error.", transform: `{type: string, string: {type: Regexp, regexp: {match: "("}}}`, in: "a", want: want{err: "invalid regexp \"(\": error parsing regexp: missing closing ): `(`"}},
		"RegexpMissing":     {reason: "Regexp needs regexp.", transform: `{type: string, string: {type: Regexp}}`, in: "a", want: want{err: "regexp is required by string type Regexp"}},
		"Join":              {reason: "Join joins the elements' %v.", transform: `{type: string, string: {type: Join, join: {separator: ", "}}}`, in: []any{"a", int64(1), true}, want: want{out: "a, 1, true"}},
		"JoinNotArray":      {reason: "Join needs an array.", transform: `{type: string, string: {type: Join, join: {separator: ","}}}`, in: "a", want: want{err: "input is string, want an array"}},
		"JoinMissing":       {reason: "Join needs join.", transform: `{type: string, string: {type: Join}}`, in: []any{}, want: want{err: "join is required by string type Join"}},
		"Replace":           {reason: "Replace replaces every occurrence.", transform: `{type: string, string: {type: Replace, replace: {search: "-", replace: "_"}}}`, in: "a-b-c", want: want{out: "a_b_c"}},
		"ReplaceRemove":     {reason: "An empty replacement removes.", transform: `{type: string, string: {type: Replace, replace: {search: "-"}}}`, in: "a-b", want: want{out: "ab"}},
		"ReplaceEmpty":      {reason: "An empty search is invalid.", transform: `{type: string, string: {type: Replace, replace: {replace: "x"}}}`, in: "a", want: want{err: "replace.search must not be empty"}},
		"ReplaceMissing":    {reason: "Replace needs replace.", transform: `{type: string, string: {type: Replace}}`, in: "a", want: want{err: "replace is required by string type Replace"}},
		"StringUnknownType": {reason: "An unknown string type is invalid.", transform: `{type: string, string: {type: Reverse}}`, in: "a", want: want{err: `unknown string type "Reverse" (want Format, Convert, TrimPrefix, TrimSuffix, Regexp, Join or Replace)`}},

		// convert
		"ConvertStringToInt":      {reason: "A base-10 string becomes an int64.", transform: `{type: convert, convert: {toType: int64}}`, in: "42", want: want{out: int64(42)}},
		"ConvertStringToIntAlias": {reason: "int is int64.", transform: `{type: convert, convert: {toType: int}}`, in: "-7", want: want{out: int64(-7)}},
		"ConvertStringToIntBad":   {reason: "A non-integer string is an error.", transform: `{type: convert, convert: {toType: int64}}`, in: "abc", want: want{err: `cannot convert "abc" to int64: not a base-10 integer`}},
		"ConvertStringToBool":     {reason: "A boolean string becomes a bool.", transform: `{type: convert, convert: {toType: bool}}`, in: "true", want: want{out: true}},
		"ConvertStringToBoolBad":  {reason: "Other strings are an error.", transform: `{type: convert, convert: {toType: bool}}`, in: "yes", want: want{err: `cannot convert "yes" to bool: want true or false`}},
		"ConvertStringToFloat":    {reason: "A number string becomes a float64.", transform: `{type: convert, convert: {toType: float64}}`, in: "1.5", want: want{out: 1.5}},
		"ConvertStringToFloatBad": {reason: "A non-number is an error.", transform: `{type: convert, convert: {toType: float64}}`, in: "x", want: want{err: `cannot convert "x" to float64: not a number`}},
		"ConvertQuantity":         {reason: "The quantity format parses Kubernetes quantities.", transform: `{type: convert, convert: {toType: float64, format: quantity}}`, in: "500m", want: want{out: 0.5}},
		"ConvertQuantityBad": {
			reason: "An invalid quantity is an error.", transform: `{type: convert, convert: {toType: float64, format: quantity}}`,
			in: "lots", want: want{err: `cannot convert "lots" to float64: not a quantity: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		},
		"ConvertJSONObject":   {reason: "The json format parses an object.", transform: `{type: convert, convert: {toType: object, format: json}}`, in: `{"a":1}`, want: want{out: map[string]any{"a": int64(1)}}},
		"ConvertJSONArray":    {reason: "The json format parses an array.", transform: `{type: convert, convert: {toType: array, format: json}}`, in: `[1,"b"]`, want: want{out: []any{int64(1), "b"}}},
		"ConvertJSONBad":      {reason: "Invalid JSON is an error.", transform: `{type: convert, convert: {toType: object, format: json}}`, in: `[1]`, want: want{err: "cannot convert to object: input is not a JSON object: json: cannot unmarshal array into Go value of type map[string]interface {}"}},
		"ConvertObjectNoJSON": {reason: "string to object needs the json format.", transform: `{type: convert, convert: {toType: object}}`, in: `{}`, want: want{err: "conversion from string to object is not supported with format none"}},
		"ConvertIntToString":  {reason: "An integer becomes a decimal string.", transform: `{type: convert, convert: {toType: string}}`, in: int64(-3), want: want{out: "-3"}},
		"ConvertIntToBool":    {reason: "An integer is true if it is 1.", transform: `{type: convert, convert: {toType: bool}}`, in: int64(1), want: want{out: true}},
		"ConvertIntToFloat":   {reason: "An integer becomes a float64.", transform: `{type: convert, convert: {toType: float64}}`, in: int64(2), want: want{out: 2.0}},
		"ConvertIntSame":      {reason: "Same type is identity.", transform: `{type: convert, convert: {toType: int64}}`, in: int64(2), want: want{out: int64(2)}},
		"ConvertBoolToString": {reason: "A bool becomes true or false.", transform: `{type: convert, convert: {toType: string}}`, in: false, want: want{out: "false"}},
		"ConvertBoolToInt":    {reason: "true is 1.", transform: `{type: convert, convert: {toType: int64}}`, in: true, want: want{out: int64(1)}},
		"ConvertBoolToFloat":  {reason: "false is 0.", transform: `{type: convert, convert: {toType: float64}}`, in: false, want: want{out: 0.0}},
		"ConvertFloatToStr":   {reason: "A float is formatted without exponent.", transform: `{type: convert, convert: {toType: string}}`, in: 1.5e6, want: want{out: "1500000"}},
		"ConvertFloatToInt":   {reason: "A float is truncated.", transform: `{type: convert, convert: {toType: int64}}`, in: 2.9, want: want{out: int64(2)}},
		"ConvertFloatToBool":  {reason: "A float is true if it is 1.", transform: `{type: convert, convert: {toType: bool}}`, in: 1.0, want: want{out: true}},
		"ConvertObjectInput":  {reason: "An object cannot be converted.", transform: `{type: convert, convert: {toType: string}}`, in: map[string]any{}, want: want{err: "input is object, want a string, integer, number or boolean"}},
		"ConvertNullInput":    {reason: "null cannot be converted.", transform: `{type: convert, convert: {toType: string}}`, in: nil, want: want{err: "input is null, want a string, integer, number or boolean"}},
		"ConvertBadFormat":    {reason: "quantity only works for string to float64.", transform: `{type: convert, convert: {toType: int64, format: quantity}}`, in: "1", want: want{err: "conversion from string to int64 is not supported with format quantity"}},
		"ConvertIntWithJSON":  {reason: "A format on a non-string input is unsupported.", transform: `{type: convert, convert: {toType: string, format: json}}`, in: int64(1), want: want{err: "conversion from int64 to string is not supported with format json"}},
		"ConvertBoolToObject": {reason: "bool to object is unsupported.", transform: `{type: convert, convert: {toType: object}}`, in: true, want: want{err: "conversion from bool to object is not supported with format none"}},
		"ConvertUnknownType":  {reason: "An unknown toType is invalid.", transform: `{type: convert, convert: {toType: decimal}}`, in: "1", want: want{err: `unknown toType "decimal" (want string, int, int64, bool, float64, object or array)`}},
		"ConvertUnknownFmt":   {reason: "An unknown format is invalid.", transform: `{type: convert, convert: {toType: string, format: yaml}}`, in: "1", want: want{err: `unknown format "yaml" (want none, quantity or json)`}},

		// type
		"InferredType": {
			reason: "Without a type, the one configuration that is set decides.", transform: `{math: {multiply: 3}}`,
			in: int64(2), want: want{out: int64(6)},
		},
		"NoType": {
			reason: "Without a type or configuration the transform is invalid.", transform: `{}`,
			in: int64(2), want: want{err: "type is required (or exactly one of map, match, math, string and convert)"},
		},
		"UnknownType": {
			reason: "An unknown type is invalid.", transform: `{type: lookup}`,
			in: "a", want: want{err: `unknown transform type "lookup" (want map, match, math, string or convert)`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr := fromYAML[v1.Transform](t, tc.transform)
			got, err := Transform(tr, tc.in)
			if diff := cmp.Diff(tc.want.err, errString(err)); diff != "" {
				t.Errorf("%s\nTransform(%s): -want error, +got error:\n%s", tc.reason, tc.transform, diff)
			}
			if diff := cmp.Diff(tc.want.out, got); diff != "" {
				t.Errorf("%s\nTransform(%s): -want, +got:\n%s", tc.reason, tc.transform, diff)
			}
		})
	}
}

func TestTransforms(t *testing.T) {
	ts := fromYAML[[]v1.Transform](t, `[{type: convert, convert: {toType: int64}}, {type: math, math: {type: Multiply, multiply: 1024}}]`)
	got, err := Transforms(ts, "20")
	if err != nil || got != int64(20480) {
		t.Errorf("Transforms(...): want 20480, got %v, %v", got, err)
	}

	_, err = Transforms(ts[1:], "20")
	want := "transform 0 (math Multiply): input is string, want a number"
	if errString(err) != want {
		t.Errorf("Transforms(...): want error %q, got %v", want, err)
	}
	var te *TransformError
	if !errors.As(err, &te) || te.Index != 0 {
		t.Errorf("Transforms(...): want a *TransformError at index 0, got %#v", err)
	}
	if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrUnavailable) {
		t.Errorf("Transforms(...): want an error of class ErrInvalid, got %v", err)
	}
}

func TestDescribeTransform(t *testing.T) {
	cases := map[string]struct {
		reason    string
		transform string
		want      string
	}{
		"Math":          {reason: "Math names its type.", transform: `{type: math, math: {multiply: 2}}`, want: "math Multiply"},
		"StringConvert": {reason: "String Convert names the conversion.", transform: `{type: string, string: {type: Convert, convert: ToSha256}}`, want: "string Convert ToSha256"},
		"String":        {reason: "String names its type.", transform: `{type: string, string: {fmt: "%s"}}`, want: "string Format"},
		"Convert":       {reason: "Convert names the target type.", transform: `{type: convert, convert: {toType: int64}}`, want: "convert to int64"},
		"Map":           {reason: "Map is just map.", transform: `{type: map, map: {a: b}}`, want: "map"},
		"MissingConfig": {reason: "A type without configuration is the type.", transform: `{type: math}`, want: "math"},
		"Unknown":       {reason: "Nothing set is unknown.", transform: `{}`, want: "unknown"},
		"Bogus":         {reason: "An unknown type is itself.", transform: `{type: lookup}`, want: "lookup"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DescribeTransform(fromYAML[v1.Transform](t, tc.transform))); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
