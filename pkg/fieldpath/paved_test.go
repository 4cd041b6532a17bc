//go:build !fieldpath_upstream

package fieldpath

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/json"
)

// obj decodes JSON the way Kubernetes does, with integers as int64.
func obj(t testing.TB, s string) map[string]any {
	t.Helper()
	out := map[string]any{}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("cannot decode %s: %v", s, err)
	}
	return out
}

// isErr compares errors by errors.Is, or by type for the typed errors of this
// package.
var isErr = cmp.Comparer(func(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var ta, tb *TypeError
	if errors.As(a, &ta) && errors.As(b, &tb) {
		return true
	}
	var pa, pb *ParseError
	if errors.As(a, &pa) && errors.As(b, &pb) {
		return true
	}
	return errors.Is(a, b) || errors.Is(b, a)
})

// e wraps an error so that cmp applies isErr: at the top level cmp compares
// dynamic types and never sees the error interface.
type e struct{ Err error }

var errType = &TypeError{}
var errParse = &ParseError{}
var errAny = errors.New("any error")

func TestGetValue(t *testing.T) {
	const data = `{"metadata":{"name":"cool","labels":{"a.b/c":"d"}},"spec":{"nil":null,"containers":[{"name":"x","ports":[80,443]}],"n":3,"f":1.5,"t":true}}`
	type want struct {
		v   any
		err error
	}
	cases := map[string]struct {
		reason string
		path   string
		want   want
	}{
		"Field":           {reason: "A nested field is returned.", path: "metadata.name", want: want{v: "cool"}},
		"QuotedKey":       {reason: "Keys with periods are read in brackets.", path: "metadata.labels['a.b/c']", want: want{v: "d"}},
		"Index":           {reason: "Array elements are returned.", path: "spec.containers[0].ports[1]", want: want{v: int64(443)}},
		"Object":          {reason: "Objects are returned whole.", path: "spec.containers[0].ports", want: want{v: []any{int64(80), int64(443)}}},
		"Null":            {reason: "An explicit null is a value.", path: "spec.nil", want: want{v: nil}},
		"MissingField":    {reason: "A missing field is not found.", path: "metadata.namespace", want: want{err: ErrNotFound}},
		"IndexOutOfRange": {reason: "An index beyond the end is not found.", path: "spec.containers[1]", want: want{err: ErrNotFound}},
		"NullIntermediate": {
			reason: "A null intermediate value means the path does not exist.",
			path:   "spec.nil.x", want: want{err: ErrNotFound},
		},
		"IndexIntoNull": {
			reason: "An index into null is a type error, not a missing path, as upstream has it.",
			path:   "spec.nil[0]", want: want{err: errType},
		},
		"NotAnArray":  {reason: "Indexing an object is a type error.", path: "metadata[0]", want: want{err: errType}},
		"NotAnObject": {reason: "A field of a string is a type error.", path: "metadata.name.first", want: want{err: errType}},
		"BadPath":     {reason: "An invalid path is a parse error.", path: "metadata..name", want: want{err: errParse}},
		"Root":        {reason: "The empty path yields nil, as upstream's does.", path: "", want: want{v: nil}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Pave(obj(t, data)).GetValue(tc.path)
			if diff := cmp.Diff(e{tc.want.err}, e{err}, isErr); diff != "" {
				t.Errorf("%s\nGetValue(%q): -want error, +got error:\n%s", tc.reason, tc.path, diff)
			}
			if diff := cmp.Diff(tc.want.v, got); diff != "" {
				t.Errorf("%s\nGetValue(%q): -want, +got:\n%s", tc.reason, tc.path, diff)
			}
		})
	}
}

func TestTypedGetters(t *testing.T) {
	p := Pave(obj(t, `{"s":"x","b":true,"i":7,"f":2.0,"g":2.5,"a":["x","y"],"m":{"k":"v"},"mixed":["x",1],"mo":{"k":1}}`))
	type result struct {
		V   any
		Err error
	}
	r := func(v any, err error) result { return result{V: v, Err: err} }
	cases := map[string]struct {
		reason string
		got    result
		want   result
	}{
		"String":              {reason: "A string is read.", got: r(p.GetString("s")), want: result{V: "x"}},
		"StringWrongType":     {reason: "A boolean is not a string.", got: r(p.GetString("b")), want: result{V: "", Err: errType}},
		"StringMissing":       {reason: "Missing is not found.", got: r(p.GetString("nope")), want: result{V: "", Err: ErrNotFound}},
		"Bool":                {reason: "A boolean is read.", got: r(p.GetBool("b")), want: result{V: true}},
		"BoolWrongType":       {reason: "A string is not a boolean.", got: r(p.GetBool("s")), want: result{V: false, Err: errType}},
		"Integer":             {reason: "An int64 is read.", got: r(p.GetInteger("i")), want: result{V: int64(7)}},
		"IntegralFloat":       {reason: "A float without fraction is an integer.", got: r(p.GetInteger("f")), want: result{V: int64(2)}},
		"FractionalFloat":     {reason: "A float with a fraction is not an integer.", got: r(p.GetInteger("g")), want: result{V: int64(0), Err: errType}},
		"StringArray":         {reason: "An array of strings is read.", got: r(p.GetStringArray("a")), want: result{V: []string{"x", "y"}}},
		"StringArrayMixed":    {reason: "A mixed array is not an array of strings.", got: r(p.GetStringArray("mixed")), want: result{V: []string(nil), Err: errType}},
		"StringArrayNotArray": {reason: "An object is not an array.", got: r(p.GetStringArray("m")), want: result{V: []string(nil), Err: errType}},
		"StringObject":        {reason: "An object of strings is read.", got: r(p.GetStringObject("m")), want: result{V: map[string]string{"k": "v"}}},
		"StringObjectMixed":   {reason: "Non-string values are a type error.", got: r(p.GetStringObject("mo")), want: result{V: map[string]string(nil), Err: errType}},
		"StringObjectArray":   {reason: "An array is not an object.", got: r(p.GetStringObject("a")), want: result{V: map[string]string(nil), Err: errType}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got, isErr); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}

	var into struct {
		K string `json:"k"`
	}
	if err := p.GetValueInto("m", &into); err != nil || into.K != "v" {
		t.Errorf("GetValueInto(m): want {K: v}, got %+v, %v", into, err)
	}
	if err := p.GetValueInto("nope", &into); !IsNotFound(err) {
		t.Errorf("GetValueInto(nope): want a not found error, got %v", err)
	}
}

func TestSetValue(t *testing.T) {
	type want struct {
		o   map[string]any
		err error
	}
	cases := map[string]struct {
		reason string
		data   string
		path   string
		value  any
		opts   []Option
		want   want
	}{
		"NewField": {
			reason: "Missing intermediate objects are created.",
			data:   `{}`, path: "spec.forProvider.name", value: "x",
			want: want{o: obj(t, `{"spec":{"forProvider":{"name":"x"}}}`)},
		},
		"Replace": {
			reason: "An existing value is replaced.",
			data:   `{"a":{"b":1}}`, path: "a.b", value: "two",
			want: want{o: obj(t, `{"a":{"b":"two"}}`)},
		},
		"NewArray": {
			reason: "A new array is created long enough for the index, padded with nulls.",
			data:   `{}`, path: "a[2].b", value: true,
			want: want{o: obj(t, `{"a":[null,null,{"b":true}]}`)},
		},
		"ExtendArray": {
			reason: "An existing array is extended with nulls to fit the index.",
			data:   `{"a":[1]}`, path: "a[3]", value: 4,
			want: want{o: obj(t, `{"a":[1,null,null,4]}`)},
		},
		"NestedArrays": {
			reason: "Arrays within arrays are created.",
			data:   `{}`, path: "a[1][1]", value: "x",
			want: want{o: obj(t, `{"a":[null,[null,"x"]]}`)},
		},
		"ExtendNestedArray": {
			reason: "An existing array element that is an array is extended.",
			data:   `{"a":[[1]]}`, path: "a[0][2]", value: 3,
			want: want{o: obj(t, `{"a":[[1,null,3]]}`)},
		},
		"QuotedKey": {
			reason: "Keys with periods are set in brackets.",
			data:   `{}`, path: "metadata.annotations['crossplane.io/external-name']", value: "x",
			want: want{o: obj(t, `{"metadata":{"annotations":{"crossplane.io/external-name":"x"}}}`)},
		},
		"JSONRoundTrip": {
			reason: "Values are round-tripped through JSON: ints become int64, structs maps.",
			data:   `{}`, path: "a", value: struct {
				N int    `json:"n"`
				S string `json:"s"`
			}{N: 1, S: "x"},
			want: want{o: map[string]any{"a": map[string]any{"n": int64(1), "s": "x"}}},
		},
		"EmptyPath": {
			reason: "The empty path is a no-op.",
			data:   `{"a":1}`, path: "", value: "x",
			want: want{o: obj(t, `{"a":1}`)},
		},
		"NotAnObject": {
			reason: "A field of a string cannot be set.",
			data:   `{"a":"s"}`, path: "a.b", value: 1,
			want: want{o: obj(t, `{"a":"s"}`), err: errType},
		},
		"NotAnArray": {
			reason: "An index of an object cannot be set.",
			data:   `{"a":{}}`, path: "a[0]", value: 1,
			want: want{o: obj(t, `{"a":{}}`), err: errType},
		},
		"NullIntermediate": {
			reason: "An explicit null intermediate is not replaced.",
			data:   `{"a":null}`, path: "a.b", value: 1,
			want: want{o: obj(t, `{"a":null}`), err: errType},
		},
		"RootIndex": {
			reason: "The root is an object, so it cannot be indexed.",
			data:   `{}`, path: "[0]", value: 1,
			want: want{o: obj(t, `{}`), err: errType},
		},
		"IndexTooLarge": {
			reason: "Indices above the maximum are rejected before anything changes.",
			data:   `{}`, path: "a[1025]", value: 1,
			want: want{o: obj(t, `{}`), err: errAny},
		},
		"IndexLimitDisabled": {
			reason: "A maximum of zero disables the limit.",
			data:   `{}`, path: "a[1025]", value: 1, opts: []Option{WithMaxFieldPathIndex(0)},
			want: want{o: map[string]any{"a": append(make([]any, 1025), int64(1))}},
		},
		"BadPath": {
			reason: "An invalid path is a parse error.",
			data:   `{}`, path: "a.", value: 1,
			want: want{o: obj(t, `{}`), err: errParse},
		},
		"Unencodable": {
			reason: "A value that cannot be encoded as JSON is an error.",
			data:   `{}`, path: "a", value: func() {},
			want: want{o: obj(t, `{}`), err: errAny},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := Pave(obj(t, tc.data), tc.opts...)
			err := p.SetValue(tc.path, tc.value)
			if tc.want.err == errAny {
				if err == nil {
					t.Errorf("%s\nSetValue(%q): want an error, got none", tc.reason, tc.path)
				}
			} else if diff := cmp.Diff(e{tc.want.err}, e{err}, isErr); diff != "" {
				t.Errorf("%s\nSetValue(%q): -want error, +got error:\n%s", tc.reason, tc.path, diff)
			}
			if diff := cmp.Diff(tc.want.o, p.UnstructuredContent()); diff != "" {
				t.Errorf("%s\nSetValue(%q): -want, +got:\n%s", tc.reason, tc.path, diff)
			}
		})
	}
}

func TestMergeValue(t *testing.T) {
	yes := true
	cases := map[string]struct {
		reason string
		data   string
		path   string
		value  string
		opts   *MergeOptions
		want   map[string]any
		err    bool
	}{
		"NilOptionsReplace": {
			reason: "Without options the value replaces the existing one.",
			data:   `{"a":{"x":1,"y":2}}`, path: "a", value: `{"x":9}`,
			want: obj(t, `{"a":{"x":9}}`),
		},
		"Missing": {
			reason: "A missing destination is set.",
			data:   `{}`, path: "a.b", value: `{"x":9}`, opts: &MergeOptions{KeepMapValues: true},
			want: obj(t, `{"a":{"b":{"x":9}}}`),
		},
		"ForceMergeObjects": {
			reason: "Objects merge; merged-in values win; nested objects merge too.",
			data:   `{"a":{"x":1,"y":2,"n":{"p":1,"q":1}}}`, path: "a", value: `{"x":9,"z":3,"n":{"q":2}}`, opts: &MergeOptions{},
			want: obj(t, `{"a":{"x":9,"y":2,"z":3,"n":{"p":1,"q":2}}}`),
		},
		"MergeObjectsKeep": {
			reason: "With KeepMapValues existing values win, new keys are added.",
			data:   `{"a":{"x":1,"y":2,"n":{"p":1}}}`, path: "a", value: `{"x":9,"z":3,"n":{"p":5,"q":2}}`, opts: &MergeOptions{KeepMapValues: true},
			want: obj(t, `{"a":{"x":1,"y":2,"z":3,"n":{"p":1,"q":2}}}`),
		},
		"KeepReplacesEmpty": {
			reason: "Empty existing values are filled even with KeepMapValues.",
			data:   `{"a":{"x":"","y":0,"z":false}}`, path: "a", value: `{"x":"s","y":1,"z":true}`, opts: &MergeOptions{KeepMapValues: true},
			want: obj(t, `{"a":{"x":"s","y":1,"z":true}}`),
		},
		"ArraysReplaced": {
			reason: "Without AppendSlice nested arrays are replaced.",
			data:   `{"a":{"l":[1,2]}}`, path: "a", value: `{"l":[3]}`, opts: &MergeOptions{},
			want: obj(t, `{"a":{"l":[3]}}`),
		},
		"ArraysKept": {
			reason: "With KeepMapValues and no AppendSlice nested arrays are kept.",
			data:   `{"a":{"l":[1,2]}}`, path: "a", value: `{"l":[3]}`, opts: &MergeOptions{KeepMapValues: true},
			want: obj(t, `{"a":{"l":[1,2]}}`),
		},
		"NestedArraysAppended": {
			reason: "Nested arrays are appended as is, duplicates included.",
			data:   `{"a":{"l":[1,2]}}`, path: "a", value: `{"l":[2,3]}`, opts: &MergeOptions{AppendSlice: true},
			want: obj(t, `{"a":{"l":[1,2,2,3]}}`),
		},
		"TopLevelArrayAppendedWithoutDuplicates": {
			reason: "At the top level, elements already present are not appended again.",
			data:   `{"l":[1,{"k":"v"}]}`, path: "l", value: `[{"k":"v"},1,3]`, opts: &MergeOptions{AppendSlice: true},
			want: obj(t, `{"l":[1,{"k":"v"},3]}`),
		},
		"TopLevelArrayReplaced": {
			reason: "Without AppendSlice a top-level array is replaced.",
			data:   `{"l":[1]}`, path: "l", value: `[2]`, opts: &MergeOptions{},
			want: obj(t, `{"l":[2]}`),
		},
		"ScalarKept": {
			reason: "KeepMapValues keeps an existing non-empty scalar.",
			data:   `{"s":"old"}`, path: "s", value: `"new"`, opts: &MergeOptions{KeepMapValues: true},
			want: obj(t, `{"s":"old"}`),
		},
		"ScalarReplaced": {
			reason: "Without KeepMapValues a scalar is replaced.",
			data:   `{"s":"old"}`, path: "s", value: `"new"`, opts: &MergeOptions{},
			want: obj(t, `{"s":"new"}`),
		},
		"NullSource": {
			reason: "A null value replaces.",
			data:   `{"s":{"a":1}}`, path: "s", value: `null`, opts: &MergeOptions{KeepMapValues: true},
			want: obj(t, `{"s":null}`),
		},
		"NullNestedOverride": {
			reason: "A nested null is written only when merged-in values win.",
			data:   `{"s":{"a":1,"b":1}}`, path: "s", value: `{"a":null}`, opts: &MergeOptions{},
			want: obj(t, `{"s":{"a":null,"b":1}}`),
		},
		"AppendToNonArray": {
			reason: "Appending an array to a non-array value is an error.",
			data:   `{"s":{"l":"x"}}`, path: "s", value: `{"l":[1]}`, opts: &MergeOptions{AppendSlice: true},
			want: obj(t, `{"s":{"l":"x"}}`), err: true,
		},
		"AppendAndKeep": {
			reason: "MergeObjectsAppendArrays keeps values and appends arrays.",
			data:   `{"s":{"l":[1],"v":"a"}}`, path: "s", value: `{"l":[2],"v":"b","w":"c"}`, opts: &MergeOptions{KeepMapValues: yes, AppendSlice: yes},
			want: obj(t, `{"s":{"l":[1,2],"v":"a","w":"c"}}`),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(tc.value), &v); err != nil {
				t.Fatal(err)
			}
			p := Pave(obj(t, tc.data))
			err := p.MergeValue(tc.path, v, tc.opts)
			if (err != nil) != tc.err {
				t.Errorf("%s\nMergeValue(%q): want error %t, got %v", tc.reason, tc.path, tc.err, err)
			}
			if diff := cmp.Diff(tc.want, p.UnstructuredContent()); diff != "" {
				t.Errorf("%s\nMergeValue(%q): -want, +got:\n%s", tc.reason, tc.path, diff)
			}
		})
	}
}

func TestMergeValueDoesNotAliasSource(t *testing.T) {
	src := map[string]any{"n": map[string]any{"k": "v"}}
	p := Pave(obj(t, `{"a":{"x":1}}`))
	if err := p.MergeValue("a", src, &MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	src["n"].(map[string]any)["k"] = "changed"
	if got, _ := p.GetString("a.n.k"); got != "v" {
		t.Errorf("MergeValue aliases its source: a.n.k is %q after the source changed", got)
	}
}

func TestDeleteField(t *testing.T) {
	cases := map[string]struct {
		reason string
		data   string
		path   string
		want   map[string]any
		err    error
	}{
		"Field":        {reason: "A field is removed.", data: `{"a":{"b":1,"c":2}}`, path: "a.b", want: obj(t, `{"a":{"c":2}}`)},
		"TopField":     {reason: "A top-level field is removed.", data: `{"a":1,"b":2}`, path: "a", want: obj(t, `{"b":2}`)},
		"Element":      {reason: "An element is removed and later ones move down.", data: `{"a":[1,2,3]}`, path: "a[1]", want: obj(t, `{"a":[1,3]}`)},
		"NestedElem":   {reason: "An element of a nested array is removed.", data: `{"a":[[1,2]]}`, path: "a[0][0]", want: obj(t, `{"a":[[2]]}`)},
		"MissingField": {reason: "A missing field is a no-op.", data: `{"a":{}}`, path: "a.b.c", want: obj(t, `{"a":{}}`)},
		"MissingElem":  {reason: "A missing element is a no-op.", data: `{"a":[1]}`, path: "a[5]", want: obj(t, `{"a":[1]}`)},
		"WrongType":    {reason: "Deleting an index of an object is a type error.", data: `{"a":{}}`, path: "a[0]", want: obj(t, `{"a":{}}`), err: errType},
		"BadPath":      {reason: "An invalid path is a parse error.", data: `{}`, path: "a[", want: obj(t, `{}`), err: errParse},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := Pave(obj(t, tc.data))
			err := p.DeleteField(tc.path)
			if diff := cmp.Diff(e{tc.err}, e{err}, isErr); diff != "" {
				t.Errorf("%s\nDeleteField(%q): -want error, +got error:\n%s", tc.reason, tc.path, diff)
			}
			if diff := cmp.Diff(tc.want, p.UnstructuredContent()); diff != "" {
				t.Errorf("%s\nDeleteField(%q): -want, +got:\n%s", tc.reason, tc.path, diff)
			}
		})
	}
}

func TestExpandWildcards(t *testing.T) {
	const data = `{"spec":{"containers":[{"name":"a","args":["x","y"]},{"name":"b","args":["z"]},{"args":[]}],"tags":{"b":"1","a":"2"},"s":"str"}}`
	cases := map[string]struct {
		reason string
		path   string
		want   []string
		err    error
	}{
		"NoWildcard": {reason: "A concrete existing path is returned as is.", path: "spec.tags.a", want: []string{"spec.tags.a"}},
		"NoWildcardMissing": {
			reason: "A concrete path that does not exist yields nothing.",
			path:   "spec.nope", want: []string{},
		},
		"Array": {
			reason: "A wildcard over an array yields each index whose rest of the path exists.",
			path:   "spec.containers[*].name", want: []string{"spec.containers[0].name", "spec.containers[1].name"},
		},
		"Nested": {
			reason: "Several wildcards expand to every combination.",
			path:   "spec.containers[*].args[*]",
			want:   []string{"spec.containers[0].args[0]", "spec.containers[0].args[1]", "spec.containers[1].args[0]"},
		},
		"ObjectSorted": {
			reason: "A wildcard over an object yields its keys in sorted order.",
			path:   "spec.tags.*", want: []string{"spec.tags.a", "spec.tags.b"},
		},
		"MissingPrefix": {reason: "A missing prefix yields nothing.", path: "spec.nope[*].x", want: []string{}},
		"Scalar":        {reason: "A wildcard over a string is an error.", path: "spec.s[*]", err: errType},
		"BadPath":       {reason: "An invalid path is a parse error.", path: "spec[*", err: errParse},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Pave(obj(t, data)).ExpandWildcards(tc.path)
			if diff := cmp.Diff(e{tc.err}, e{err}, isErr); diff != "" {
				t.Errorf("%s\nExpandWildcards(%q): -want error, +got error:\n%s", tc.reason, tc.path, diff)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nExpandWildcards(%q): -want, +got:\n%s", tc.reason, tc.path, diff)
			}
		})
	}
}

// FuzzSetGet checks that SetValue never panics, and that a value it sets can
// be read back at the same path.
func FuzzSetGet(f *testing.F) {
	for _, s := range []string{"a", "a.b", "a[0]", "a[3].b[2]", "[0]", "a['x.y']", "a[*]", "a[1025]"} {
		f.Add(s, `{"a":{"b":[1,2]}}`)
	}
	f.Fuzz(func(t *testing.T, path, data string) {
		o := map[string]any{}
		if json.Unmarshal([]byte(data), &o) != nil {
			return
		}
		p := Pave(o)
		if err := p.SetValue(path, "v"); err != nil {
			return
		}
		s, _ := Parse(path)
		if len(s) == 0 {
			return
		}
		got, err := p.GetValue(path)
		if err != nil || got != "v" {
			t.Fatalf("SetValue(%q) then GetValue(%q) = %v, %v; want v", path, path, got, err)
		}
	})
}
