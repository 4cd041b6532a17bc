package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loomxr/loom/pkg/apis/common"
)

// A ResourceRef names a cluster-scoped resource.
type ResourceRef struct {
	// Name of the referent.
	Name string `json:"name"`
}

// A ResourceSelector selects a resource by labels and, optionally, by
// having the same controller as the Usage that selects it.
type ResourceSelector struct {
	// MatchLabels ensures an object with matching labels is selected.
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	// MatchControllerRef ensures an object with the same controller
	// reference as the selecting object is selected.
	MatchControllerRef *bool `json:"matchControllerRef,omitempty"`
}

// A Resource is a cluster-scoped resource a Usage is about: named by
// ResourceRef, or selected by ResourceSelector, which the Usage controller
// resolves into ResourceRef once.
type Resource struct {
	// API version of the referent.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind of the referent.
	// +optional
	Kind string `json:"kind,omitempty"`
	// Reference to the resource.
	// +optional
	ResourceRef *ResourceRef `json:"resourceRef,omitempty"`
	// Selector to the resource. Ignored if ResourceRef is set.
	// +optional
	ResourceSelector *ResourceSelector `json:"resourceSelector,omitempty"`
}

// UsageSpec says which resource is in use, and by what or why.
type UsageSpec struct {
	// Of is the resource that is "being used".
	// +kubebuilder:validation:XValidation:rule="has(self.resourceRef) || has(self.resourceSelector)",message="either a resource reference or a resource selector should be set."
	Of Resource `json:"of"`
	// By is the resource that is "using the other resource".
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.resourceRef) || has(self.resourceSelector)",message="either a resource reference or a resource selector should be set."
	By *Resource `json:"by,omitempty"`
	// Reason is the reason for blocking deletion of the resource.
	// +optional
	Reason *string `json:"reason,omitempty"`
	// ReplayDeletion will trigger a deletion on the used resource during
	// the deletion of the usage itself, if it was attempted to be deleted
	// at least once.
	// +optional
	ReplayDeletion *bool `json:"replayDeletion,omitempty"`
}

// UsageStatus is the observed state of a Usage.
type UsageStatus struct {
	common.ConditionedStatus `json:",inline"`
}

// A Usage blocks the deletion of a resource while it is in use by another
// resource, or for a reason: Crossplane's Usage, served as
// apiextensions.crossplane.io v1alpha1 (stored) and v1beta1, identical.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="DETAILS",type="string",JSONPath=".metadata.annotations.crossplane\\.io/usage-details"
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Cluster,categories=crossplane
// +kubebuilder:subresource:status
type Usage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="has(self.by) || has(self.reason)",message="either \"spec.by\" or \"spec.reason\" must be specified."
	Spec   UsageSpec   `json:"spec"`
	Status UsageStatus `json:"status,omitempty"`
}

// UsageList contains a list of Usages.
//
// +kubebuilder:object:root=true
type UsageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Usage `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Usage{}, &UsageList{})
}
