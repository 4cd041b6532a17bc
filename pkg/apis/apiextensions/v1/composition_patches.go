package v1

// A PatchType is a type of patch.
type PatchType string

// Patch types. Sources are observed state and destinations desired state; see
// each type for its direction within a resource template. Within
// environment.patches the "composed resource" is the environment.
const (
	// PatchTypeFromCompositeFieldPath copies a field of the composite
	// resource to the composed resource. It is the default.
	PatchTypeFromCompositeFieldPath PatchType = "FromCompositeFieldPath"

	// PatchTypeToCompositeFieldPath copies a field of the composed resource
	// to the composite resource.
	PatchTypeToCompositeFieldPath PatchType = "ToCompositeFieldPath"

	// PatchTypeCombineFromComposite combines fields of the composite resource
	// into one field of the composed resource.
	PatchTypeCombineFromComposite PatchType = "CombineFromComposite"

	// PatchTypeCombineToComposite combines fields of the composed resource
	// into one field of the composite resource.
	PatchTypeCombineToComposite PatchType = "CombineToComposite"

	// PatchTypeFromEnvironmentFieldPath copies a field of the environment to
	// the composed resource (to the composite resource in
	// environment.patches).
	PatchTypeFromEnvironmentFieldPath PatchType = "FromEnvironmentFieldPath"

	// PatchTypeToEnvironmentFieldPath copies a field of the composed resource
	// (of the composite resource in environment.patches) to the environment.
	PatchTypeToEnvironmentFieldPath PatchType = "ToEnvironmentFieldPath"

	// PatchTypeCombineFromEnvironment combines fields of the environment into
	// one field of the composed resource.
	PatchTypeCombineFromEnvironment PatchType = "CombineFromEnvironment"

	// PatchTypeCombineToEnvironment combines fields of the composed resource
	// into one field of the environment.
	PatchTypeCombineToEnvironment PatchType = "CombineToEnvironment"

	// PatchTypePatchSet includes the patches of the named PatchSet in place.
	PatchTypePatchSet PatchType = "PatchSet"
)

// A Patch copies a value from a source to a destination, optionally through
// transforms. Its behaviour depends on its Type; the default Type,
// FromCompositeFieldPath, copies a field of the composite resource to the
// composed resource.
type Patch struct {
	// Type sets the patching behaviour to be used. Each patch type may
	// require its own fields to be set on the Patch object.
	// +optional
	// +kubebuilder:validation:Enum=FromCompositeFieldPath;FromEnvironmentFieldPath;PatchSet;ToCompositeFieldPath;ToEnvironmentFieldPath;CombineFromEnvironment;CombineFromComposite;CombineToComposite;CombineToEnvironment
	// +kubebuilder:default=FromCompositeFieldPath
	Type PatchType `json:"type,omitempty"`

	// FromFieldPath is the path of the field on the source whose value is to
	// be used as input. Required by the From*FieldPath and To*FieldPath
	// types.
	// +optional
	FromFieldPath *string `json:"fromFieldPath,omitempty"`

	// Combine is the configuration of the Combine* patch types.
	// +optional
	Combine *Combine `json:"combine,omitempty"`

	// ToFieldPath is the path of the field on the destination that receives
	// the value. Defaults to FromFieldPath. Required by the Combine* types.
	// A wildcard segment ([*] or .*) expands to every existing element.
	// +optional
	ToFieldPath *string `json:"toFieldPath,omitempty"`

	// PatchSetName names the PatchSet to include. Required when type is
	// PatchSet.
	// +optional
	PatchSetName *string `json:"patchSetName,omitempty"`

	// Transforms are applied in order to the input value.
	// +optional
	Transforms []Transform `json:"transforms,omitempty"`

	// Policy configures the specifics of patching behaviour.
	// +optional
	Policy *PatchPolicy `json:"policy,omitempty"`
}

// GetType returns the patch type, defaulting to FromCompositeFieldPath.
func (p *Patch) GetType() PatchType {
	if p.Type == "" {
		return PatchTypeFromCompositeFieldPath
	}
	return p.Type
}

// GetFromFieldPath returns the FromFieldPath, or "" if it is unset.
func (p *Patch) GetFromFieldPath() string {
	if p.FromFieldPath == nil {
		return ""
	}
	return *p.FromFieldPath
}

// GetToFieldPath returns the ToFieldPath, defaulting to FromFieldPath.
func (p *Patch) GetToFieldPath() string {
	if p.ToFieldPath == nil {
		return p.GetFromFieldPath()
	}
	return *p.ToFieldPath
}

// A FromFieldPathPolicy says what happens when a patch's source field does
// not exist.
type FromFieldPathPolicy string

// FromFieldPath policies.
const (
	// FromFieldPathPolicyOptional skips the patch when its source field does
	// not exist. It is the default.
	FromFieldPathPolicyOptional FromFieldPathPolicy = "Optional"

	// FromFieldPathPolicyRequired holds back a composed resource that does not
	// exist yet until the source field exists.
	FromFieldPathPolicyRequired FromFieldPathPolicy = "Required"
)

// A ToFieldPathPolicy says how a patch writes its value to the destination,
// using the names of function-patch-and-transform's policy.toFieldPath. A Loom
// addition; Crossplane v1 uses MergeOptions instead.
type ToFieldPathPolicy string

// ToFieldPath policies.
const (
	// ToFieldPathPolicyReplace replaces the destination value. The default.
	ToFieldPathPolicyReplace ToFieldPathPolicy = "Replace"

	// ToFieldPathPolicyMergeObjects merges objects, keeping existing values.
	ToFieldPathPolicyMergeObjects ToFieldPathPolicy = "MergeObjects"

	// ToFieldPathPolicyMergeObjectsAppendArrays merges objects, keeping
	// existing values, and appends arrays.
	ToFieldPathPolicyMergeObjectsAppendArrays ToFieldPathPolicy = "MergeObjectsAppendArrays"

	// ToFieldPathPolicyForceMergeObjects merges objects, overwriting existing
	// values.
	ToFieldPathPolicyForceMergeObjects ToFieldPathPolicy = "ForceMergeObjects"

	// ToFieldPathPolicyForceMergeObjectsAppendArrays merges objects,
	// overwriting existing values, and appends arrays.
	ToFieldPathPolicyForceMergeObjectsAppendArrays ToFieldPathPolicy = "ForceMergeObjectsAppendArrays"

	// ToFieldPathPolicyMergeObject is a deprecated name of MergeObjects.
	ToFieldPathPolicyMergeObject ToFieldPathPolicy = "MergeObject"

	// ToFieldPathPolicyAppendArray is a deprecated name of
	// ForceMergeObjectsAppendArrays.
	ToFieldPathPolicyAppendArray ToFieldPathPolicy = "AppendArray"
)

// MergeOptions say how a value is merged into an existing one.
type MergeOptions struct {
	// KeepMapValues keeps values that already exist in a merged object.
	// +optional
	KeepMapValues *bool `json:"keepMapValues,omitempty"`

	// AppendSlice appends to an existing array instead of replacing it,
	// skipping elements it already holds.
	// +optional
	AppendSlice *bool `json:"appendSlice,omitempty"`
}

// IsKeepMapValues reports whether existing object values are kept.
func (m *MergeOptions) IsKeepMapValues() bool {
	return m != nil && m.KeepMapValues != nil && *m.KeepMapValues
}

// IsAppendSlice reports whether arrays are appended.
func (m *MergeOptions) IsAppendSlice() bool {
	return m != nil && m.AppendSlice != nil && *m.AppendSlice
}

// A PatchPolicy configures the specifics of patching behaviour.
type PatchPolicy struct {
	// FromFieldPath specifies how to patch from a field path. The default is
	// Optional: the patch is skipped if the source field does not exist.
	// Required holds back a composed resource that does not exist yet.
	// +optional
	// +kubebuilder:validation:Enum=Optional;Required
	FromFieldPath *FromFieldPathPolicy `json:"fromFieldPath,omitempty"`

	// MergeOptions merge the patched value into the existing destination
	// value instead of replacing it (Crossplane v1's native policy).
	// +optional
	MergeOptions *MergeOptions `json:"mergeOptions,omitempty"`

	// ToFieldPath is function-patch-and-transform's name for the merge
	// behaviour. A Loom addition; set either this or MergeOptions.
	// +optional
	// +kubebuilder:validation:Enum=Replace;MergeObjects;MergeObjectsAppendArrays;ForceMergeObjects;ForceMergeObjectsAppendArrays;MergeObject;AppendArray
	ToFieldPath *ToFieldPathPolicy `json:"toFieldPath,omitempty"`
}

// GetFromFieldPathPolicy returns the FromFieldPath policy, defaulting to
// Optional. It is safe to call on a nil PatchPolicy.
func (pp *PatchPolicy) GetFromFieldPathPolicy() FromFieldPathPolicy {
	if pp == nil || pp.FromFieldPath == nil {
		return FromFieldPathPolicyOptional
	}
	return *pp.FromFieldPath
}

// A CombineStrategy says how combined variables become one value.
type CombineStrategy string

// Combine strategies.
const (
	// CombineStrategyString formats the variables with a Go format string.
	CombineStrategyString CombineStrategy = "string"
)

// A Combine combines several source fields into one value.
type Combine struct {
	// Variables are the source fields whose values are combined, in order.
	// +kubebuilder:validation:MinItems=1
	Variables []CombineVariable `json:"variables"`

	// Strategy used to combine the variables. Only string is supported.
	// +kubebuilder:validation:Enum=string
	Strategy CombineStrategy `json:"strategy"`

	// String configures the string strategy.
	// +optional
	String *StringCombine `json:"string,omitempty"`
}

// A CombineVariable is one input of a Combine.
type CombineVariable struct {
	// FromFieldPath is the path of the source field.
	FromFieldPath string `json:"fromFieldPath"`
}

// A StringCombine formats the combined variables into a string.
type StringCombine struct {
	// Format is a Go format string (see https://golang.org/pkg/fmt/) with one
	// verb per variable.
	Format string `json:"fmt"`
}
