package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loomxr/loom/pkg/apis/common"
)

// Labels of a CompositionRevision.
const (
	// LabelCompositionName is the name of the Composition a revision was
	// created from.
	LabelCompositionName = "crossplane.io/composition-name"

	// LabelCompositionHash is the hash of the Composition's labels,
	// annotations and spec that a revision was created from (at most 63
	// characters). Identical revisions have identical hashes.
	LabelCompositionHash = "crossplane.io/composition-hash"
)

// CompositionRevisionSpec is a snapshot of a Composition's spec with a
// revision number.
type CompositionRevisionSpec struct {
	CompositionSpec `json:",inline"`

	// Revision number. Newer revisions have larger numbers. The number of a
	// revision can change: when a Composition goes from state A to B and back
	// to A, the revision of A is bumped to the latest number instead of a
	// third revision being created.
	Revision int64 `json:"revision"`
}

// CompositionRevisionStatus is the observed state of a CompositionRevision.
type CompositionRevisionStatus struct {
	common.ConditionedStatus `json:",inline"`
}

// A CompositionRevision is an immutable, numbered snapshot of a Composition.
// Loom creates one whenever a Composition changes; users should not edit
// them.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="REVISION",type="string",JSONPath=".spec.revision"
// +kubebuilder:printcolumn:name="XR-KIND",type="string",JSONPath=".spec.compositeTypeRef.kind"
// +kubebuilder:printcolumn:name="XR-APIVERSION",type="string",JSONPath=".spec.compositeTypeRef.apiVersion"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Cluster,categories=crossplane,shortName=comprev
// +kubebuilder:subresource:status
type CompositionRevision struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CompositionRevisionSpec   `json:"spec,omitempty"`
	Status CompositionRevisionStatus `json:"status,omitempty"`
}

// CompositionRevisionList contains a list of CompositionRevisions.
//
// +kubebuilder:object:root=true
type CompositionRevisionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CompositionRevision `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CompositionRevision{}, &CompositionRevisionList{})
}
