package secretdata_test

import (
	"testing"

	"github.com/loomxr/loom/pkg/secretdata"
)

func TestDigest(t *testing.T) {
	kv := func(pairs ...string) map[string][]byte {
		m := map[string][]byte{}
		for i := 0; i < len(pairs); i += 2 {
			m[pairs[i]] = []byte(pairs[i+1])
		}
		return m
	}
	cases := map[string]struct {
		reason string
		a, b   map[string][]byte
		same   bool
	}{
		"NilAndEmpty":  {reason: "No data is no data, nil or empty.", a: nil, b: map[string][]byte{}, same: true},
		"SameData":     {reason: "The same keys and values in maps built apart.", a: kv("user", "admin", "password", "s3cr3t"), b: kv("password", "s3cr3t", "user", "admin"), same: true},
		"Concatenated": {reason: "A key and value that concatenate alike are other data.", a: kv("ab", "c"), b: kv("a", "bc")},
		"OtherValue":   {reason: "One value differs.", a: kv("password", "a"), b: kv("password", "b")},
		"EmptyValue":   {reason: "A key with an empty value is not a missing key.", a: kv("password", ""), b: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := secretdata.Digest(tc.a) == secretdata.Digest(tc.b); got != tc.same {
				t.Errorf("%s\nDigest(a) == Digest(b): got %t, want %t", tc.reason, got, tc.same)
			}
		})
	}
}
