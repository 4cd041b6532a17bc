package objjson

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// standard decodes data as the read path did before the codec, through
// unstructured.Unstructured.
func standard(data []byte) (map[string]any, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return u.Object, nil
}

// sample is a composed resource as the watcher mirrors it.
const sample = `{"apiVersion":"nop.crossplane.io/v1alpha1","kind":"NopResource","metadata":{"annotations":{"crossplane.io/composition-resource-name":"db","crossplane.io/external-name":"bench-00001-abcde-xyz12"},"creationTimestamp":"2026-11-28T06:58:25Z","finalizers":["finalizer.managedresource.crossplane.io"],"generateName":"bench-00001-abcde-","generation":2,"labels":{"crossplane.io/claim-name":"bench-00001","crossplane.io/claim-namespace":"bench","crossplane.io/composite":"bench-00001-abcde"},"managedFields":[{"apiVersion":"nop.crossplane.io/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{"f:crossplane.io/composition-resource-name":{}},"f:generateName":{},"f:labels":{"f:crossplane.io/claim-name":{},"f:crossplane.io/claim-namespace":{},"f:crossplane.io/composite":{}},"f:ownerReferences":{"k:{\"uid\":\"0d6b0c5e-6d3a-4b6f-9d5e-2f4a1c3b9e77\"}":{}}},"f:spec":{"f:forProvider":{"f:conditionAfter":{},"f:fields":{"f:arrayField":{},"f:integerField":{},"f:objectField":{"f:stringField":{}},"f:stringField":{}}},"f:writeConnectionSecretToRef":{"f:name":{},"f:namespace":{}}}},"manager":"loom-renderer","operation":"Apply","time":"2026-11-28T06:58:25Z"},{"apiVersion":"nop.crossplane.io/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{".":{},"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:lastTransitionTime":{},"f:reason":{},"f:status":{},"f:type":{}}}}},"manager":"provider-nop","operation":"Update","subresource":"status","time":"2026-11-28T06:58:27Z"}],"name":"bench-00001-abcde-xyz12","ownerReferences":[{"apiVersion":"bench.loom.dev/v1alpha1","blockOwnerDeletion":true,"controller":true,"kind":"XBenchDB","name":"bench-00001-abcde","uid":"0d6b0c5e-6d3a-4b6f-9d5e-2f4a1c3b9e77"}],"resourceVersion":"123456","uid":"aa6b0c5e-6d3a-4b6f-9d5e-2f4a1c3b9e77"},"spec":{"deletionPolicy":"Delete","forProvider":{"conditionAfter":[{"conditionStatus":"True","conditionType":"Ready","time":"0s"}],"fields":{"arrayField":["a","b"],"integerField":5,"floatField":2.5,"big":12345678901234567890,"neg":-3,"exp":1e3,"null":null,"no":false,"objectField":{"stringField":"x"},"stringField":"bench-00001"}},"managementPolicies":["*"],"providerConfigRef":{"name":"default"},"writeConnectionSecretToRef":{"name":"bench-00001-db","namespace":"loom-system"}},"status":{"conditions":[{"lastTransitionTime":"2026-11-28T06:58:27Z","message":"tab\there \"quoted\" \\ \u00e9\u2028 \ud83d\ude00 <&>","reason":"Available","status":"True","type":"Ready"}]}}`

// decodeCases are inputs whose decoding must agree with the standard
// decoder's, success or failure.
var decodeCases = []string{
	sample,
	`{"kind":"K"}`,
	` {"kind" : "K" , "a" : [ 1 , 2.0 , -0 , 0.5e-3 , 1E+2 , true , null , "" ] } `,
	`{"kind":"K","s":"\u00e9\ud83d\ude00\/\b\f\n\r\t"}`,
	`{"kind":"K","lone":"\ud83d x \ude00 y \ud83d\u0041"}`,
	"{\"kind\":\"K\",\"bad\":\"\xff\xfe ok \xe2\x82\"}",
	`{"kind":"K","dup":1,"dup":2}`,
	`{"kind":"K","huge":1e400}`,
	`{"kind":"K","max":9223372036854775807,"over":9223372036854775808,"min":-9223372036854775808}`,
	`{"kind":"K","e":{},"l":[]}`,
	`{"kind":"K"} x`,
	`{"kind":"K",}`,
	`{"kind":"K","a":[1,]}`,
	`{"kind":"K","a":01}`,
	`{"kind":"K","a":1.}`,
	`{"kind":"K","a":-}`,
	`{"kind":"K","a":tru}`,
	`{"kind":"K","a":"\x01"}`,
	`{"kind":"K","a":"\q"}`,
	`{"kind":"K","a":"\u12"}`,
	`{"kind":"K","a":"open`,
	`{"kind":"K"`,
	`[{"kind":"K"}]`,
	`{"apiVersion":"v1"}`,
	`{"kind":""}`,
	``,
}

func TestDecodeAgrees(t *testing.T) {
	for _, in := range decodeCases {
		want, wantErr := standard([]byte(in))
		got, gotErr := DecodeObject([]byte(in))
		if (wantErr != nil) != (gotErr != nil) {
			t.Errorf("DecodeObject(%q): error %v, the standard decoder's %v", in, gotErr, wantErr)
			continue
		}
		if wantErr != nil {
			continue
		}
		if diff := cmp.Diff(want, got.Object); diff != "" {
			t.Errorf("DecodeObject(%q): -standard, +codec:\n%s", in, diff)
		}
	}
}

// TestDecodeLeanAgrees checks that DecodeObjectLean decodes what
// DecodeObject does but the top level's metadata.managedFields, wherever
// that member sits, and nothing else of that name; and that it fails where
// DecodeObject fails, but on a managedFields value it skips.
func TestDecodeLeanAgrees(t *testing.T) {
	cases := append(slices.Clone(decodeCases),
		`{"kind":"K","metadata":{"managedFields":[{"f":"}]\""}],"name":"n"},"spec":{"metadata":{"managedFields":[1]},"managedFields":2}}`,
		`{"metadata":{"name":"n","labels":{"managedFields":"x"},"managedFields":{"a":[{},[]]}},"kind":"K"}`,
		`{"kind":"K","metadata":{"managedFields":"a string"}}`,
		`{"kind":"K","metadata":{"managedFields":[1,2}`,
	)
	for _, in := range cases {
		want, wantErr := DecodeObject([]byte(in))
		got, gotErr := DecodeObjectLean([]byte(in))
		if (wantErr != nil) != (gotErr != nil) {
			if !strings.Contains(in, `"managedFields"`) || gotErr != nil {
				t.Errorf("DecodeObjectLean(%q): error %v, DecodeObject's %v", in, gotErr, wantErr)
			}
			continue
		}
		if wantErr != nil {
			continue
		}
		unstructured.RemoveNestedField(want.Object, "metadata", "managedFields")
		if diff := cmp.Diff(want.Object, got.Object); diff != "" {
			t.Errorf("DecodeObjectLean(%q): -DecodeObject without managedFields, +lean:\n%s", in, diff)
		}
	}
	full, err := DecodeObject([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(full.GetManagedFields()) == 0 {
		t.Error("the sample has no managedFields: the comparison above proves nothing")
	}
}

// former encodes obj as the mirror's writer did before the codec, through
// unstructured.Unstructured, and decodes it with the standard decoder: what
// a reader saw then. (A float64 that holds an integer reads back as int64,
// with either encoder.)
func former(t testing.TB, obj map[string]any) map[string]any {
	t.Helper()
	data, err := (&unstructured.Unstructured{Object: obj}).MarshalJSON()
	if err != nil {
		t.Fatalf("MarshalJSON(): %v", err)
	}
	out, err := standard(data)
	if err != nil {
		t.Fatalf("standard(MarshalJSON()): %v", err)
	}
	return out
}

func TestEncodeRoundTrip(t *testing.T) {
	for _, in := range decodeCases {
		obj, err := standard([]byte(in))
		if err != nil {
			continue
		}
		want := former(t, obj)
		data, err := Append(nil, obj)
		if err != nil {
			t.Errorf("encode(%q): %v", in, err)
			continue
		}
		if !json.Valid(data) {
			t.Errorf("encode(%q) = %q: not JSON", in, data)
			continue
		}
		got, err := standard(data)
		if err != nil {
			t.Errorf("the standard decoder of encode(%q) = %q: %v", in, data, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("encode(%q), decoded by the standard decoder: -want, +got:\n%s", in, diff)
		}
	}
}

func TestEncodeValues(t *testing.T) {
	cases := map[string]struct {
		in      any
		want    any
		wantErr bool
	}{
		"Ints":       {in: map[string]any{"a": 1, "b": int32(2), "c": int64(3)}, want: map[string]any{"a": int64(1), "b": int64(2), "c": int64(3)}},
		"Floats":     {in: map[string]any{"a": 2.5, "b": 1e21, "c": 3.0}, want: map[string]any{"a": 2.5, "b": 1e21, "c": int64(3)}},
		"Number":     {in: map[string]any{"n": json.Number("12")}, want: map[string]any{"n": int64(12)}},
		"Other":      {in: map[string]any{"s": []string{"x"}}, want: map[string]any{"s": []any{"x"}}},
		"NotUTF8":    {in: map[string]any{"s": "a\xffb"}, want: map[string]any{"s": "a\ufffdb"}},
		"Control":    {in: map[string]any{"s": "\x00\x1f\"\\\n"}, want: map[string]any{"s": "\x00\x1f\"\\\n"}},
		"NaN":        {in: map[string]any{"f": math.NaN()}, wantErr: true},
		"Inf":        {in: map[string]any{"f": math.Inf(1)}, wantErr: true},
		"NestedNaN":  {in: map[string]any{"l": []any{map[string]any{"f": math.Inf(-1)}}}, wantErr: true},
		"Unencoding": {in: map[string]any{"c": make(chan int)}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data, err := Append(nil, tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("encode(): error %v, want error %t", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			got, err := Decode(data)
			if err != nil {
				t.Fatalf("Decode(%q): %v", data, err)
			}
			if diff := cmp.Diff(tc.want, any(got)); diff != "" {
				t.Errorf("DecodeObject(encode()): -want, +got:\n%s", diff)
			}
		})
	}
}

func TestDecodeSyntaxError(t *testing.T) {
	_, err := Decode([]byte(`{"a":[1,}`))
	if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "offset 8") {
		t.Errorf("Decode(bad): %v, want a syntax error at offset 8", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, in := range decodeCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want, wantErr := standard(in)
		got, gotErr := DecodeObject(in)
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("DecodeObject(%q): error %v, the standard decoder's %v", in, gotErr, wantErr)
		}
		if wantErr != nil {
			return
		}
		if diff := cmp.Diff(want, got.Object); diff != "" {
			t.Fatalf("DecodeObject(%q): -standard, +codec:\n%s", in, diff)
		}
		data, err := Append(nil, got.Object)
		if err != nil {
			t.Fatalf("encode(DecodeObject(%q)): %v", in, err)
		}
		again, err := standard(data)
		if err != nil {
			t.Fatalf("standard(encode(DecodeObject(%q))) of %q: %v", in, data, err)
		}
		if diff := cmp.Diff(former(t, want), again); diff != "" {
			t.Fatalf("round trip of %q: -want, +got:\n%s", in, diff)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	data := []byte(sample)
	b.Run("codec", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeObject(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lean", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeObjectLean(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unstructured", func(b *testing.B) {
		for b.Loop() {
			if _, err := standard(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	u, err := standard([]byte(sample))
	if err != nil {
		b.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: u}
	b.Run("codec", func(b *testing.B) {
		for b.Loop() {
			if _, err := Append(make([]byte, 0, 4096), obj.Object); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unstructured", func(b *testing.B) {
		for b.Loop() {
			if _, err := obj.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
