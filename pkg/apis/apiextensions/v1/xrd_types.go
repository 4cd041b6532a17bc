package v1

import (
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loomxr/loom/pkg/apis/common"
)

// A CompositeResourceScope says whether the composite resources an XRD
// defines are namespaced or cluster scoped, and which schema they use.
type CompositeResourceScope string

// Composite resource scopes.
const (
	// CompositeResourceScopeLegacyCluster composite resources are cluster
	// scoped, keep Crossplane's machinery fields directly under spec, and may
	// be offered as namespaced claims. It is Crossplane v1's behaviour and the
	// default.
	CompositeResourceScopeLegacyCluster CompositeResourceScope = "LegacyCluster"

	// CompositeResourceScopeNamespaced composite resources live in a namespace,
	// keep their machinery fields under spec.crossplane, may compose only
	// namespaced resources in their own namespace, and offer no claims.
	CompositeResourceScopeNamespaced CompositeResourceScope = "Namespaced"

	// CompositeResourceScopeCluster composite resources are cluster scoped,
	// keep their machinery fields under spec.crossplane and offer no claims.
	CompositeResourceScopeCluster CompositeResourceScope = "Cluster"
)

// An UpdatePolicy says how a composite resource follows new revisions of its
// Composition.
// +kubebuilder:validation:Enum=Automatic;Manual
type UpdatePolicy string

// Update policies.
const (
	// UpdateAutomatic composite resources always use the latest matching
	// CompositionRevision.
	UpdateAutomatic UpdatePolicy = "Automatic"

	// UpdateManual composite resources keep the CompositionRevision they
	// reference until a user changes compositionRevisionRef.
	UpdateManual UpdatePolicy = "Manual"
)

// A CompositeDeletePolicy says how a claim deletes its composite resource.
// +kubebuilder:validation:Enum=Background;Foreground
type CompositeDeletePolicy string

// Composite delete policies.
const (
	// CompositeDeleteBackground deletes the composite resource and lets
	// Kubernetes garbage collection remove its composed resources afterwards;
	// the claim is gone at once.
	CompositeDeleteBackground CompositeDeletePolicy = "Background"

	// CompositeDeleteForeground deletes the composite resource with foreground
	// propagation; the claim stays until the composite resource and its
	// composed resources are gone.
	CompositeDeleteForeground CompositeDeletePolicy = "Foreground"
)

// CompositeResourceDefinitionSpec specifies the desired state of the definition.
// +kubebuilder:validation:XValidation:rule="!has(self.claimNames) || !has(self.scope) || self.scope == 'LegacyCluster'",message="claimNames are only supported when scope is LegacyCluster"
// +kubebuilder:validation:XValidation:rule="!has(self.connectionSecretKeys) || !has(self.scope) || self.scope == 'LegacyCluster'",message="connectionSecretKeys are only supported when scope is LegacyCluster"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.claimNames) || has(self.claimNames)",message="claimNames cannot be removed once set"
type CompositeResourceDefinitionSpec struct {
	// Group specifies the API group of the defined composite resource.
	// Composite resources are served under `/apis/<group>/...`. Must match the
	// name of the XRD (in the form `<names.plural>.<group>`).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	Group string `json:"group"`

	// Names specifies the resource and kind names of the defined composite
	// resource.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	// +kubebuilder:validation:XValidation:rule="self.plural == self.plural.lowerAscii()",message="Plural name must be lowercase"
	// +kubebuilder:validation:XValidation:rule="!has(self.singular) || self.singular == self.singular.lowerAscii()",message="Singular name must be lowercase"
	Names extv1.CustomResourceDefinitionNames `json:"names"`

	// Scope of the defined composite resource. LegacyCluster (the default, and
	// Crossplane v1's behaviour) composite resources are cluster scoped, keep
	// their machinery fields directly under spec and may be offered as claims.
	// Namespaced composite resources live in a namespace, compose only
	// namespaced resources in that namespace, keep their machinery fields under
	// spec.crossplane and offer no claims. Cluster composite resources are
	// cluster scoped, keep their machinery fields under spec.crossplane and
	// offer no claims.
	// +optional
	// +kubebuilder:validation:Enum=LegacyCluster;Namespaced;Cluster
	// +kubebuilder:default=LegacyCluster
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	Scope CompositeResourceScope `json:"scope,omitempty"`

	// ClaimNames specifies the names of an optional composite resource claim.
	// When claim names are specified a namespaced 'composite resource claim'
	// CRD is created that corresponds to the defined composite resource. The
	// claim acts as a namespaced proxy for the composite resource; creating,
	// updating, or deleting the claim creates, updates, or deletes a
	// corresponding composite resource. Claim names may be added to an
	// existing CompositeResourceDefinition, but cannot be changed or removed
	// once they have been set. Only LegacyCluster composite resources may be
	// claimed.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	// +kubebuilder:validation:XValidation:rule="self.plural == self.plural.lowerAscii()",message="Plural name must be lowercase"
	// +kubebuilder:validation:XValidation:rule="!has(self.singular) || self.singular == self.singular.lowerAscii()",message="Singular name must be lowercase"
	ClaimNames *extv1.CustomResourceDefinitionNames `json:"claimNames,omitempty"`

	// ConnectionSecretKeys is the list of keys that will be exposed to the end
	// user of the defined kind. If the list is empty, all keys will be
	// published.
	// +optional
	ConnectionSecretKeys []string `json:"connectionSecretKeys,omitempty"`

	// DefaultCompositeDeletePolicy is the policy used when deleting the
	// Composite that is associated with the Claim if no policy has been
	// specified. It becomes the default of the claim's compositeDeletePolicy.
	// +optional
	// +kubebuilder:default=Background
	DefaultCompositeDeletePolicy *CompositeDeletePolicy `json:"defaultCompositeDeletePolicy,omitempty"`

	// DefaultCompositionRef refers to the Composition resource that will be
	// used in case no composition selector is given.
	// +optional
	DefaultCompositionRef *CompositionReference `json:"defaultCompositionRef,omitempty"`

	// EnforcedCompositionRef refers to the Composition resource that will be
	// used by all composite instances whose schema is defined by this
	// definition.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	EnforcedCompositionRef *CompositionReference `json:"enforcedCompositionRef,omitempty"`

	// DefaultCompositionUpdatePolicy is the policy used when updating
	// composites after a new Composition Revision has been created if no
	// policy has been specified on the composite. It becomes the default of
	// the composite resource's compositionUpdatePolicy.
	// +optional
	// +kubebuilder:default=Automatic
	DefaultCompositionUpdatePolicy *UpdatePolicy `json:"defaultCompositionUpdatePolicy,omitempty"`

	// DefaultCompositionRevisionSelector refers to the CompositionRevision
	// that will be used in case no compositionRevision selector is given.
	// +optional
	DefaultCompositionRevisionSelector *metav1.LabelSelector `json:"defaultCompositionRevisionSelector,omitempty"`

	// Versions is the list of all API versions of the defined composite
	// resource. Version names are used to compute the order in which served
	// versions are listed in API discovery. If the version string is
	// "kube-like", it will sort above non "kube-like" version strings, which
	// are ordered lexicographically. "Kube-like" versions start with a "v",
	// then are followed by a number (the major version), then optionally the
	// string "alpha" or "beta" and another number (the minor version). These
	// are sorted first by GA > beta > alpha (where GA is a version with no
	// suffix such as beta or alpha), and then by comparing major version, then
	// minor version. An example sorted list of versions: v10, v2, v1, v11beta2,
	// v10beta3, v3beta1, v12alpha1, v11alpha2, foo1, foo10.
	Versions []CompositeResourceDefinitionVersion `json:"versions"`

	// Conversion defines all conversion settings for the defined Composite
	// resource. It is copied to the generated composite resource and claim
	// CRDs.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.strategy != 'Webhook' || has(self.webhook)",message="webhook must be set when strategy is Webhook"
	Conversion *extv1.CustomResourceConversion `json:"conversion,omitempty"`

	// Metadata specifies the desired metadata for the defined composite
	// resource and claim CRD's.
	// +optional
	Metadata *CompositeResourceDefinitionSpecMetadata `json:"metadata,omitempty"`

	// ServiceAccountRef names a ServiceAccount that Loom impersonates when it
	// creates, updates and deletes the composed resources of this definition's
	// composite resources, so that RBAC decides which kinds they may be
	// composed of. Without it Loom uses its own identity, as Crossplane does.
	// A Loom addition; Crossplane ignores it.
	// +optional
	ServiceAccountRef *ServiceAccountReference `json:"serviceAccountRef,omitempty"`
}

// A CompositionReference references a Composition.
type CompositionReference struct {
	// Name of the Composition.
	Name string `json:"name"`
}

// A ServiceAccountReference names a ServiceAccount.
type ServiceAccountReference struct {
	// Namespace of the ServiceAccount.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`

	// Name of the ServiceAccount.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// CompositeResourceDefinitionSpecMetadata specifies the desired metadata of
// the defined composite resource and claim CRD's.
type CompositeResourceDefinitionSpecMetadata struct {
	// Map of string keys and values that can be used to organize and
	// categorize (scope and select) objects. These labels are added to the
	// composite resource and claim CRD's in addition to any labels defined by
	// the CompositeResourceDefinition's own metadata.labels; these win.
	// More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations is an unstructured key value map stored with a resource that
	// may be set by external tools to store and retrieve arbitrary metadata.
	// They are set on the composite resource and claim CRD's.
	// More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// CompositeResourceDefinitionVersion describes a version of an XR.
type CompositeResourceDefinitionVersion struct {
	// Name of this version, e.g. “v1”, “v2beta1”, etc. Composite resources are
	// served under this version at `/apis/<group>/<version>/...` if `served` is
	// true.
	Name string `json:"name"`

	// Referenceable specifies that this version may be referenced by a
	// Composition in order to configure which resources an XR may be composed
	// of. Exactly one version must be marked as referenceable; all
	// Compositions must target only the referenceable version. The
	// referenceable version must be served. It's mapped to the CRD's
	// `spec.versions[*].storage` field.
	Referenceable bool `json:"referenceable"`

	// Served specifies that this version should be served via REST APIs.
	Served bool `json:"served"`

	// The deprecated field specifies that this version is deprecated and
	// should not be used.
	// +optional
	Deprecated *bool `json:"deprecated,omitempty"`

	// DeprecationWarning specifies the message that should be shown to the
	// user when using this version.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	DeprecationWarning *string `json:"deprecationWarning,omitempty"`

	// Schema describes the schema used for validation, pruning, and defaulting
	// of this version of the defined composite resource. Fields required by
	// all composite resources will be injected into this schema automatically,
	// and will override equivalently named fields in this schema. Omitting
	// this schema results in a schema that contains only the fields required
	// by all composite resources.
	// +optional
	Schema *CompositeResourceValidation `json:"schema,omitempty"`

	// AdditionalPrinterColumns specifies additional columns returned in Table
	// output. If no columns are specified, a single column displaying the age
	// of the custom resource is used. See the following link for details:
	// https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables
	// +optional
	AdditionalPrinterColumns []extv1.CustomResourceColumnDefinition `json:"additionalPrinterColumns,omitempty"`

	// Subresources of this version of the defined composite resource. The
	// status subresource is always enabled; scale may be added here.
	// +optional
	Subresources *CompositeResourceSubresources `json:"subresources,omitempty"`
}

// CompositeResourceSubresources are the optional subresources of a defined
// composite resource. The status subresource is always enabled.
type CompositeResourceSubresources struct {
	// Scale enables the scale subresource.
	// +optional
	Scale *extv1.CustomResourceSubresourceScale `json:"scale,omitempty"`
}

// CompositeResourceValidation is a list of validation methods for a composite
// resource.
type CompositeResourceValidation struct {
	// OpenAPIV3Schema is the OpenAPI v3 schema to use for validation and
	// pruning.
	// +kubebuilder:pruning:PreserveUnknownFields
	OpenAPIV3Schema runtime.RawExtension `json:"openAPIV3Schema,omitempty"`
}

// CompositeResourceDefinitionStatus shows the observed state of the definition.
type CompositeResourceDefinitionStatus struct {
	common.ConditionedStatus `json:",inline"`

	// Controllers represents the status of the controllers that power this
	// composite resource definition.
	// +optional
	Controllers CompositeResourceDefinitionControllerStatus `json:"controllers,omitzero"`
}

// CompositeResourceDefinitionControllerStatus shows the observed state of the
// controllers that power the definition.
type CompositeResourceDefinitionControllerStatus struct {
	// The CompositeResourceTypeRef is the type of composite resource that Loom
	// is currently reconciling for this definition. Its version will
	// eventually become consistent with the definition's referenceable
	// version. Note that clients may interact with any served type; this is
	// simply the type that Loom interacts with.
	// +optional
	CompositeResourceTypeRef TypeReference `json:"compositeResourceType,omitzero"`

	// The CompositeResourceClaimTypeRef is the type of composite resource
	// claim that Loom is currently reconciling for this definition. Its
	// version will eventually become consistent with the definition's
	// referenceable version. Note that clients may interact with any served
	// type; this is simply the type that Loom interacts with.
	// +optional
	CompositeResourceClaimTypeRef TypeReference `json:"compositeResourceClaimType,omitzero"`
}

// A CompositeResourceDefinition defines the schema for a new custom
// Kubernetes API: a composite resource (XR) kind, and optionally a namespaced
// claim kind for it. Loom generates and serves a CRD for each.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="ESTABLISHED",type="string",JSONPath=".status.conditions[?(@.type=='Established')].status"
// +kubebuilder:printcolumn:name="OFFERED",type="string",JSONPath=".status.conditions[?(@.type=='Offered')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=crossplane,shortName=xrd;xrds
type CompositeResourceDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CompositeResourceDefinitionSpec   `json:"spec,omitempty"`
	Status CompositeResourceDefinitionStatus `json:"status,omitempty"`
}

// CompositeResourceDefinitionList contains a list of
// CompositeResourceDefinitions.
//
// +kubebuilder:object:root=true
type CompositeResourceDefinitionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CompositeResourceDefinition `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CompositeResourceDefinition{}, &CompositeResourceDefinitionList{})
}
