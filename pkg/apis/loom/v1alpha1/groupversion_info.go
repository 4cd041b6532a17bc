// Package v1alpha1 holds Loom's own API types in the loom.dev group: additions
// that Crossplane does not have (reference rules for the binder, Function
// endpoints). They never change the meaning of a Crossplane field.
//
// +kubebuilder:object:generate=true
// +groupName=loom.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group is Loom's API group.
const Group = "loom.dev"

var (
	// SchemeGroupVersion is the group and version of the types in this package.
	SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
