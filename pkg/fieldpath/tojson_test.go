//go:build !fieldpath_upstream

package fieldpath

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestToJSON(t *testing.T) {
	type named struct {
		A int `json:"a"`
	}
	cases := map[string]struct {
		reason string
		v      any
		copied bool // copied directly, without the round trip
	}{
		"Object": {
			reason: "An unstructured object's content is copied as the round trip decodes it.",
			v: map[string]any{"s": "x", "b": true, "i": int64(-7), "f": 0.25, "n": nil,
				"l": []any{"a", int64(1), map[string]any{"deep": []any{}}}, "m": map[string]any{}},
			copied: true,
		},
		"Floats": {
			reason: "A whole float64 comes back as an int64, as the round trip decodes it; others stay float64.",
			v:      []any{3.0, math.Copysign(0, -1), 1e15, -(1<<53 - 1.0), 3.5, 1e-7, -2.5e-300},
			copied: true,
		},
		"LargeWholeFloats": {
			reason: "Whole float64s from 2^53 on take the round trip, which writes them in a shortest form that is not exact (an int64 that is not the float's value, or a float64 beyond int64).",
			v:      []any{float64(1 << 53), math.Pow(2, 62), -math.Pow(2, 63), math.Pow(2, 63), 1e21, 1e22, math.MaxFloat64},
		},
		"NilContainers": {
			reason: "A nil map or list comes back as null.",
			v:      map[string]any{"m": map[string]any(nil), "l": []any(nil)},
			copied: true,
		},
		"InvalidUTF8": {
			reason: "A string that is not valid UTF-8 takes the round trip, which replaces the bad bytes.",
			v:      map[string]any{"s": "a\xffb"},
		},
		"InvalidUTF8Key": {
			reason: "So does a key that is not valid UTF-8.",
			v:      map[string]any{"a\xffb": "s"},
		},
		"OtherTypes": {
			reason: "Values of other types (an int, a struct, a typed map) take the round trip.",
			v:      map[string]any{"i": 3, "s": named{A: 1}, "m": map[string]string{"a": "b"}, "f32": float32(1.5)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := roundTrip(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ToJSON(tc.v)
			if err != nil {
				t.Fatalf("%s\nToJSON(): %v", tc.reason, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nToJSON() against the round trip: -want, +got:\n%s", tc.reason, diff)
			}
			if _, copied := copyJSON(tc.v); copied != tc.copied {
				t.Errorf("%s\ncopied directly: got %t, want %t", tc.reason, copied, tc.copied)
			}
		})
	}

	t.Run("NotANumber", func(t *testing.T) {
		if _, err := ToJSON(map[string]any{"f": math.NaN()}); err == nil {
			t.Error("ToJSON() of NaN: no error; JSON has no NaN")
		}
	})
	t.Run("SharesNothing", func(t *testing.T) {
		in := map[string]any{"m": map[string]any{"k": "v"}, "l": []any{"a"}}
		out, err := ToJSON(in)
		if err != nil {
			t.Fatal(err)
		}
		m := out.(map[string]any)                //nolint:forcetypeassert // An object stays an object.
		m["m"].(map[string]any)["k"] = "changed" //nolint:forcetypeassert // As above.
		m["l"].([]any)[0] = "changed"            //nolint:forcetypeassert // A list stays a list.
		if diff := cmp.Diff(map[string]any{"m": map[string]any{"k": "v"}, "l": []any{"a"}}, in); diff != "" {
			t.Errorf("changing ToJSON()'s copy changed its input: -want, +got:\n%s", diff)
		}
	})
}

// BenchmarkToJSON compares ToJSON on an XR's content with the JSON round trip
// it replaces (go test -run '^$' -bench ToJSON ./fieldpath/).
func BenchmarkToJSON(b *testing.B) {
	xr := obj(b, `{"apiVersion":"bench.loom.dev/v1alpha1","kind":"XBenchDB",
	"metadata":{"name":"db-x7k2p","uid":"0b1a6d2e","resourceVersion":"123456","generation":3,
	  "labels":{"crossplane.io/claim-name":"db","crossplane.io/claim-namespace":"team-a"},
	  "managedFields":[{"manager":"loom-binder","operation":"Apply","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:claimRef":{},"f:parameters":{"f:size":{}}}}}]},
	"spec":{"claimRef":{"kind":"BenchDB","namespace":"team-a","name":"db"},"parameters":{"size":20,"region":"eu-west-1","ratio":0.5},
	  "resourceRefs":[{"kind":"NopResource","name":"a"},{"kind":"NopResource","name":"b"},{"kind":"NopResource","name":"c"}]},
	"status":{"conditions":[{"type":"Ready","status":"True","reason":"Available"}],"connectionDetails":{"lastPublishedTime":"2026-11-27T10:00:06Z"}}}`)
	b.Run("RoundTrip", func(b *testing.B) {
		for b.Loop() {
			if _, err := roundTrip(xr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ToJSON", func(b *testing.B) {
		for b.Loop() {
			if _, err := ToJSON(xr); err != nil {
				b.Fatal(err)
			}
		}
	})
}
