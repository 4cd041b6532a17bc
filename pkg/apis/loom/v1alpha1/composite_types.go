package v1alpha1

// Bounds of the Loom section of a composite resource's status. The generated
// composite resource CRDs enforce them (pkg/xcrd), so a writer that exceeds
// them has its status update rejected; writers truncate first.
const (
	// MaxResourceSummaries is the most composed resources listed in
	// status.loom.resources. A writer lists the ones holding the composite
	// resource back first and counts the rest in omittedResources.
	MaxResourceSummaries = 100

	// MaxSummaryMessageLength is the longest message of one summary.
	MaxSummaryMessageLength = 512
)

// CompositeStatus is the Loom section of a composite resource's status
// (`status.loom`), written by the renderer. It exists on the composite
// resource CRDs Loom generates, for every scope, and on claim CRDs, to which
// the binder copies it, so a user sees at a glance which composed resource
// holds a composite resource back. Crossplane ignores it.
type CompositeStatus struct {
	// Resources summarizes the composed resources, at most
	// MaxResourceSummaries of them, unready ones first, then sorted by
	// resourceName.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Resources []ComposedResourceSummary `json:"resources,omitempty"`

	// OmittedResources counts the composed resources left out of resources.
	// +optional
	OmittedResources int64 `json:"omittedResources,omitempty"`
}

// A ComposedResourceSummary is the state of one composed resource at a glance.
type ComposedResourceSummary struct {
	// ResourceName is the composed resource's name within its Composition
	// (annotation crossplane.io/composition-resource-name).
	ResourceName string `json:"resourceName"`

	// APIVersion of the composed resource.
	APIVersion string `json:"apiVersion"`

	// Kind of the composed resource.
	Kind string `json:"kind"`

	// Name of the composed resource.
	// +optional
	Name string `json:"name,omitempty"`

	// Namespace of the composed resource, for namespaced kinds.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Ready is True when the composed resource counts as ready for the
	// composite resource, False when it does not, Unknown when it could not
	// be observed.
	// +kubebuilder:validation:Enum=True;False;Unknown
	Ready string `json:"ready"`

	// Reason is a CamelCase word saying why it is (not) ready, for example
	// the reason of its Ready condition, or ReadinessCheckFailed.
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message says in a sentence what holds it back.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}

// A WatchedResourceRef names a resource a composition function asked Loom to
// watch for a composite resource. Loom records them in the composite
// resource's `status.watchedResourceRefs` and re-renders the composite
// resource when one of them changes. Only resources the step was allowed to
// request are recorded.
type WatchedResourceRef struct {
	// APIVersion of the watched resource.
	APIVersion string `json:"apiVersion"`

	// Kind of the watched resource.
	Kind string `json:"kind"`

	// Name of the watched resource.
	Name string `json:"name"`

	// Namespace of the watched resource, for namespaced kinds.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Step is the pipeline step that asked for the watch.
	// +optional
	Step string `json:"step,omitempty"`
}

// A ReclaimPolicy says what happens to a composite resource when its claim is
// deleted. It is a Loom addition (spec.reclaimPolicy on claims and on
// LegacyCluster composite resources); Crossplane ignores it, and unset means
// Delete, Crossplane's behaviour.
// +kubebuilder:validation:Enum=Delete;Retain
type ReclaimPolicy string

// Reclaim policies.
const (
	// ReclaimDelete deletes the composite resource (and so its composed
	// resources) with its claim, following the claim's compositeDeletePolicy.
	ReclaimDelete ReclaimPolicy = "Delete"

	// ReclaimRetain releases the composite resource when its claim is deleted:
	// it and its composed resources stay, its claimRef is cleared, its
	// conditions say it is released, and a new claim may bind it by
	// resourceRef.
	ReclaimRetain ReclaimPolicy = "Retain"
)
