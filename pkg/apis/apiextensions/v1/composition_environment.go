package v1

import (
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// An EnvironmentConfiguration specifies the in-memory environment in which a
// composite resource's templates are rendered: the data of selected
// EnvironmentConfigs merged over DefaultData, then changed by Patches.
type EnvironmentConfiguration struct {
	// DefaultData is the initial state of the environment, with the same
	// free-form structure as the data of an EnvironmentConfig. Selected
	// EnvironmentConfigs are merged over it.
	// +optional
	DefaultData map[string]extv1.JSON `json:"defaultData,omitempty"`

	// EnvironmentConfigs selects EnvironmentConfigs. Their data is merged in
	// the order listed, so later entries win over earlier ones. Templates read
	// the result with FromEnvironmentFieldPath and CombineFromEnvironment
	// patches.
	// +optional
	EnvironmentConfigs []EnvironmentSource `json:"environmentConfigs,omitempty"`

	// Patches between the composite resource and the environment, applied
	// before any resource template is rendered.
	// +optional
	Patches []EnvironmentPatch `json:"patches,omitempty"`

	// Policy applies to every entry of EnvironmentConfigs.
	// +optional
	Policy *EnvironmentPolicy `json:"policy,omitempty"`
}

// IsOptional reports whether EnvironmentConfigs that cannot be found are
// skipped (resolution policy Optional) rather than an error. Safe on nil.
func (e *EnvironmentConfiguration) IsOptional() bool {
	return e != nil && e.Policy != nil && e.Policy.Resolution != nil && *e.Policy.Resolution == ResolutionPolicyOptional
}

// ResolveAlways reports whether EnvironmentConfigs are selected on every
// render (resolve policy Always), rather than kept once a composite resource
// records them in spec.environmentConfigRefs (IfNotPresent, the default).
// Safe on nil.
func (e *EnvironmentConfiguration) ResolveAlways() bool {
	return e != nil && e.Policy != nil && e.Policy.Resolve != nil && *e.Policy.Resolve == ResolvePolicyAlways
}

// A ResolvePolicy says when selected EnvironmentConfigs are resolved again.
type ResolvePolicy string

// Resolve policies.
const (
	// ResolvePolicyAlways resolves on every render.
	ResolvePolicyAlways ResolvePolicy = "Always"
	// ResolvePolicyIfNotPresent resolves only when nothing is resolved yet.
	ResolvePolicyIfNotPresent ResolvePolicy = "IfNotPresent"
)

// A ResolutionPolicy says whether resolution must succeed.
type ResolutionPolicy string

// Resolution policies.
const (
	// ResolutionPolicyRequired fails when a selected EnvironmentConfig cannot
	// be found. The default.
	ResolutionPolicyRequired ResolutionPolicy = "Required"
	// ResolutionPolicyOptional skips what cannot be found.
	ResolutionPolicyOptional ResolutionPolicy = "Optional"
)

// An EnvironmentPolicy configures how EnvironmentConfigs are resolved.
type EnvironmentPolicy struct {
	// Resolve says when to select EnvironmentConfigs again. IfNotPresent
	// (the default) selects them while the composite resource records none
	// in spec.environmentConfigRefs, and then keeps those; Always selects
	// them on every render.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent
	Resolve *ResolvePolicy `json:"resolve,omitempty"`

	// Resolution says whether a missing EnvironmentConfig is an error.
	// +optional
	// +kubebuilder:default=Required
	// +kubebuilder:validation:Enum=Required;Optional
	Resolution *ResolutionPolicy `json:"resolution,omitempty"`
}

// An EnvironmentSourceType says how an EnvironmentConfig is selected.
type EnvironmentSourceType string

// Environment source types.
const (
	// EnvironmentSourceTypeReference selects one EnvironmentConfig by name.
	EnvironmentSourceTypeReference EnvironmentSourceType = "Reference"
	// EnvironmentSourceTypeSelector selects EnvironmentConfigs by labels.
	EnvironmentSourceTypeSelector EnvironmentSourceType = "Selector"
)

// An EnvironmentSource selects EnvironmentConfigs.
type EnvironmentSource struct {
	// Type says how the EnvironmentConfig is selected.
	// +optional
	// +kubebuilder:validation:Enum=Reference;Selector
	// +kubebuilder:default=Reference
	Type EnvironmentSourceType `json:"type,omitempty"`

	// Ref names a single EnvironmentConfig. Required when type is Reference.
	// +optional
	Ref *EnvironmentSourceReference `json:"ref,omitempty"`

	// Selector selects EnvironmentConfigs by labels. Required when type is
	// Selector.
	// +optional
	Selector *EnvironmentSourceSelector `json:"selector,omitempty"`
}

// GetType returns the source type, defaulting to Reference.
func (e *EnvironmentSource) GetType() EnvironmentSourceType {
	if e.Type == "" {
		return EnvironmentSourceTypeReference
	}
	return e.Type
}

// An EnvironmentSourceReference names an EnvironmentConfig.
type EnvironmentSourceReference struct {
	// Name of the EnvironmentConfig.
	Name string `json:"name"`
}

// An EnvironmentSourceSelectorModeType says how many EnvironmentConfigs a
// selector selects.
type EnvironmentSourceSelectorModeType string

// Selector modes.
const (
	// EnvironmentSourceSelectorSingleMode selects exactly one
	// EnvironmentConfig.
	EnvironmentSourceSelectorSingleMode EnvironmentSourceSelectorModeType = "Single"
	// EnvironmentSourceSelectorMultiMode selects every matching
	// EnvironmentConfig, sorted by SortByFieldPath, up to MaxMatch.
	EnvironmentSourceSelectorMultiMode EnvironmentSourceSelectorModeType = "Multiple"
)

// An EnvironmentSourceSelector selects EnvironmentConfigs by labels.
type EnvironmentSourceSelector struct {
	// Mode says whether one (Single) or several (Multiple) EnvironmentConfigs
	// are selected.
	// +optional
	// +kubebuilder:validation:Enum=Single;Multiple
	// +kubebuilder:default=Single
	Mode EnvironmentSourceSelectorModeType `json:"mode,omitempty"`

	// MaxMatch is the largest number of EnvironmentConfigs selected in
	// Multiple mode; all if unset.
	// +optional
	MaxMatch *uint64 `json:"maxMatch,omitempty"`

	// MinMatch is the smallest number of EnvironmentConfigs that must match
	// in Multiple mode.
	// +optional
	MinMatch *uint64 `json:"minMatch,omitempty"`

	// SortByFieldPath is the path of the field by which matching
	// EnvironmentConfigs are sorted in Multiple mode.
	// +optional
	// +kubebuilder:default="metadata.name"
	SortByFieldPath string `json:"sortByFieldPath,omitempty"`

	// MatchLabels are the labels an EnvironmentConfig must have.
	// +optional
	MatchLabels []EnvironmentSourceSelectorLabelMatcher `json:"matchLabels,omitempty"`
}

// GetMode returns the selector mode, defaulting to Single.
func (e *EnvironmentSourceSelector) GetMode() EnvironmentSourceSelectorModeType {
	if e.Mode == "" {
		return EnvironmentSourceSelectorSingleMode
	}
	return e.Mode
}

// GetSortByFieldPath returns the sort field path, defaulting to
// metadata.name.
func (e *EnvironmentSourceSelector) GetSortByFieldPath() string {
	if e.SortByFieldPath == "" {
		return "metadata.name"
	}
	return e.SortByFieldPath
}

// An EnvironmentSourceSelectorLabelMatcherType says where a label value comes
// from.
type EnvironmentSourceSelectorLabelMatcherType string

// Label matcher types.
const (
	// EnvironmentSourceSelectorLabelMatcherTypeFromCompositeFieldPath reads
	// the value from a field of the composite resource.
	EnvironmentSourceSelectorLabelMatcherTypeFromCompositeFieldPath EnvironmentSourceSelectorLabelMatcherType = "FromCompositeFieldPath"
	// EnvironmentSourceSelectorLabelMatcherTypeValue uses a literal value.
	EnvironmentSourceSelectorLabelMatcherTypeValue EnvironmentSourceSelectorLabelMatcherType = "Value"
)

// An EnvironmentSourceSelectorLabelMatcher is one label an EnvironmentConfig
// must have, with a literal value or one read from the composite resource.
type EnvironmentSourceSelectorLabelMatcher struct {
	// Type says where the label value comes from.
	// +optional
	// +kubebuilder:validation:Enum=FromCompositeFieldPath;Value
	// +kubebuilder:default=FromCompositeFieldPath
	Type EnvironmentSourceSelectorLabelMatcherType `json:"type,omitempty"`

	// Key of the label.
	Key string `json:"key"`

	// ValueFromFieldPath is the path of the composite resource's field that
	// holds the label value.
	// +optional
	ValueFromFieldPath *string `json:"valueFromFieldPath,omitempty"`

	// FromFieldPathPolicy says what happens when ValueFromFieldPath does not
	// exist: Required (the default) is an error, Optional drops this label
	// from the selector.
	// +optional
	// +kubebuilder:validation:Enum=Optional;Required
	// +kubebuilder:default=Required
	FromFieldPathPolicy *FromFieldPathPolicy `json:"fromFieldPathPolicy,omitempty"`

	// Value is a literal label value.
	// +optional
	Value *string `json:"value,omitempty"`
}

// GetType returns the matcher type, defaulting to FromCompositeFieldPath.
func (e *EnvironmentSourceSelectorLabelMatcher) GetType() EnvironmentSourceSelectorLabelMatcherType {
	if e.Type == "" {
		return EnvironmentSourceSelectorLabelMatcherTypeFromCompositeFieldPath
	}
	return e.Type
}

// FromFieldPathIsOptional reports whether a missing ValueFromFieldPath drops
// the label instead of failing.
func (e *EnvironmentSourceSelectorLabelMatcher) FromFieldPathIsOptional() bool {
	return e.FromFieldPathPolicy != nil && *e.FromFieldPathPolicy == FromFieldPathPolicyOptional
}

// An EnvironmentPatch is a patch between the composite resource and the
// environment.
type EnvironmentPatch struct {
	// Type sets the patching behaviour. FromCompositeFieldPath,
	// CombineFromComposite and ToEnvironmentFieldPath write the composite
	// resource's fields to the environment; ToCompositeFieldPath,
	// CombineToComposite and FromEnvironmentFieldPath write the environment's
	// fields to the composite resource.
	// +optional
	// +kubebuilder:validation:Enum=FromCompositeFieldPath;ToCompositeFieldPath;CombineFromComposite;CombineToComposite;FromEnvironmentFieldPath;ToEnvironmentFieldPath
	// +kubebuilder:default=FromCompositeFieldPath
	Type PatchType `json:"type,omitempty"`

	// FromFieldPath is the path of the source field.
	// +optional
	FromFieldPath *string `json:"fromFieldPath,omitempty"`

	// Combine is the configuration of the Combine* patch types.
	// +optional
	Combine *Combine `json:"combine,omitempty"`

	// ToFieldPath is the path of the destination field; defaults to
	// FromFieldPath.
	// +optional
	ToFieldPath *string `json:"toFieldPath,omitempty"`

	// Transforms are applied in order to the input value.
	// +optional
	Transforms []Transform `json:"transforms,omitempty"`

	// Policy configures the specifics of patching behaviour.
	// +optional
	Policy *PatchPolicy `json:"policy,omitempty"`
}

// ToPatch returns the environment patch as a Patch.
func (e *EnvironmentPatch) ToPatch() Patch {
	return Patch{
		Type:          e.Type,
		FromFieldPath: e.FromFieldPath,
		Combine:       e.Combine,
		ToFieldPath:   e.ToFieldPath,
		Transforms:    e.Transforms,
		Policy:        e.Policy,
	}
}
