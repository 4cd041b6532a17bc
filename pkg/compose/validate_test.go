package compose

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		reason string
		spec   string
		want   []string // field paths of the errors, in order
	}{
		"Valid": {
			reason: "The Composition of the Render tests is valid.",
			spec:   testComposition,
		},
		"NoResources": {
			reason: "Mode Resources needs resources, as Crossplane requires.",
			spec:   `{compositeTypeRef: {apiVersion: a/v1, kind: X}}`,
			want:   []string{"spec.resources"},
		},
		"NoPipeline": {
			reason: "Mode Pipeline needs steps.",
			spec:   `{compositeTypeRef: {apiVersion: a/v1, kind: X}, mode: Pipeline}`,
			want:   []string{"spec.pipeline"},
		},
		"PipelineSteps": {
			reason: "Steps need unique names and a function; Secret credentials need a secretRef.",
			spec: `{compositeTypeRef: {apiVersion: a/v1, kind: X}, mode: Pipeline, pipeline: [
			  {step: a, functionRef: {name: f}},
			  {step: a, functionRef: {name: ""}, credentials: [{name: c, source: Secret}]}]}`,
			want: []string{"spec.pipeline[1].step", "spec.pipeline[1].functionRef.name", "spec.pipeline[1].credentials[0].secretRef"},
		},
		"MixedNames": {
			reason: "Templates are all named or all anonymous.",
			spec: `{compositeTypeRef: {apiVersion: a/v1, kind: X}, resources: [
			  {name: a, base: {apiVersion: v1, kind: A}}, {base: {apiVersion: v1, kind: B}}]}`,
			want: []string{"spec.resources[1].name"},
		},
		"BadTemplates": {
			reason: "Every problem of every template is reported with its path: a base without kind, an undefined PatchSet, a patch without fromFieldPath, a transform without its configuration, an invalid readiness check.",
			spec: `{compositeTypeRef: {apiVersion: a/v1, kind: X}, resources: [
			  {name: a, base: {apiVersion: v1}, patches: [{type: PatchSet, patchSetName: nope}, {type: ToCompositeFieldPath, toFieldPath: status.x}]},
			  {name: b, base: {apiVersion: v1, kind: B}, patches: [{fromFieldPath: spec.a, toFieldPath: spec.b, transforms: [{type: math, math: {type: ClampMax}}]}],
			   readinessChecks: [{type: MatchString, fieldPath: status.s}]}]}`,
			want: []string{
				"spec.resources[0].base", "spec.resources[0].patches[0].patchSetName", "spec.resources[0].patches[1]",
				"spec.resources[1].patches[0].transforms[0]", "spec.resources[1].readinessChecks[0].matchString",
			},
		},
		"NestedPatchSet": {
			reason: "A PatchSet may not include another PatchSet.",
			spec: `{compositeTypeRef: {apiVersion: a/v1, kind: X}, patchSets: [{name: s, patches: [{type: PatchSet, patchSetName: s}]}],
			  resources: [{base: {apiVersion: v1, kind: A}, patches: [{type: PatchSet, patchSetName: s}]}]}`,
			want: []string{"spec.patchSets[0].patches[0].type"},
		},
		"UnknownPatchType": {
			reason: "A patch type Loom does not know is refused.",
			spec:   `{compositeTypeRef: {apiVersion: a/v1, kind: X}, resources: [{base: {apiVersion: v1, kind: A}, patches: [{type: Sideways, fromFieldPath: a}]}]}`,
			want:   []string{"spec.resources[0].patches[0].type"},
		},
		"EnvironmentPatch": {
			reason: "Environment patches may not combine.",
			spec: `{compositeTypeRef: {apiVersion: a/v1, kind: X}, resources: [{base: {apiVersion: v1, kind: A}}],
			  environment: {patches: [{type: CombineToEnvironment, toFieldPath: a}]}}`,
			want: []string{"spec.environment.patches[0].type"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := &v1.CompositionSpec{}
			if err := yaml.Unmarshal([]byte(tc.spec), spec); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range Validate(spec) {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s\nerrors: %v", tc.reason, diff, Validate(spec).ToAggregate())
			}
		})
	}
}

func TestValidateTransform(t *testing.T) {
	str := func(s string) *string { return &s }
	conv := func(c v1.StringConversionType) *v1.StringConversionType { return &c }
	cases := map[string]struct {
		reason string
		t      v1.Transform
		ok     bool
	}{
		"Convert":        {reason: "A known toType is fine.", t: v1.Transform{Type: v1.TransformTypeConvert, Convert: &v1.ConvertTransform{ToType: "int"}}, ok: true},
		"ConvertUnknown": {reason: "An unknown toType is not.", t: v1.Transform{Type: v1.TransformTypeConvert, Convert: &v1.ConvertTransform{ToType: "uint"}}},
		"StringToJson":   {reason: "ToJson is a known conversion.", t: v1.Transform{Type: v1.TransformTypeString, String: &v1.StringTransform{Type: v1.StringTransformTypeConvert, Convert: conv(v1.StringConversionTypeToJSON)}}, ok: true},
		"StringBad":      {reason: "An unknown conversion is refused.", t: v1.Transform{Type: v1.TransformTypeString, String: &v1.StringTransform{Type: v1.StringTransformTypeConvert, Convert: conv("ToKlingon")}}},
		"Regexp":         {reason: "A regexp that does not compile is refused.", t: v1.Transform{String: &v1.StringTransform{Type: v1.StringTransformTypeRegexp, Regexp: &v1.StringTransformRegexp{Match: "("}}}},
		"Format":         {reason: "Format needs fmt.", t: v1.Transform{String: &v1.StringTransform{Format: str("%s")}}, ok: true},
		"NoType":         {reason: "A transform needs a type or one configuration.", t: v1.Transform{}},
		"MapEmpty":       {reason: "A map must not be empty.", t: v1.Transform{Type: v1.TransformTypeMap, Map: &v1.MapTransform{}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidateTransform(tc.t)
			if (err == nil) != tc.ok {
				t.Errorf("%s\nValidateTransform: want ok=%t, got %v", tc.reason, tc.ok, err)
			}
		})
	}
}

func TestTransformOutputType(t *testing.T) {
	conv := func(c v1.StringConversionType) *v1.StringConversionType { return &c }
	mul := int64(2)
	cases := map[string]struct {
		reason  string
		t       v1.Transform
		in      string
		want    string
		wantErr bool
	}{
		"MathInteger":    {reason: "Math keeps an integer an integer.", t: v1.Transform{Math: &v1.MathTransform{Multiply: &mul}}, in: "integer", want: "integer"},
		"MathString":     {reason: "Math refuses a string.", t: v1.Transform{Math: &v1.MathTransform{Multiply: &mul}}, in: "string", wantErr: true},
		"MapUnknown":     {reason: "A map's output cannot be known.", t: v1.Transform{Map: &v1.MapTransform{}}, in: "string", want: ""},
		"ToJson":         {reason: "ToJson turns anything into a string.", t: v1.Transform{String: &v1.StringTransform{Type: v1.StringTransformTypeConvert, Convert: conv(v1.StringConversionTypeToJSON)}}, in: "object", want: "string"},
		"ToUpperObject":  {reason: "ToUpper wants a string.", t: v1.Transform{String: &v1.StringTransform{Type: v1.StringTransformTypeConvert, Convert: conv(v1.StringConversionTypeToUpper)}}, in: "object", wantErr: true},
		"ConvertInt":     {reason: "A string converts to an integer.", t: v1.Transform{Convert: &v1.ConvertTransform{ToType: "int"}}, in: "string", want: "integer"},
		"ConvertObject":  {reason: "An object converts to nothing.", t: v1.Transform{Convert: &v1.ConvertTransform{ToType: "string"}}, in: "object", wantErr: true},
		"ConvertUnknown": {reason: "An unknown input gives the toType.", t: v1.Transform{Convert: &v1.ConvertTransform{ToType: "bool"}}, want: "boolean"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := TransformOutputType(tc.t, tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nerror: want %t, got %v", tc.reason, tc.wantErr, err)
			}
			if got != tc.want {
				t.Errorf("%s\nwant %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}
