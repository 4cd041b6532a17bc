package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A CompositionMode says how a Composition produces composed resources.
type CompositionMode string

// Composition modes.
const (
	// CompositionModeResources Compositions render an array of resource
	// templates with patches and transforms ("P&T"). It is the default, as in
	// Crossplane v1.
	CompositionModeResources CompositionMode = "Resources"

	// CompositionModePipeline Compositions run a pipeline of composition
	// functions.
	CompositionModePipeline CompositionMode = "Pipeline"
)

// Well-known labels, annotations and names of the composition machinery.
const (
	// LabelComposite is set on every composed resource (and on the composite
	// resource itself) to the name of the root composite resource.
	LabelComposite = "crossplane.io/composite"

	// LabelClaimName is set on a claimed composite resource and its composed
	// resources to the name of the claim.
	LabelClaimName = "crossplane.io/claim-name"

	// LabelClaimNamespace is set on a claimed composite resource and its
	// composed resources to the namespace of the claim.
	LabelClaimNamespace = "crossplane.io/claim-namespace"

	// AnnotationCompositionResourceName is set on every composed resource to
	// the name of the template (or pipeline resource key) it was rendered
	// from. It is how an observed composed resource finds its template again.
	AnnotationCompositionResourceName = "crossplane.io/composition-resource-name"

	// AnnotationExternalName is the external name of a resource.
	AnnotationExternalName = "crossplane.io/external-name"

	// AnnotationExternalNamePrefix on a template's base is prepended to the
	// composite resource's external name when Loom propagates it to the
	// composed resource (a Loom addition).
	AnnotationExternalNamePrefix = "crossplane.io/external-name-prefix"

	// AnnotationExternalNameSuffix on a template's base is appended to the
	// composite resource's external name when Loom propagates it to the
	// composed resource (a Loom addition).
	AnnotationExternalNameSuffix = "crossplane.io/external-name-suffix"
)

// CompositionSpec specifies the desired state of a Composition. Its schema is
// Crossplane v1.20's, with the optional Loom additions marked as such.
type CompositionSpec struct {
	// CompositeTypeRef specifies the type of composite resource that this
	// composition is compatible with.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	CompositeTypeRef TypeReference `json:"compositeTypeRef"`

	// Mode controls what type or "mode" of Composition will be used.
	//
	// "Resources" (the default) renders the resource templates in Resources
	// with patches and transforms. "Pipeline" runs the composition functions
	// in Pipeline.
	// +optional
	// +kubebuilder:validation:Enum=Resources;Pipeline
	// +kubebuilder:default=Resources
	Mode CompositionMode `json:"mode,omitempty"`

	// PatchSets define named sets of patches that any resource template of
	// this Composition may include with a patch of type PatchSet. PatchSets
	// cannot themselves include other PatchSets. Used only in Resources mode.
	// +optional
	PatchSets []PatchSet `json:"patchSets,omitempty"`

	// Environment configures the environment in which resources are
	// rendered: EnvironmentConfigs selected by reference or labels, default
	// data, and patches between the composite resource and the environment.
	// Used only in Resources mode.
	// +optional
	Environment *EnvironmentConfiguration `json:"environment,omitempty"`

	// Resources is the list of resource templates that will be used when a
	// composite resource referring to this composition is created. Used only
	// in Resources mode.
	// +optional
	Resources []ComposedTemplate `json:"resources,omitempty"`

	// Pipeline is a list of composition function steps. Used only in Pipeline
	// mode.
	// +optional
	// +listType=map
	// +listMapKey=step
	Pipeline []PipelineStep `json:"pipeline,omitempty"`

	// WriteConnectionSecretsToNamespace specifies the namespace in which the
	// connection secrets of composite resources dynamically provisioned using
	// this composition will be created.
	// +optional
	WriteConnectionSecretsToNamespace *string `json:"writeConnectionSecretsToNamespace,omitempty"`

	// PublishConnectionDetailsWithStoreConfigRef specifies the secret store
	// config with which the connection details of composite resources
	// dynamically provisioned using this composition will be published.
	// Accepted for compatibility with Crossplane v1; Loom publishes only to
	// Kubernetes Secrets.
	// +optional
	// +kubebuilder:default={"name": "default"}
	PublishConnectionDetailsWithStoreConfigRef *StoreConfigReference `json:"publishConnectionDetailsWithStoreConfigRef,omitempty"`
}

// GetMode returns the mode of the Composition, defaulting to Resources.
func (s *CompositionSpec) GetMode() CompositionMode {
	if s.Mode == "" {
		return CompositionModeResources
	}
	return s.Mode
}

// A TypeReference refers to a type of composite resource.
type TypeReference struct {
	// APIVersion of the type.
	APIVersion string `json:"apiVersion"`

	// Kind of the type.
	Kind string `json:"kind"`
}

// TypeReferenceTo returns a reference to the supplied GroupVersionKind.
func TypeReferenceTo(gvk schema.GroupVersionKind) TypeReference {
	return TypeReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}
}

// GroupVersionKind of the referenced type. An unparsable APIVersion yields an
// empty group and version.
func (t TypeReference) GroupVersionKind() schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(t.APIVersion)
	return gv.WithKind(t.Kind)
}

// A PatchSet is a named set of patches that resource templates include with a
// patch of type PatchSet.
type PatchSet struct {
	// Name of this PatchSet.
	Name string `json:"name"`

	// Patches of this PatchSet, applied in order where the set is included.
	Patches []Patch `json:"patches"`
}

// A ComposedTemplate is the template of one composed resource: a base object,
// patches applied to it, the connection details it contributes and how to
// tell whether it is ready.
type ComposedTemplate struct {
	// Name uniquely identifies this template within its Composition. It
	// becomes the crossplane.io/composition-resource-name annotation of the
	// composed resource and part of its name. Names are optional (templates
	// are then identified by their index) but strongly recommended: either
	// all or no templates must be named.
	// +optional
	Name *string `json:"name,omitempty"`

	// Base is the object that the patches are applied to.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	Base runtime.RawExtension `json:"base"`

	// Patches are applied in order to the base object, or between the
	// composite and the composed resource, or the environment.
	// +optional
	Patches []Patch `json:"patches,omitempty"`

	// ConnectionDetails lists the connection secret keys that this composed
	// resource contributes to the composite resource's connection secret.
	// +optional
	ConnectionDetails []ConnectionDetail `json:"connectionDetails,omitempty"`

	// ReadinessChecks decide whether the composed resource is ready. All
	// checks must pass. The default checks that the Ready condition is True.
	// +optional
	// +kubebuilder:default={{type:"MatchCondition",matchCondition:{type:"Ready",status:"True"}}}
	ReadinessChecks []ReadinessCheck `json:"readinessChecks,omitempty"`
}

// GetName returns the name of the template, or "" if it has none.
func (t *ComposedTemplate) GetName() string {
	if t.Name == nil {
		return ""
	}
	return *t.Name
}

// A PipelineStep is one step of a composition function pipeline.
type PipelineStep struct {
	// Step name. Must be unique within its Pipeline.
	Step string `json:"step"`

	// FunctionRef is a reference to the composition function this step
	// runs.
	FunctionRef FunctionReference `json:"functionRef"`

	// Input is an optional, arbitrary Kubernetes resource (an object with an
	// apiVersion and kind) passed to the function as the input of its
	// RunFunctionRequest.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	Input *runtime.RawExtension `json:"input,omitempty"`

	// Credentials are optional credentials that the function needs.
	// +optional
	// +listType=map
	// +listMapKey=name
	Credentials []FunctionCredentials `json:"credentials,omitempty"`

	// AllowedExtraResources, when set, limits the extra resources this step
	// may request: a request that matches no entry is denied and nothing is
	// fetched. Unset allows every request, as in Crossplane. A Loom
	// addition; Crossplane ignores it.
	// +optional
	AllowedExtraResources []AllowedExtraResource `json:"allowedExtraResources,omitempty"`
}

// A FunctionReference references a composition function by name.
type FunctionReference struct {
	// Name of the referenced Function.
	Name string `json:"name"`
}

// A FunctionCredentialsSource is a source of function credentials.
type FunctionCredentialsSource string

// Function credentials sources.
const (
	// FunctionCredentialsSourceNone means the function needs no credentials.
	FunctionCredentialsSourceNone FunctionCredentialsSource = "None"

	// FunctionCredentialsSourceSecret means the credentials are the data of a
	// Secret.
	FunctionCredentialsSourceSecret FunctionCredentialsSource = "Secret"
)

// FunctionCredentials are optional credentials that a function needs.
type FunctionCredentials struct {
	// Name of this set of credentials.
	Name string `json:"name"`

	// Source of the function credentials.
	// +kubebuilder:validation:Enum=None;Secret
	Source FunctionCredentialsSource `json:"source"`

	// SecretRef is a reference to a Secret containing the credentials. It is
	// required when the source is Secret.
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`
}

// A SecretReference names a Secret in a namespace.
type SecretReference struct {
	// Name of the Secret.
	Name string `json:"name"`

	// Namespace of the Secret.
	Namespace string `json:"namespace"`
}

// An AllowedExtraResource describes extra resources a pipeline step may
// request. A request is allowed if its apiVersion and kind are equal to this
// entry's and, when set, its name matches NameRegex and each label in
// LabelRegexes is requested with a value matching its regular expression.
type AllowedExtraResource struct {
	// APIVersion of the allowed resources.
	APIVersion string `json:"apiVersion"`

	// Kind of the allowed resources.
	Kind string `json:"kind"`

	// NameRegex, when set, must match the whole name of a resource requested
	// by name (Go regexp syntax, anchored).
	// +optional
	NameRegex *string `json:"nameRegex,omitempty"`

	// LabelRegexes, when set, map label keys to regular expressions that the
	// requested label values must match (Go regexp syntax, anchored). A
	// request by labels must name every key listed here.
	// +optional
	LabelRegexes map[string]string `json:"labelRegexes,omitempty"`
}

// A StoreConfigReference references a secret store config.
type StoreConfigReference struct {
	// Name of the referenced StoreConfig.
	Name string `json:"name"`
}

// A Composition says how composite resources of one type are composed of
// other resources: by resource templates with patches and transforms, or by a
// pipeline of composition functions.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="XR-KIND",type="string",JSONPath=".spec.compositeTypeRef.kind"
// +kubebuilder:printcolumn:name="XR-APIVERSION",type="string",JSONPath=".spec.compositeTypeRef.apiVersion"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Cluster,categories=crossplane,shortName=comp
type Composition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec CompositionSpec `json:"spec,omitempty"`
}

// CompositionList contains a list of Compositions.
//
// +kubebuilder:object:root=true
type CompositionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Composition `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Composition{}, &CompositionList{})
}
