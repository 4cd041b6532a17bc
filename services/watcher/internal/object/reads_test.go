package object

import (
	"testing"
)

func TestReadsStatus(t *testing.T) {
	const head = "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: c}\nspec:\n  compositeTypeRef: {apiVersion: example.org/v1, kind: XDatabase}\n"
	cases := map[string]struct {
		reason string
		spec   string // the rest of the spec, indented by two spaces
		want   bool
	}{
		"ToCompositeOnly": {
			reason: "Patches that read the XR's spec and write its status read none of its status.",
			spec: `  mode: Resources
  resources:
  - name: a
    base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    patches:
    - {fromFieldPath: spec.size, toFieldPath: spec.forProvider.size}
    - {type: ToCompositeFieldPath, fromFieldPath: status.atProvider.id, toFieldPath: status.id}
    - {type: CombineToComposite, combine: {variables: [{fromFieldPath: status.atProvider.a}]}, toFieldPath: status.b}
`,
		},
		"NoMode": {
			reason: "A Composition without a mode and without patches reads nothing of the XR.",
			spec:   "  resources: [{name: a, base: {apiVersion: v1, kind: ConfigMap}}]\n",
		},
		"DefaultTypeFromStatus": {
			reason: "A patch without a type is FromCompositeFieldPath: from status, it reads the XR's status.",
			spec:   "  resources: [{name: a, base: {apiVersion: v1, kind: ConfigMap}, patches: [{fromFieldPath: status.tier, toFieldPath: data.tier}]}]\n",
			want:   true,
		},
		"FromCompositeStatusBracket": {
			reason: "A path under status written with brackets is under status.",
			spec:   "  resources: [{name: a, base: {apiVersion: v1, kind: ConfigMap}, patches: [{type: FromCompositeFieldPath, fromFieldPath: \"status[tier]\", toFieldPath: data.tier}]}]\n",
			want:   true,
		},
		"StatusLikeField": {
			reason: "A field whose name only starts with status is not under status.",
			spec:   "  resources: [{name: a, base: {apiVersion: v1, kind: ConfigMap}, patches: [{fromFieldPath: spec.statusCode, toFieldPath: data.code}, {fromFieldPath: statusCode, toFieldPath: data.c}]}]\n",
		},
		"CombineFromStatus": {
			reason: "A CombineFromComposite variable under status reads the XR's status.",
			spec:   "  resources: [{name: a, base: {apiVersion: v1, kind: ConfigMap}, patches: [{type: CombineFromComposite, combine: {variables: [{fromFieldPath: spec.a}, {fromFieldPath: status.b}]}, toFieldPath: data.c}]}]\n",
			want:   true,
		},
		"PatchSet": {
			reason: "A patch set's patch reads the XR's status for every template that uses it.",
			spec:   "  patchSets: [{name: ps, patches: [{fromFieldPath: status.tier, toFieldPath: data.tier}]}]\n  resources: [{name: a, base: {apiVersion: v1, kind: ConfigMap}, patches: [{type: PatchSet, patchSetName: ps}]}]\n",
			want:   true,
		},
		"EnvironmentPatch": {
			reason: "An environment patch from the XR's status reads it.",
			spec:   "  environment: {patches: [{type: FromCompositeFieldPath, fromFieldPath: status.region, toFieldPath: region}]}\n  resources: [{name: a, base: {apiVersion: v1, kind: ConfigMap}}]\n",
			want:   true,
		},
		"EnvironmentSelector": {
			reason: "An EnvironmentConfig selector whose label value comes from the XR's status reads it.",
			spec:   "  environment: {environmentConfigs: [{type: Selector, selector: {matchLabels: [{key: region, type: FromCompositeFieldPath, valueFromFieldPath: status.region}]}}]}\n  resources: [{name: a, base: {apiVersion: v1, kind: ConfigMap}}]\n",
			want:   true,
		},
		"Pipeline": {
			reason: "Functions may read anything of the XR.",
			spec:   "  mode: Pipeline\n  pipeline: [{step: s, functionRef: {name: f}}]\n",
			want:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := parse(t, head+tc.spec)
			if got := readsStatus(in) == "true"; got != tc.want {
				t.Errorf("%s\nreadsStatus(): got %t, want %t", tc.reason, got, tc.want)
			}
			// The cached shape keeps the answer, and so does a transform
			// of it (client-go may transform an object twice).
			for _, s := range []Shape{ShapeComposition, ShapeRevision} {
				tf := Transform(s)
				once, err := tf(in)
				if err != nil {
					t.Fatal(err)
				}
				twice, err := tf(once)
				if err != nil {
					t.Fatal(err)
				}
				for i, o := range []any{once, twice} {
					if got := ReadsStatus(Unstructured(o)); got != tc.want {
						t.Errorf("%s\nReadsStatus() of the cached object after %d transforms: got %t, want %t", tc.reason, i+1, got, tc.want)
					}
				}
			}
		})
	}
}
