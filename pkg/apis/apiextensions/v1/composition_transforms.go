package v1

import (
	"encoding/json"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// A TransformType is the type of a transform.
type TransformType string

// Transform types.
const (
	TransformTypeMap     TransformType = "map"
	TransformTypeMatch   TransformType = "match"
	TransformTypeMath    TransformType = "math"
	TransformTypeString  TransformType = "string"
	TransformTypeConvert TransformType = "convert"
)

// A Transform turns an input value into an output value. Exactly the field
// named by Type is used.
type Transform struct {
	// Type of the transform. When empty it is inferred from the one
	// configuration field that is set.
	// +optional
	// +kubebuilder:validation:Enum=map;match;math;string;convert
	Type TransformType `json:"type,omitempty"`

	// Math transforms a number.
	// +optional
	Math *MathTransform `json:"math,omitempty"`

	// Map uses the input as a key in the given map and returns the value.
	// +optional
	Map *MapTransform `json:"map,omitempty"`

	// Match returns the result of the first pattern that matches the input.
	// +optional
	Match *MatchTransform `json:"match,omitempty"`

	// String transforms the input into a string.
	// +optional
	String *StringTransform `json:"string,omitempty"`

	// Convert casts the input into another type.
	// +optional
	Convert *ConvertTransform `json:"convert,omitempty"`
}

// GetType returns the transform's type, inferring it from the configuration
// field that is set when Type is empty. It returns "" if it cannot tell.
func (t *Transform) GetType() TransformType {
	if t.Type != "" {
		return t.Type
	}
	var set []TransformType
	if t.Math != nil {
		set = append(set, TransformTypeMath)
	}
	if t.Map != nil {
		set = append(set, TransformTypeMap)
	}
	if t.Match != nil {
		set = append(set, TransformTypeMatch)
	}
	if t.String != nil {
		set = append(set, TransformTypeString)
	}
	if t.Convert != nil {
		set = append(set, TransformTypeConvert)
	}
	if len(set) != 1 {
		return ""
	}
	return set[0]
}

// A MathTransformType is the operation of a math transform.
type MathTransformType string

// Math transform types.
const (
	// MathTransformTypeMultiply multiplies the input. It is the default.
	MathTransformTypeMultiply MathTransformType = "Multiply"
	// MathTransformTypeClampMin raises the input to at least ClampMin.
	MathTransformTypeClampMin MathTransformType = "ClampMin"
	// MathTransformTypeClampMax lowers the input to at most ClampMax.
	MathTransformTypeClampMax MathTransformType = "ClampMax"
)

// A MathTransform applies a mathematical operation to a number.
type MathTransform struct {
	// Type of the math transform.
	// +optional
	// +kubebuilder:validation:Enum=Multiply;ClampMin;ClampMax
	// +kubebuilder:default=Multiply
	Type MathTransformType `json:"type,omitempty"`

	// Multiply the input by this value.
	// +optional
	Multiply *int64 `json:"multiply,omitempty"`

	// ClampMin is the smallest value the transform returns.
	// +optional
	ClampMin *int64 `json:"clampMin,omitempty"`

	// ClampMax is the largest value the transform returns.
	// +optional
	ClampMax *int64 `json:"clampMax,omitempty"`
}

// GetType returns the math transform type, defaulting to Multiply.
func (m *MathTransform) GetType() MathTransformType {
	if m.Type == "" {
		return MathTransformTypeMultiply
	}
	return m.Type
}

// A MapTransform uses its input as a key into Pairs and returns the value.
type MapTransform struct {
	// Pairs is the map used by the transform. In YAML the pairs are written
	// inline: `map: {small: "10", large: "100"}`.
	// +optional
	Pairs map[string]extv1.JSON `json:",inline"`
}

// The Kubernetes JSON decoder does not fill an inlined map, so MapTransform
// marshals its pairs itself. The ",inline" tag stays so that controller-gen
// generates the schema of a free-form object.

// UnmarshalJSON decodes the inline pairs of a map transform.
func (m *MapTransform) UnmarshalJSON(b []byte) error {
	return json.Unmarshal(b, &m.Pairs)
}

// MarshalJSON encodes the inline pairs of a map transform.
func (m MapTransform) MarshalJSON() ([]byte, error) {
	return json.Marshal(m.Pairs)
}

// A MatchFallbackTo says what a match transform returns when no pattern
// matches.
type MatchFallbackTo string

// Match fallbacks.
const (
	// MatchFallbackToTypeValue returns FallbackValue (null if unset).
	MatchFallbackToTypeValue MatchFallbackTo = "Value"
	// MatchFallbackToTypeInput returns the input unchanged.
	MatchFallbackToTypeInput MatchFallbackTo = "Input"
)

// A MatchTransform returns the result of the first of its patterns that
// matches the input.
type MatchTransform struct {
	// Patterns are tested in order; the result of the first match is the
	// output.
	Patterns []MatchTransformPattern `json:"patterns,omitempty"`

	// FallbackValue is returned when no pattern matches and FallbackTo is
	// Value.
	// +optional
	FallbackValue *extv1.JSON `json:"fallbackValue,omitempty"`

	// FallbackTo says what to return when no pattern matches.
	// +optional
	// +kubebuilder:validation:Enum=Value;Input
	// +kubebuilder:default=Value
	FallbackTo MatchFallbackTo `json:"fallbackTo,omitempty"`
}

// A MatchTransformPatternType says how a pattern matches.
type MatchTransformPatternType string

// Match pattern types.
const (
	// MatchTransformPatternTypeLiteral matches a string exactly. The default.
	MatchTransformPatternTypeLiteral MatchTransformPatternType = "literal"
	// MatchTransformPatternTypeRegexp matches a string with a regular
	// expression.
	MatchTransformPatternTypeRegexp MatchTransformPatternType = "regexp"
)

// A MatchTransformPattern is one pattern of a match transform.
type MatchTransformPattern struct {
	// Type says how the pattern matches: literal (exact, case sensitive) or
	// regexp (Go regular expression, unanchored).
	// +optional
	// +kubebuilder:validation:Enum=literal;regexp
	// +kubebuilder:default=literal
	Type MatchTransformPatternType `json:"type,omitempty"`

	// Literal matches the input exactly. Required when type is literal.
	// +optional
	Literal *string `json:"literal,omitempty"`

	// Regexp is matched against the input. Required when type is regexp.
	// +optional
	Regexp *string `json:"regexp,omitempty"`

	// Result is the output of the transform when the pattern matches.
	Result extv1.JSON `json:"result"`
}

// GetType returns the pattern type, defaulting to literal.
func (p *MatchTransformPattern) GetType() MatchTransformPatternType {
	if p.Type == "" {
		return MatchTransformPatternTypeLiteral
	}
	return p.Type
}

// A StringTransformType is the operation of a string transform.
type StringTransformType string

// String transform types.
const (
	// StringTransformTypeFormat formats the input. The default.
	StringTransformTypeFormat StringTransformType = "Format"
	// StringTransformTypeConvert converts the input (case, encodings, hashes).
	StringTransformTypeConvert StringTransformType = "Convert"
	// StringTransformTypeTrimPrefix removes a prefix.
	StringTransformTypeTrimPrefix StringTransformType = "TrimPrefix"
	// StringTransformTypeTrimSuffix removes a suffix.
	StringTransformTypeTrimSuffix StringTransformType = "TrimSuffix"
	// StringTransformTypeRegexp extracts a match of a regular expression.
	StringTransformTypeRegexp StringTransformType = "Regexp"
	// StringTransformTypeJoin joins an array into a string.
	StringTransformTypeJoin StringTransformType = "Join"
	// StringTransformTypeReplace replaces every occurrence of a string.
	StringTransformTypeReplace StringTransformType = "Replace"
)

// A StringConversionType is a conversion of a string Convert transform.
type StringConversionType string

// String conversions.
const (
	StringConversionTypeToUpper    StringConversionType = "ToUpper"
	StringConversionTypeToLower    StringConversionType = "ToLower"
	StringConversionTypeToJSON     StringConversionType = "ToJson"
	StringConversionTypeToBase64   StringConversionType = "ToBase64"
	StringConversionTypeFromBase64 StringConversionType = "FromBase64"
	StringConversionTypeToSHA1     StringConversionType = "ToSha1"
	StringConversionTypeToSHA256   StringConversionType = "ToSha256"
	StringConversionTypeToSHA512   StringConversionType = "ToSha512"
	StringConversionTypeToAdler32  StringConversionType = "ToAdler32"
)

// A StringTransform returns a string given its input. The input need not be a
// string; it is formatted with %v where the operation needs a string.
type StringTransform struct {
	// Type of the string transform.
	// +optional
	// +kubebuilder:validation:Enum=Format;Convert;TrimPrefix;TrimSuffix;Regexp;Join;Replace
	// +kubebuilder:default=Format
	Type StringTransformType `json:"type,omitempty"`

	// Format the input using a Go format string (see
	// https://golang.org/pkg/fmt/). Required when type is Format.
	// +optional
	Format *string `json:"fmt,omitempty"`

	// Convert is the conversion to apply. ToUpper and ToLower change case;
	// ToBase64 and FromBase64 encode and decode standard base64; ToJson
	// encodes the input as JSON; ToSha1, ToSha256 and ToSha512 return the hex
	// hash of the input (of its JSON encoding unless it is a string);
	// ToAdler32 returns its Adler-32 checksum in decimal. Required when type
	// is Convert.
	// +optional
	// +kubebuilder:validation:Enum=ToUpper;ToLower;ToBase64;FromBase64;ToJson;ToSha1;ToSha256;ToSha512;ToAdler32
	Convert *StringConversionType `json:"convert,omitempty"`

	// Trim is the prefix or suffix to remove. Required when type is
	// TrimPrefix or TrimSuffix.
	// +optional
	Trim *string `json:"trim,omitempty"`

	// Regexp extracts a match from the input. Required when type is Regexp.
	// +optional
	Regexp *StringTransformRegexp `json:"regexp,omitempty"`

	// Join joins an array input into a string. Required when type is Join.
	// +optional
	Join *StringTransformJoin `json:"join,omitempty"`

	// Replace replaces every occurrence of a string. Required when type is
	// Replace.
	// +optional
	Replace *StringTransformReplace `json:"replace,omitempty"`
}

// GetType returns the string transform type, defaulting to Format.
func (s *StringTransform) GetType() StringTransformType {
	if s.Type == "" {
		return StringTransformTypeFormat
	}
	return s.Type
}

// A StringTransformRegexp extracts a match from the input.
type StringTransformRegexp struct {
	// Match is a Go regular expression, optionally with capture groups.
	Match string `json:"match"`

	// Group number to return; 0 (the default) is the whole match.
	// +optional
	Group *int `json:"group,omitempty"`
}

// A StringTransformJoin joins the elements of an array input.
type StringTransformJoin struct {
	// Separator between the joined elements.
	Separator string `json:"separator"`
}

// A StringTransformReplace replaces every occurrence of Search with Replace.
type StringTransformReplace struct {
	// Search is the string to replace. It must not be empty.
	Search string `json:"search"`

	// Replace is the replacement; empty removes every occurrence.
	// +optional
	Replace string `json:"replace"`
}

// A TransformIOType is the type of a convert transform's input or output.
type TransformIOType string

// Transform input and output types.
const (
	TransformIOTypeString  TransformIOType = "string"
	TransformIOTypeBool    TransformIOType = "bool"
	TransformIOTypeInt     TransformIOType = "int"
	TransformIOTypeInt64   TransformIOType = "int64"
	TransformIOTypeFloat64 TransformIOType = "float64"
	TransformIOTypeObject  TransformIOType = "object"
	TransformIOTypeArray   TransformIOType = "array"
)

// A ConvertTransformFormat is the expected format of a convert transform's
// input.
type ConvertTransformFormat string

// Convert formats.
const (
	// ConvertTransformFormatNone applies the default conversion.
	ConvertTransformFormatNone ConvertTransformFormat = "none"
	// ConvertTransformFormatQuantity parses a string as a Kubernetes
	// resource.Quantity; only for string to float64.
	ConvertTransformFormatQuantity ConvertTransformFormat = "quantity"
	// ConvertTransformFormatJSON parses a string as JSON; only for string to
	// object or array.
	ConvertTransformFormatJSON ConvertTransformFormat = "json"
)

// A ConvertTransform converts its input into a value of type ToType.
type ConvertTransform struct {
	// ToType is the type of the output of this transform.
	// +kubebuilder:validation:Enum=string;int;int64;bool;float64;object;array
	ToType TransformIOType `json:"toType"`

	// Format is the expected format of the input: none (the default),
	// quantity (string to float64 only) or json (string to object or array
	// only).
	// +optional
	// +kubebuilder:validation:Enum=none;quantity;json
	Format *ConvertTransformFormat `json:"format,omitempty"`
}

// GetFormat returns the format, defaulting to none.
func (c *ConvertTransform) GetFormat() ConvertTransformFormat {
	if c.Format == nil || *c.Format == "" {
		return ConvertTransformFormatNone
	}
	return *c.Format
}
