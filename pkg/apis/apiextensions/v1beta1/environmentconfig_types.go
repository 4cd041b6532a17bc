package v1beta1

import (
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An EnvironmentConfig holds arbitrary, unstructured values that Compositions
// read: by reference or label selector, merged into a composite resource's
// in-memory environment, or fetched by functions as extra resources. It is
// cluster scoped and has no spec or status, only data.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Cluster,categories=crossplane,shortName=envcfg
type EnvironmentConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The data of this EnvironmentConfig. This may contain any kind of
	// structure that can be serialized into JSON.
	// +optional
	Data map[string]extv1.JSON `json:"data,omitempty"`
}

// EnvironmentConfigList contains a list of EnvironmentConfigs.
//
// +kubebuilder:object:root=true
type EnvironmentConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EnvironmentConfig `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EnvironmentConfig{}, &EnvironmentConfigList{})
}
