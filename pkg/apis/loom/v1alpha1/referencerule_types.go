package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loomxr/loom/pkg/apis/common"
)

// A KindReference names a kind of resource.
type KindReference struct {
	// APIVersion of the kind, for example `nop.crossplane.io/v1alpha1`.
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`

	// Kind, for example `NopResource`.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// A ReferenceShape says how a reference field names its target.
// +kubebuilder:validation:Enum=Name;From
type ReferenceShape string

// Reference shapes.
const (
	// ReferenceShapeName references are objects `{name: <target>}`, the
	// crossplane-runtime shape (for example `networkRef: {name: net}`); they
	// may carry a `policy`.
	ReferenceShapeName ReferenceShape = "Name"

	// ReferenceShapeFrom references are objects `{from: {name: <target>}}`,
	// the shape of the AWS Controllers for Kubernetes (for example
	// `vpcRef: {from: {name: vpc}}`).
	ReferenceShapeFrom ReferenceShape = "From"
)

// A ResolvePolicy says when a reference is resolved.
// +kubebuilder:validation:Enum=IfNotPresent;Always
type ResolvePolicy string

// Resolve policies, as in crossplane-runtime.
const (
	// ResolvePolicyIfNotPresent resolves a reference (or selector) only while
	// the field it sets is empty; once set it is left alone.
	ResolvePolicyIfNotPresent ResolvePolicy = "IfNotPresent"

	// ResolvePolicyAlways resolves the reference (or selector) every time the
	// composed resource or its target changes, and rewrites the field when
	// the result differs.
	ResolvePolicyAlways ResolvePolicy = "Always"
)

// A ResolutionPolicy says whether a reference must resolve.
// +kubebuilder:validation:Enum=Required;Optional
type ResolutionPolicy string

// Resolution policies, as in crossplane-runtime.
const (
	// ResolutionPolicyRequired references that cannot be resolved are
	// reported on the composite resource's conditions and retried when a
	// possible target changes.
	ResolutionPolicyRequired ResolutionPolicy = "Required"

	// ResolutionPolicyOptional references that cannot be resolved are skipped
	// without an error; the value field stays unset.
	ResolutionPolicyOptional ResolutionPolicy = "Optional"
)

// A ReferencePolicy says when and whether a reference is resolved.
type ReferencePolicy struct {
	// Resolve says when to resolve: IfNotPresent (the default) or Always.
	// +optional
	Resolve *ResolvePolicy `json:"resolve,omitempty"`

	// Resolution says whether resolution must succeed: Required (the default)
	// or Optional.
	// +optional
	Resolution *ResolutionPolicy `json:"resolution,omitempty"`
}

// A WaitFor says what a target must show before a value is copied from it.
type WaitFor struct {
	// ConditionType is a condition type (for example `Ready`) that must be
	// True on the target before its field is copied.
	// +kubebuilder:validation:MinLength=1
	ConditionType string `json:"conditionType"`
}

// A Reference describes one reference of a composed kind: a value field, the
// reference field that names the resource the value comes from, and an
// optional selector field that picks that resource.
//
// Resolution, per composed resource of the rule's kind:
//  1. Selector: when the selector field is set and the reference field is empty
//     (or resolve is Always), the binder lists resources of the target kind;
//     with matchControllerRef only those controlled by the same composite
//     resource, with matchLabels only those carrying all the labels. Among
//     several matches the choice is deterministic (the lexically smallest
//     name; all of them, sorted, when list is true). The chosen name is
//     written to the reference field.
//  2. Reference: when the reference field names a target, the binder waits
//     until the target exists, shows waitFor's condition as True (if set),
//     and has a value at fromFieldPath; then it writes that value to the
//     value field.
//
// Setting both the value field and its reference (or selector) on a composed
// resource is an error. Unresolved required references show on the composite
// resource's conditions naming the composed resource, the field and what it
// waits for, and are retried when a possible target changes, never by polling.
// The binder writes only the value and reference fields, with server-side
// apply under field manager loom-binder, so it never undoes the renderer.
type Reference struct {
	// ValueField is the field path of the value this reference resolves, in
	// the upstream field-path syntax, for example
	// `spec.forProvider.networkId` (or `spec.forProvider.subnetIds` when list
	// is true).
	// +kubebuilder:validation:MinLength=1
	ValueField string `json:"valueField"`

	// ReferenceField is the field path of the reference that names the
	// target, for example `spec.forProvider.networkRef` (or
	// `spec.forProvider.subnetRefs` when list is true). Its shape is given by
	// referenceShape.
	// +kubebuilder:validation:MinLength=1
	ReferenceField string `json:"referenceField"`

	// ReferenceShape is the shape of the reference field's objects: Name
	// (`{name: x}`, the default) or From (`{from: {name: x}}`).
	// +optional
	// +kubebuilder:default=Name
	ReferenceShape ReferenceShape `json:"referenceShape,omitempty"`

	// SelectorField is the field path of a selector
	// `{matchLabels: {...}, matchControllerRef: bool, policy: {...}}` that
	// picks the target and writes its name to the reference field, for
	// example `spec.forProvider.networkSelector`. Optional; without it only
	// explicit references resolve.
	// +optional
	SelectorField string `json:"selectorField,omitempty"`

	// List makes this reference list-valued: the reference field holds a list
	// of references, the selector picks every match, and the value field gets
	// the list of the targets' values, in the order of the references. A list
	// resolves only when every reference in it resolves.
	// +optional
	List bool `json:"list,omitempty"`

	// Target is the kind of the referenced resources. Namespaced targets are
	// looked up in the composed resource's namespace.
	Target KindReference `json:"target"`

	// FromFieldPath is the field path of the target whose value is copied to
	// the value field, for example `status.atProvider.id` or `metadata.name`.
	// +kubebuilder:validation:MinLength=1
	FromFieldPath string `json:"fromFieldPath"`

	// WaitFor says what the target must show before its field is copied. When
	// unset the value is copied as soon as fromFieldPath is present.
	// +optional
	WaitFor *WaitFor `json:"waitFor,omitempty"`

	// Policy is the default policy of this reference, used when the composed
	// resource's reference or selector carries no policy of its own.
	// Defaults: resolve IfNotPresent, resolution Required.
	// +optional
	Policy *ReferencePolicy `json:"policy,omitempty"`
}

// ReferenceRuleSpec lists the references of one composed kind.
type ReferenceRuleSpec struct {
	// For is the composed kind whose references this rule resolves. Only
	// resources of this kind that a composite resource controls are resolved.
	For KindReference `json:"for"`

	// References of the kind, keyed by value field.
	// +listType=map
	// +listMapKey=valueField
	// +kubebuilder:validation:MinItems=1
	References []Reference `json:"references"`
}

// ReferenceRuleStatus is the observed state of a ReferenceRule.
type ReferenceRuleStatus struct {
	common.ConditionedStatus `json:",inline"`
}

// A ReferenceRule tells Loom's binder how resources of one composed kind
// refer to each other: which fields hold values, which hold references or
// selectors that name where the values come from, and what a target must show
// before its value is copied. It replaces the per-kind resolver code of
// Crossplane providers with configuration, so references resolve for any kind.
// At most one rule should exist per kind; rules for the same kind are merged,
// and the same value field in two rules is an error.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="API-VERSION",type="string",JSONPath=".spec.for.apiVersion"
// +kubebuilder:printcolumn:name="KIND",type="string",JSONPath=".spec.for.kind"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Cluster,categories=loom,shortName=refrule
type ReferenceRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ReferenceRuleSpec   `json:"spec"`
	Status ReferenceRuleStatus `json:"status,omitempty"`
}

// ReferenceRuleList contains a list of ReferenceRules.
//
// +kubebuilder:object:root=true
type ReferenceRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReferenceRule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ReferenceRule{}, &ReferenceRuleList{})
}
