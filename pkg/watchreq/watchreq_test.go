package watchreq

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		reason  string
		req     Request
		wantErr string
	}{
		"ByName": {
			reason: "A request by name is valid.",
			req:    Request{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "settings"},
		},
		"ByLabels": {
			reason: "A request by labels is valid.",
			req:    Request{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", MatchLabels: map[string]string{"example.org/env": "prod"}},
		},
		"AllOfKind": {
			reason: "A request naming only a kind watches every object of it.",
			req:    Request{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource"},
		},
		"NoAPIVersion": {
			reason:  "apiVersion is required.",
			req:     Request{Kind: "ConfigMap"},
			wantErr: "apiVersion is required",
		},
		"BadAPIVersion": {
			reason:  "apiVersion must parse as group/version.",
			req:     Request{APIVersion: "a/b/c", Kind: "ConfigMap"},
			wantErr: `apiVersion "a/b/c" is not of the form [group/]version`,
		},
		"GroupWithoutVersion": {
			reason:  "A group without a version is not an apiVersion.",
			req:     Request{APIVersion: "example.org/", Kind: "Thing"},
			wantErr: `apiVersion "example.org/" is not of the form [group/]version`,
		},
		"NoKind": {
			reason:  "kind is required.",
			req:     Request{APIVersion: "v1"},
			wantErr: "kind is required",
		},
		"BadKind": {
			reason:  "A kind cannot hold a dot or slash.",
			req:     Request{APIVersion: "v1", Kind: "config.map"},
			wantErr: `kind "config.map" is not a valid kind`,
		},
		"BadNamespace": {
			reason:  "A namespace must be a DNS label.",
			req:     Request{APIVersion: "v1", Kind: "ConfigMap", Namespace: "Not_OK"},
			wantErr: `namespace "Not_OK" is not valid`,
		},
		"NameAndLabels": {
			reason:  "Name and matchLabels are mutually exclusive.",
			req:     Request{APIVersion: "v1", Kind: "ConfigMap", Name: "a", MatchLabels: map[string]string{"a": "b"}},
			wantErr: "name and matchLabels are mutually exclusive",
		},
		"SlashInName": {
			reason:  "No Kubernetes name holds a slash.",
			req:     Request{APIVersion: "v1", Kind: "ConfigMap", Name: "a/b"},
			wantErr: `name "a/b" is not valid`,
		},
		"BadLabelKey": {
			reason:  "Label keys must be qualified names.",
			req:     Request{APIVersion: "v1", Kind: "ConfigMap", MatchLabels: map[string]string{"a=b": "c"}},
			wantErr: `matchLabels key "a=b" is not valid`,
		},
		"BadLabelValue": {
			reason:  "Label values must be valid label values.",
			req:     Request{APIVersion: "v1", Kind: "ConfigMap", MatchLabels: map[string]string{"a": "b,c"}},
			wantErr: `matchLabels["a"] value "b,c" is not valid`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.req.Validate()
			if diff := cmp.Diff(tc.wantErr, errString(err), prefixOf); diff != "" {
				t.Errorf("%s\nValidate(): -want error prefix, +got error:\n%s", tc.reason, diff)
			}
		})
	}
}

// prefixOf compares a wanted error prefix with a got error string.
var prefixOf = cmp.Comparer(func(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return strings.HasPrefix(b, a) && (a != "" || b == "")
})

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestEncodeDecode(t *testing.T) {
	cm := Request{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "settings"}
	env := Request{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", MatchLabels: map[string]string{"env": "prod", "a": "b"}}
	cases := map[string]struct {
		reason  string
		in      []Request
		want    string
		wantErr string
	}{
		"Canonical": {
			reason: "Encoding sorts requests, drops duplicates and omits empty fields.",
			in:     []Request{env, cm, cm, {APIVersion: "v1", Kind: "ConfigMap", MatchLabels: map[string]string{}}},
			want:   `[{"apiVersion":"apiextensions.crossplane.io/v1beta1","kind":"EnvironmentConfig","matchLabels":{"a":"b","env":"prod"}},{"apiVersion":"v1","kind":"ConfigMap"},{"apiVersion":"v1","kind":"ConfigMap","namespace":"default","name":"settings"}]`,
		},
		"Empty": {
			reason: "No requests encode to an empty array.",
			want:   `[]`,
		},
		"Invalid": {
			reason:  "Encoding refuses invalid requests and names the index.",
			in:      []Request{cm, {Kind: "ConfigMap"}},
			wantErr: "cannot encode watch request 1: apiVersion is required",
		},
		"TooMany": {
			reason:  "Encoding refuses more than MaxRequests requests.",
			in:      make([]Request, MaxRequests+1),
			wantErr: "cannot encode watch requests: 257 requests exceed the limit of 256",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Encode(tc.in)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Fatalf("%s\nEncode(): -want error, +got error:\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("%s\nEncode(): -want, +got:\n%s", tc.reason, diff)
			}
			// What Encode writes, Decode reads back, and re-encoding is stable.
			back, err := Decode(got)
			if err != nil {
				t.Fatalf("Decode(Encode()): %v", err)
			}
			again, err := Encode(back)
			if err != nil {
				t.Fatalf("Encode(Decode(Encode())): %v", err)
			}
			if diff := cmp.Diff(string(got), string(again)); diff != "" {
				t.Errorf("%s\nre-encoding: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	cases := map[string]struct {
		reason  string
		in      string
		want    []Request
		wantErr string
	}{
		"Valid": {
			reason: "A valid value decodes to its requests, in order.",
			in:     `[{"apiVersion":"v1","kind":"ConfigMap","name":"a"},{"apiVersion":"example.org/v1","kind":"Thing","namespace":"ns","matchLabels":{"k":"v"}}]`,
			want: []Request{
				{APIVersion: "v1", Kind: "ConfigMap", Name: "a"},
				{APIVersion: "example.org/v1", Kind: "Thing", Namespace: "ns", MatchLabels: map[string]string{"k": "v"}},
			},
		},
		"Blank": {
			reason: "An empty value holds no requests.",
			in:     "  ",
		},
		"Null": {
			reason: "JSON null holds no requests.",
			in:     "null",
		},
		"UnknownField": {
			reason:  "Unknown fields are refused.",
			in:      `[{"apiVersion":"v1","kind":"ConfigMap","labels":{"a":"b"}}]`,
			wantErr: `cannot decode watch requests: json: unknown field "labels"`,
		},
		"NotAnArray": {
			reason:  "The value is an array.",
			in:      `{"apiVersion":"v1","kind":"ConfigMap"}`,
			wantErr: "cannot decode watch requests: json: cannot unmarshal object into Go value of type []watchreq.Request",
		},
		"Trailing": {
			reason:  "Trailing data is refused.",
			in:      `[] []`,
			wantErr: "cannot decode watch requests: trailing data after the JSON array",
		},
		"Invalid": {
			reason:  "Decoded requests are validated.",
			in:      `[{"apiVersion":"v1"}]`,
			wantErr: "cannot decode watch request 0: kind is required",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Decode([]byte(tc.in))
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Fatalf("%s\nDecode(): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDecode(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	labels := map[string]string{"env": "prod", "tier": "db"}
	cases := map[string]struct {
		reason string
		req    Request
		ns     string
		name   string
		want   bool
	}{
		"KindOnly":        {reason: "A request without filters matches every object.", req: Request{}, ns: "a", name: "b", want: true},
		"NameMatch":       {reason: "The named object matches.", req: Request{Name: "b"}, ns: "a", name: "b", want: true},
		"NameMismatch":    {reason: "Another name does not match.", req: Request{Name: "c"}, ns: "a", name: "b"},
		"NamespaceMiss":   {reason: "Another namespace does not match.", req: Request{Namespace: "x", Name: "b"}, ns: "a", name: "b"},
		"LabelsSubset":    {reason: "An object carrying all the labels matches.", req: Request{MatchLabels: map[string]string{"env": "prod"}}, name: "b", want: true},
		"LabelValueDiff":  {reason: "A different label value does not match.", req: Request{MatchLabels: map[string]string{"env": "dev"}}, name: "b"},
		"LabelMissing":    {reason: "A missing label does not match.", req: Request{MatchLabels: map[string]string{"zone": "a"}}, name: "b"},
		"EmptyValueLabel": {reason: "A label wanted with an empty value must be present.", req: Request{MatchLabels: map[string]string{"zone": ""}}, name: "b"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.req.Matches(tc.ns, tc.name, labels); got != tc.want {
				t.Errorf("%s\nMatches(): want %v, got %v", tc.reason, tc.want, got)
			}
		})
	}
}

func TestGroupVersionKind(t *testing.T) {
	cases := map[string]struct {
		reason string
		req    Request
		want   schema.GroupVersionKind
	}{
		"Core":  {reason: "A core apiVersion has no group.", req: Request{APIVersion: "v1", Kind: "ConfigMap"}, want: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}},
		"Group": {reason: "A grouped apiVersion splits at the slash.", req: Request{APIVersion: "example.org/v1", Kind: "Thing"}, want: schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Thing"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.req.GroupVersionKind()); diff != "" {
				t.Errorf("%s\nGroupVersionKind(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestKey(t *testing.T) {
	cases := map[string]struct {
		reason  string
		uid     string
		wantErr string
	}{
		"UID":   {reason: "A Kubernetes UID is a valid key.", uid: "0c6f2c5e-8d7a-4f1e-9a51-3b0e1f0d2a11"},
		"Empty": {reason: "An empty UID is refused.", wantErr: "the XR's UID is required"},
		"Dots":  {reason: "Dots would split the key into NATS tokens.", uid: "a.b", wantErr: `UID "a.b" is not a valid watch request key`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Key(tc.uid)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Fatalf("%s\nKey(): -want error, +got error:\n%s", tc.reason, diff)
			}
			if err == nil && got != tc.uid {
				t.Errorf("%s\nKey(): want %q, got %q", tc.reason, tc.uid, got)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`[{"apiVersion":"v1","kind":"ConfigMap","name":"a"}]`))
	f.Add([]byte(`[{"apiVersion":"example.org/v1","kind":"Thing","namespace":"ns","matchLabels":{"k":"v"}}]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[{}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		reqs, err := Decode(b)
		if err != nil {
			return
		}
		// Whatever decodes is valid, so it encodes, and the canonical form is
		// a fixed point.
		enc, err := Encode(reqs)
		if err != nil {
			t.Fatalf("Encode(Decode(%q)): %v", b, err)
		}
		back, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(%q): %v", enc, err)
		}
		again, err := Encode(back)
		if err != nil {
			t.Fatalf("Encode(%v): %v", back, err)
		}
		if string(enc) != string(again) {
			t.Fatalf("canonical form is not stable: %s != %s", enc, again)
		}
	})
}
