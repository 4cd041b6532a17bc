// Package v1alpha1 holds Go types for Crossplane's apiextensions.crossplane.io/v1alpha1
// API: EnvironmentConfig, still served by Crossplane v1.20 next to v1beta1 and
// identical to it, so older manifests apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=apiextensions.crossplane.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group is the API group of Crossplane's composition API.
const Group = "apiextensions.crossplane.io"

var (
	// SchemeGroupVersion is the group and version of the types in this package.
	SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
