package compose

import (
	"errors"
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// Validate checks a Composition's spec on its own, without a composite
// resource or any schema: what Crossplane v1.20 checks when a Composition
// is written (its "logical" validation), with Loom's rules where Render is
// stricter. It is the up-front part of Render, run for every template and
// patch instead of stopping at the first failure: the mode's list is not
// empty; templates are all named or all anonymous, with unique names; a
// PatchSet includes no other PatchSet and every PatchSet patch names a
// defined PatchSet; every template's base has an apiVersion and a kind;
// every patch has the fields its type and policy require and well-formed
// field paths; every transform has the configuration its type requires;
// readiness checks are valid; pipeline steps have unique names and a
// function, and credentials from a Secret name it.
//
// It returns every problem found, each with its field path in the
// Composition, or nil.
func Validate(spec *v1.CompositionSpec) field.ErrorList {
	sp := field.NewPath("spec")
	var errs field.ErrorList
	switch spec.GetMode() {
	case v1.CompositionModeResources:
		if len(spec.Resources) == 0 {
			errs = append(errs, field.Required(sp.Child("resources"), "an array of resources is required in Resources mode (the default if no mode is specified)"))
		}
	case v1.CompositionModePipeline:
		if len(spec.Pipeline) == 0 {
			errs = append(errs, field.Required(sp.Child("pipeline"), "an array of pipeline steps is required in Pipeline mode"))
		}
		errs = append(errs, validatePipeline(spec.Pipeline, sp.Child("pipeline"))...)
	default:
		errs = append(errs, field.NotSupported(sp.Child("mode"), spec.GetMode(), []string{string(v1.CompositionModeResources), string(v1.CompositionModePipeline)}))
	}
	if _, err := templateNames(spec.Resources); err != nil {
		errs = append(errs, compositionFieldError(err))
	}

	defined := map[string]bool{}
	for i, s := range spec.PatchSets {
		defined[s.Name] = true
		for j, p := range s.Patches {
			path := sp.Child("patchSets").Index(i).Child("patches").Index(j)
			if p.GetType() == v1.PatchTypePatchSet {
				errs = append(errs, field.Invalid(path.Child("type"), p.Type, "a PatchSet may not include another PatchSet"))
				continue
			}
			errs = append(errs, validatePatch(p, path)...)
		}
	}
	for i := range spec.Resources {
		t := &spec.Resources[i]
		rp := sp.Child("resources").Index(i)
		if _, err := decodeBase(t); err != nil {
			errs = append(errs, field.Invalid(rp.Child("base"), "", err.Error()))
		}
		for j, p := range t.Patches {
			pp := rp.Child("patches").Index(j)
			if p.GetType() != v1.PatchTypePatchSet {
				errs = append(errs, validatePatch(p, pp)...)
				continue
			}
			switch {
			case p.PatchSetName == nil || *p.PatchSetName == "":
				errs = append(errs, field.Required(pp.Child("patchSetName"), "is required by patch type PatchSet"))
			case !defined[*p.PatchSetName]:
				errs = append(errs, field.Invalid(pp.Child("patchSetName"), *p.PatchSetName, "must be the name of a PatchSet of spec.patchSets"))
			}
		}
		for j, c := range t.ReadinessChecks {
			var fe *FieldError
			if err := ValidateReadinessCheck(c); errors.As(err, &fe) {
				errs = append(errs, field.Invalid(rp.Child("readinessChecks").Index(j).Child(fe.Field), "", fe.Err.Error()))
			}
		}
	}
	if env := spec.Environment; env != nil {
		for j := range env.Patches {
			p := env.Patches[j].ToPatch()
			path := sp.Child("environment", "patches").Index(j)
			if _, _, _, err := direction(p.GetType(), scopeEnvironment, objects{}); err != nil {
				errs = append(errs, field.Invalid(path.Child("type"), p.Type, err.Error()))
				continue
			}
			errs = append(errs, validatePatch(p, path)...)
		}
	}
	return errs
}

// validatePatch checks one patch that is not of type PatchSet: its type,
// the fields its type and policy require, its field paths, its transforms.
func validatePatch(p v1.Patch, path *field.Path) field.ErrorList {
	if _, _, _, err := direction(p.GetType(), scopeTemplate, objects{}); err != nil {
		return field.ErrorList{field.Invalid(path.Child("type"), p.Type, err.Error())}
	}
	var errs field.ErrorList
	if _, err := compilePatch(p); err != nil {
		errs = append(errs, field.Invalid(path, describePatch(p), err.Error()))
	}
	for i, t := range p.Transforms {
		if err := ValidateTransform(t); err != nil {
			errs = append(errs, field.Invalid(path.Child("transforms").Index(i), DescribeTransform(t), err.Error()))
		}
	}
	return errs
}

func describePatch(p v1.Patch) string {
	from, to := describe(p)
	return fmt.Sprintf("%s %s -> %s", p.GetType(), orNone(from), orNone(to))
}

// validatePipeline checks the steps of a Pipeline Composition.
func validatePipeline(steps []v1.PipelineStep, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, s := range steps {
		sp := path.Index(i)
		if s.Step == "" {
			errs = append(errs, field.Required(sp.Child("step"), "every pipeline step needs a name"))
		} else if seen[s.Step] {
			errs = append(errs, field.Duplicate(sp.Child("step"), s.Step))
		}
		seen[s.Step] = true
		if s.FunctionRef.Name == "" {
			errs = append(errs, field.Required(sp.Child("functionRef", "name"), "every pipeline step needs a function"))
		}
		creds := map[string]bool{}
		for j, c := range s.Credentials {
			cp := sp.Child("credentials").Index(j)
			if creds[c.Name] {
				errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
			}
			creds[c.Name] = true
			if c.Source == v1.FunctionCredentialsSourceSecret && c.SecretRef == nil {
				errs = append(errs, field.Required(cp.Child("secretRef"), "is required when source is Secret"))
			}
		}
	}
	return errs
}

// compositionFieldError turns a *CompositionError into a field error.
func compositionFieldError(err error) *field.Error {
	var ce *CompositionError
	if errors.As(err, &ce) {
		return field.Invalid(field.NewPath(ce.Field), "", ce.Err.Error())
	}
	return field.Invalid(field.NewPath("spec"), "", err.Error())
}

// ValidateTransform checks that a transform has the configuration its type
// requires, as far as that can be told without an input: a known type and
// the type's own field, with known sub-types, the values each sub-type
// needs, and regular expressions that compile.
func ValidateTransform(t v1.Transform) error {
	switch t.GetType() {
	case v1.TransformTypeMap:
		if t.Map == nil {
			return missing("map", "map")
		}
		if len(t.Map.Pairs) == 0 {
			return errors.New("map is empty")
		}
	case v1.TransformTypeMatch:
		if t.Match == nil {
			return missing("match", "match")
		}
		return validateMatch(t.Match)
	case v1.TransformTypeMath:
		if t.Math == nil {
			return missing("math", "math")
		}
		return validateMath(t.Math)
	case v1.TransformTypeString:
		if t.String == nil {
			return missing("string", "string")
		}
		return validateString(t.String)
	case v1.TransformTypeConvert:
		if t.Convert == nil {
			return missing("convert", "convert")
		}
		if _, ok := TransformIOTypeOf(t.Convert.ToType); !ok {
			return fmt.Errorf("unknown toType %q (want string, int, int64, bool, float64, object or array)", t.Convert.ToType)
		}
		switch t.Convert.GetFormat() {
		case v1.ConvertTransformFormatNone, v1.ConvertTransformFormatQuantity, v1.ConvertTransformFormatJSON:
		default:
			return fmt.Errorf("unknown format %q (want none, quantity or json)", t.Convert.GetFormat())
		}
	case "":
		if t.Type == "" {
			return errors.New("type is required (or exactly one of map, match, math, string and convert)")
		}
		return fmt.Errorf("unknown transform type %q (want map, match, math, string or convert)", t.Type)
	default:
		return fmt.Errorf("unknown transform type %q (want map, match, math, string or convert)", t.Type)
	}
	return nil
}

func validateMatch(m *v1.MatchTransform) error {
	if len(m.Patterns) == 0 {
		return errors.New("patterns must list at least one pattern")
	}
	for i, p := range m.Patterns {
		switch p.GetType() {
		case v1.MatchTransformPatternTypeLiteral:
			if p.Literal == nil {
				return fmt.Errorf("pattern %d: literal is required by pattern type literal", i)
			}
		case v1.MatchTransformPatternTypeRegexp:
			if p.Regexp == nil {
				return fmt.Errorf("pattern %d: regexp is required by pattern type regexp", i)
			}
			if _, err := regexp.Compile(*p.Regexp); err != nil {
				return fmt.Errorf("pattern %d: invalid regexp %q: %w", i, *p.Regexp, err)
			}
		default:
			return fmt.Errorf("pattern %d: unknown pattern type %q (want literal or regexp)", i, p.Type)
		}
	}
	switch m.FallbackTo {
	case "", v1.MatchFallbackToTypeValue, v1.MatchFallbackToTypeInput:
		return nil
	}
	return fmt.Errorf("unknown fallbackTo %q (want Value or Input)", m.FallbackTo)
}

func validateMath(m *v1.MathTransform) error {
	switch m.GetType() {
	case v1.MathTransformTypeMultiply:
		if m.Multiply == nil {
			return errors.New("multiply is required by math type Multiply")
		}
	case v1.MathTransformTypeClampMin:
		if m.ClampMin == nil {
			return errors.New("clampMin is required by math type ClampMin")
		}
	case v1.MathTransformTypeClampMax:
		if m.ClampMax == nil {
			return errors.New("clampMax is required by math type ClampMax")
		}
	default:
		return fmt.Errorf("unknown math type %q (want Multiply, ClampMin or ClampMax)", m.Type)
	}
	return nil
}

func validateString(s *v1.StringTransform) error {
	switch s.GetType() {
	case v1.StringTransformTypeFormat:
		if s.Format == nil {
			return errors.New("fmt is required by string type Format")
		}
	case v1.StringTransformTypeConvert:
		if s.Convert == nil {
			return errors.New("convert is required by string type Convert")
		}
		if !isConversion(*s.Convert) {
			return fmt.Errorf("unknown string conversion %q (want ToUpper, ToLower, ToBase64, FromBase64, ToJson, ToSha1, ToSha256, ToSha512 or ToAdler32)", *s.Convert)
		}
	case v1.StringTransformTypeTrimPrefix, v1.StringTransformTypeTrimSuffix:
		if s.Trim == nil {
			return fmt.Errorf("trim is required by string type %s", s.GetType())
		}
	case v1.StringTransformTypeRegexp:
		if s.Regexp == nil {
			return errors.New("regexp is required by string type Regexp")
		}
		if _, err := regexp.Compile(s.Regexp.Match); err != nil {
			return fmt.Errorf("invalid regexp %q: %w", s.Regexp.Match, err)
		}
	case v1.StringTransformTypeJoin:
		if s.Join == nil {
			return errors.New("join is required by string type Join")
		}
	case v1.StringTransformTypeReplace:
		if s.Replace == nil {
			return errors.New("replace is required by string type Replace")
		}
		if s.Replace.Search == "" {
			return errors.New("replace.search must not be empty")
		}
	default:
		return fmt.Errorf("unknown string type %q (want Format, Convert, TrimPrefix, TrimSuffix, Regexp, Join or Replace)", s.Type)
	}
	return nil
}

// isConversion reports whether c is a string conversion Loom knows.
func isConversion(c v1.StringConversionType) bool {
	switch c {
	case v1.StringConversionTypeToUpper, v1.StringConversionTypeToLower, v1.StringConversionTypeToBase64,
		v1.StringConversionTypeFromBase64, v1.StringConversionTypeToJSON, v1.StringConversionTypeToSHA1,
		v1.StringConversionTypeToSHA256, v1.StringConversionTypeToSHA512, v1.StringConversionTypeToAdler32:
		return true
	}
	return false
}

// TransformIOTypeOf returns the canonical form of a convert transform's type
// (int is int64) and whether it is known.
func TransformIOTypeOf(t v1.TransformIOType) (v1.TransformIOType, bool) {
	switch t {
	case v1.TransformIOTypeInt, v1.TransformIOTypeInt64:
		return v1.TransformIOTypeInt64, true
	case v1.TransformIOTypeString, v1.TransformIOTypeBool, v1.TransformIOTypeFloat64, v1.TransformIOTypeObject, v1.TransformIOTypeArray:
		return t, true
	}
	return "", false
}

// JSON types of values, as TypeOf names them, for reasoning about
// transforms without values.
const (
	jsonString  = "string"
	jsonInteger = "integer"
	jsonNumber  = "number"
	jsonBoolean = "boolean"
	jsonObject  = "object"
	jsonArray   = "array"
)

// TransformOutputType returns the JSON type (as TypeOf names them) a valid
// transform outputs for an input of JSON type in, or "" when that cannot be
// known without the value (map and match return what they were
// configured with; an unknown input). It returns an error when the
// transform refuses every input of type in, for example a math transform
// given a string or a Join given an object. An empty in is an unknown
// input: no error, and the output type when the transform alone decides it.
func TransformOutputType(t v1.Transform, in string) (string, error) {
	switch t.GetType() {
	case v1.TransformTypeMap, v1.TransformTypeMatch:
		if in != "" && in != jsonString {
			return "", fmt.Errorf("input is %s, want a string", in)
		}
		return "", nil
	case v1.TransformTypeMath:
		switch in {
		case jsonInteger, jsonNumber:
			return in, nil
		case "":
			return "", nil
		}
		return "", fmt.Errorf("input is %s, want a number", in)
	case v1.TransformTypeString:
		return stringOutputType(t.String, in)
	case v1.TransformTypeConvert:
		return convertOutputType(t.Convert, in)
	}
	return "", nil
}

func stringOutputType(s *v1.StringTransform, in string) (string, error) {
	if s == nil || in == "" {
		return jsonString, nil
	}
	switch s.GetType() { //nolint:exhaustive // Format and Replace take any input.
	case v1.StringTransformTypeJoin:
		if in != jsonArray {
			return "", fmt.Errorf("input is %s, want an array", in)
		}
	case v1.StringTransformTypeRegexp, v1.StringTransformTypeTrimPrefix, v1.StringTransformTypeTrimSuffix:
		if in != jsonString {
			return "", fmt.Errorf("input is %s, want a string", in)
		}
	case v1.StringTransformTypeConvert:
		if s.Convert == nil {
			break
		}
		switch *s.Convert { //nolint:exhaustive // The others take any input.
		case v1.StringConversionTypeToUpper, v1.StringConversionTypeToLower, v1.StringConversionTypeToBase64, v1.StringConversionTypeFromBase64:
			if in != jsonString {
				return "", fmt.Errorf("input is %s, want a string for conversion %s", in, *s.Convert)
			}
		}
	}
	return jsonString, nil
}

// convertJSONType is the JSON type of a convert transform's toType.
var convertJSONType = map[v1.TransformIOType]string{ //nolint:gochecknoglobals // Treated as a constant.
	v1.TransformIOTypeString: jsonString, v1.TransformIOTypeBool: jsonBoolean, v1.TransformIOTypeInt64: jsonInteger,
	v1.TransformIOTypeFloat64: jsonNumber, v1.TransformIOTypeObject: jsonObject, v1.TransformIOTypeArray: jsonArray,
}

func convertOutputType(c *v1.ConvertTransform, in string) (string, error) {
	if c == nil {
		return "", nil
	}
	to, ok := TransformIOTypeOf(c.ToType)
	if !ok {
		return "", nil
	}
	out := convertJSONType[to]
	if in == "" || in == out && c.GetFormat() == v1.ConvertTransformFormatNone {
		return out, nil
	}
	format := c.GetFormat()
	supported := false
	switch in {
	case jsonString:
		switch format { //nolint:exhaustive // Unknown formats are ValidateTransform's.
		case v1.ConvertTransformFormatNone:
			supported = out == jsonInteger || out == jsonBoolean || out == jsonNumber
		case v1.ConvertTransformFormatQuantity:
			supported = out == jsonNumber
		case v1.ConvertTransformFormatJSON:
			supported = out == jsonObject || out == jsonArray
		}
	case jsonBoolean:
		supported = format == v1.ConvertTransformFormatNone && (out == jsonString || out == jsonInteger || out == jsonNumber)
	case jsonInteger, jsonNumber:
		supported = format == v1.ConvertTransformFormatNone && (out == jsonString || out == jsonBoolean || out == jsonInteger || out == jsonNumber)
	}
	if !supported {
		return "", fmt.Errorf("conversion from %s to %s is not supported with format %s", in, c.ToType, format)
	}
	return out, nil
}
