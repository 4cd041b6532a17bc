package object

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

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
			checkTemplates(t, tc.reason, parse(t, head+tc.spec), detailsFromStatus, DetailsFromStatus, tc.want, tc.reads, tc.skips)
		})
	}
}

// checkTemplates checks a templates annotation (see templatesWhere) of the
// Composition in: compute returns want for it and, cached (trimmed), still
// does; named reports true of the templates in reads and false of those in
// skips.
func checkTemplates(t *testing.T, reason string, in *unstructured.Unstructured, compute func(*unstructured.Unstructured) string, named func(*unstructured.Unstructured, string) bool, want string, reads, skips []string) {
	t.Helper()
	if got := compute(in); got != want {
		t.Errorf("%s\ngot %q, want %q", reason, got, want)
	}
	out, err := Transform(ShapeComposition)(in)
	if err != nil {
		t.Fatalf("Transform(): %v", err)
	}
	cached := Unstructured(out)
	if got := compute(cached); got != want {
		t.Errorf("of the cached Composition: got %q, want %q", got, want)
	}
	for _, tpl := range reads {
		if !named(cached, tpl) {
			t.Errorf("template %q: got false, want true", tpl)
		}
	}
	for _, tpl := range skips {
		if named(cached, tpl) {
			t.Errorf("template %q: got true, want false", tpl)
		}
	}
}

func TestDetailsFromSpec(t *testing.T) {
	const comp = `apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: c}
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XDatabase}
  resources:
  - name: network
    connectionDetails:
    - {name: endpoint, type: FromFieldPath, fromFieldPath: status.atProvider.fields.selfLink}
  - name: database
    connectionDetails:
    - {name: password, type: FromConnectionSecretKey, fromConnectionSecretKey: password}
    - {name: username, type: FromValue, value: admin}
  - name: zeta
    connectionDetails: [{name: id, type: FromFieldPath, fromFieldPath: metadata.uid}]
  - name: alpha
    connectionDetails: [{name: n, fromFieldPath: "spec.forProvider.network"}]
  - name: cache
`
	in := parse(t, comp)
	const want = "alpha,zeta"
	if got := detailsFromSpec(in); got != want {
		t.Errorf("detailsFromSpec() = %q, want %q (only FromFieldPath details outside status, sorted)", got, want)
	}
	out, err := Transform(ShapeComposition)(in)
	if err != nil {
		t.Fatalf("Transform(): %v", err)
	}
	cached := Unstructured(out)
	if got := detailsFromSpec(cached); got != want {
		t.Errorf("detailsFromSpec() of the cached Composition = %q, want %q", got, want)
	}
	for tpl, reads := range map[string]bool{"alpha": true, "zeta": true, "": true, "network": false, "database": false, "cache": false} {
		if got := DetailsFromSpec(cached, tpl); got != reads {
			t.Errorf("DetailsFromSpec(%q) = %t, want %t", tpl, got, reads)
		}
	}
	pipeline := parse(t, "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: p}\nspec:\n  mode: Pipeline\n  pipeline: [{step: s, functionRef: {name: f}}]\n")
	if got := detailsFromSpec(pipeline); got != anyTemplate {
		t.Errorf("detailsFromSpec() of a pipeline = %q, want %q: functions may return any connection details", got, anyTemplate)
	}
}
