package object

import "k8s.io/apimachinery/pkg/runtime/schema"

// Groups of the kinds the watcher always watches.
const (
	GroupCrossplane    = "apiextensions.crossplane.io"
	GroupLoom          = "loom.dev"
	GroupAPIExtensions = "apiextensions.k8s.io"
)

// Kinds the watcher always watches (once their CRDs are served).
var (
	KindCRD         = schema.GroupVersionKind{Group: GroupAPIExtensions, Version: "v1", Kind: "CustomResourceDefinition"}
	KindXRD         = schema.GroupVersionKind{Group: GroupCrossplane, Version: "v1", Kind: "CompositeResourceDefinition"}
	KindComposition = schema.GroupVersionKind{Group: GroupCrossplane, Version: "v1", Kind: "Composition"}
	KindRevision    = schema.GroupVersionKind{Group: GroupCrossplane, Version: "v1", Kind: "CompositionRevision"}
	// KindEnvironmentConfig is watched at the first of EnvironmentConfigVersions
	// that its CRD serves.
	KindEnvironmentConfig = schema.GroupKind{Group: GroupCrossplane, Kind: "EnvironmentConfig"}
	KindReferenceRule     = schema.GroupVersionKind{Group: GroupLoom, Version: "v1alpha1", Kind: "ReferenceRule"}
	KindFunction          = schema.GroupVersionKind{Group: GroupLoom, Version: "v1alpha1", Kind: "Function"}
)

// EnvironmentConfigVersions are the versions of EnvironmentConfig the watcher
// can watch, most preferred first.
var EnvironmentConfigVersions = []string{"v1beta1", "v1alpha1"} //nolint:gochecknoglobals // Treated as a constant.
