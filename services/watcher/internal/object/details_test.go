package object

import "testing"

func TestDetailsFromStatus(t *testing.T) {
	const head = "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: c}\nspec:\n  compositeTypeRef: {apiVersion: example.org/v1, kind: XDatabase}\n"
	cases := map[string]struct {
		reason string
		spec   string // the rest of the spec, indented by two spaces
		want   string
		// reads and skips are templates whose status the details may
		// and may not read, as DetailsFromStatus answers from the
		// cached Composition.
		reads, skips []string
	}{
		"Bench": {
			reason: "Only templates with a FromFieldPath detail under status are named: not one whose details come from its connection Secret or a value, nor one without details.",
			spec: `  resources:
  - name: network
    base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    connectionDetails:
    - {name: endpoint, type: FromFieldPath, fromFieldPath: status.atProvider.fields.selfLink}
  - name: database
    base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    connectionDetails:
    - {name: password, type: FromConnectionSecretKey, fromConnectionSecretKey: password}
    - {name: username, type: FromValue, value: admin}
    - {name: id, type: FromFieldPath, fromFieldPath: metadata.uid}
  - name: cache
    base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
`,
			want:  "network",
			reads: []string{"network", ""},
			skips: []string{"database", "cache"},
		},
		"Untyped": {
			reason: "A detail without a type but with a fromFieldPath is a FromFieldPath detail; names are sorted.",
			spec: `  resources:
  - name: zeta
    connectionDetails: [{name: a, fromFieldPath: "status.atProvider.a"}]
  - name: alpha
    connectionDetails: [{name: b, fromFieldPath: "status[atProvider]"}]
`,
			want:  "alpha,zeta",
			reads: []string{"alpha", "zeta"},
			skips: []string{"beta"},
		},
		"Unnamed": {
			reason: "A template without a name that reads status could be any composed resource.",
			spec: `  resources:
  - connectionDetails: [{name: a, type: FromFieldPath, fromFieldPath: status.a}]
`,
			want:  "*",
			reads: []string{"anything"},
		},
		"Pipeline": {
			reason: "Functions may return any connection details.",
			spec:   "  mode: Pipeline\n  pipeline: [{step: s, functionRef: {name: f}}]\n",
			want:   "*",
			reads:  []string{"anything"},
		},
		"None": {
			reason: "A Composition without connection details reads no composed status.",
			spec:   "  resources:\n  - name: a\n",
			want:   "",
			skips:  []string{"a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := parse(t, head+tc.spec)
			if got := detailsFromStatus(in); got != tc.want {
				t.Errorf("%s\ndetailsFromStatus() = %q, want %q", tc.reason, got, tc.want)
			}
			// Cached (trimmed), the Composition keeps the value.
			out, err := Transform(ShapeComposition)(in)
			if err != nil {
				t.Fatalf("Transform(): %v", err)
			}
			cached := Unstructured(out)
			if got := detailsFromStatus(cached); got != tc.want {
				t.Errorf("detailsFromStatus() of the cached Composition = %q, want %q", got, tc.want)
			}
			for _, tpl := range tc.reads {
				if !DetailsFromStatus(cached, tpl) {
					t.Errorf("DetailsFromStatus(%q) = false, want true", tpl)
				}
			}
			for _, tpl := range tc.skips {
				if DetailsFromStatus(cached, tpl) {
					t.Errorf("DetailsFromStatus(%q) = true, want false", tpl)
				}
			}
		})
	}
}
