// Package nop is Loom's test provider: a controller for the NopResource
// managed resource of Crossplane's provider-nop (nop.crossplane.io/v1alpha1),
// whose pretend external resource always exists and is always up to date.
//
// A NopResource reports the conditions its spec schedules in
// spec.forProvider.conditionAfter once they are due, mirrors
// spec.forProvider.fields into status.atProvider.fields, and publishes
// spec.forProvider.connectionDetails to the Secret named by
// spec.writeConnectionSecretToRef. It exists so that manifests written for
// Crossplane's own tests run unchanged against Loom, and so that benchmarks
// have composed resources that cost the API server as little as possible.
package nop

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API this package serves. The CRD that declares it is
// e2e/provider/crds/nop.crossplane.io_nopresources.yaml.
var (
	// GroupVersion is nop.crossplane.io/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "nop.crossplane.io", Version: "v1alpha1"}

	// Kind is the NopResource kind with its group and version.
	Kind = GroupVersion.WithKind("NopResource")

	// Resource is the plural resource name with its group and version.
	Resource = GroupVersion.WithResource("nopresources")
)

// AddToScheme registers NopResource and NopResourceList with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &NopResource{}, &NopResourceList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// A NopResource is a managed resource whose external resource does nothing.
// It is cluster-scoped.
type NopResource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NopResourceSpec   `json:"spec"`
	Status NopResourceStatus `json:"status,omitempty"`
}

// NopResourceList is a list of NopResources.
type NopResourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []NopResource `json:"items"`
}

// NopResourceSpec is the desired state of a NopResource: the fields every
// Crossplane managed resource has, plus forProvider.
type NopResourceSpec struct {
	// WriteConnectionSecretToRef names the Secret the connection details
	// are written to. Nil means they are not written anywhere.
	WriteConnectionSecretToRef *SecretReference `json:"writeConnectionSecretToRef,omitempty"`

	// DeletionPolicy is Delete or Orphan. Accepted and ignored: there is no
	// external resource to delete.
	DeletionPolicy string `json:"deletionPolicy,omitempty"`

	// ManagementPolicies are Crossplane's management policies. Accepted and
	// ignored.
	ManagementPolicies []string `json:"managementPolicies,omitempty"`

	// ProviderConfigRef names a ProviderConfig. Accepted and ignored.
	ProviderConfigRef *Reference `json:"providerConfigRef,omitempty"`

	// ForProvider holds what the NopResource pretends to do.
	ForProvider NopParameters `json:"forProvider"`
}

// NopParameters are the configurable fields of a NopResource.
type NopParameters struct {
	// ConditionAfter schedules conditions relative to the NopResource's
	// creation. Without a Ready entry a NopResource is never Ready.
	ConditionAfter []ConditionAfter `json:"conditionAfter,omitempty"`

	// ConnectionDetails are written to the connection Secret. A later entry
	// wins over an earlier one of the same name.
	ConnectionDetails []ConnectionDetail `json:"connectionDetails,omitempty"`

	// Fields is arbitrary JSON to patch to and from; it is mirrored to
	// status.atProvider.fields.
	Fields json.RawMessage `json:"fields,omitempty"`
}

// ConditionAfter sets a condition once Time has elapsed since creation.
type ConditionAfter struct {
	// Time is a Go duration string such as "1s". It is kept as a string so
	// that one bad value fails that object's reconcile, not the decoding of
	// every NopResource in a list.
	Time string `json:"time"`

	// ConditionType is the condition's type, for example Ready.
	ConditionType string `json:"conditionType"`

	// ConditionStatus is True, False or Unknown.
	ConditionStatus string `json:"conditionStatus"`

	// ConditionReason is the condition's reason. When nil, see
	// DefaultReason.
	ConditionReason *string `json:"conditionReason,omitempty"`
}

// ConnectionDetail is one key of the connection Secret.
type ConnectionDetail struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// SecretReference names a Secret.
type SecretReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// Reference names a cluster-scoped object, with Crossplane's resolution
// policy.
type Reference struct {
	Name   string  `json:"name"`
	Policy *Policy `json:"policy,omitempty"`
}

// Policy is Crossplane's reference resolution policy.
type Policy struct {
	Resolve    *string `json:"resolve,omitempty"`
	Resolution *string `json:"resolution,omitempty"`
}

// NopResourceStatus is the observed state of a NopResource.
type NopResourceStatus struct {
	// Conditions are Crossplane conditions, at most one per type.
	Conditions []Condition `json:"conditions,omitempty"`

	// AtProvider is what the pretend external resource reports.
	AtProvider NopObservation `json:"atProvider,omitempty"`
}

// NopObservation is the observed state of the pretend external resource.
type NopObservation struct {
	// Fields mirrors spec.forProvider.fields.
	Fields json.RawMessage `json:"fields,omitempty"`
}

// A Condition has the shape of a Crossplane (crossplane-runtime) condition.
type Condition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
	Reason             string      `json:"reason"`
	Message            string      `json:"message,omitempty"`
	ObservedGeneration int64       `json:"observedGeneration,omitempty"`
}

// The deep-copy functions below are written by hand: the API is small, and a
// generator would add a build step for six structs.

// DeepCopyObject implements runtime.Object.
func (in *NopResource) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopy returns a deep copy, or nil for nil.
func (in *NopResource) DeepCopy() *NopResource {
	if in == nil {
		return nil
	}
	out := new(NopResource)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out, sharing no memory.
func (in *NopResource) DeepCopyInto(out *NopResource) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.deepCopyInto(&out.Spec)
	in.Status.deepCopyInto(&out.Status)
}

// DeepCopyObject implements runtime.Object.
func (in *NopResourceList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(NopResourceList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta) //nolint:staticcheck // The list's own DeepCopyInto shadows ListMeta's.
	if in.Items != nil {
		out.Items = make([]NopResource, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

func (in *NopResourceSpec) deepCopyInto(out *NopResourceSpec) {
	*out = *in
	if in.WriteConnectionSecretToRef != nil {
		r := *in.WriteConnectionSecretToRef
		out.WriteConnectionSecretToRef = &r
	}
	out.ManagementPolicies = cloneSlice(in.ManagementPolicies)
	if in.ProviderConfigRef != nil {
		r := *in.ProviderConfigRef
		if in.ProviderConfigRef.Policy != nil {
			p := Policy{Resolve: clonePtr(in.ProviderConfigRef.Policy.Resolve), Resolution: clonePtr(in.ProviderConfigRef.Policy.Resolution)}
			r.Policy = &p
		}
		out.ProviderConfigRef = &r
	}
	if in.ForProvider.ConditionAfter != nil {
		out.ForProvider.ConditionAfter = make([]ConditionAfter, len(in.ForProvider.ConditionAfter))
		for i, ca := range in.ForProvider.ConditionAfter {
			ca.ConditionReason = clonePtr(ca.ConditionReason)
			out.ForProvider.ConditionAfter[i] = ca
		}
	}
	out.ForProvider.ConnectionDetails = cloneSlice(in.ForProvider.ConnectionDetails)
	out.ForProvider.Fields = cloneSlice(in.ForProvider.Fields)
}

func (in *NopResourceStatus) deepCopyInto(out *NopResourceStatus) {
	*out = *in
	if in.Conditions != nil {
		out.Conditions = make([]Condition, len(in.Conditions))
		for i := range in.Conditions {
			in.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	out.AtProvider.Fields = cloneSlice(in.AtProvider.Fields)
}

// DeepCopyInto copies in into out, sharing no memory.
func (in *Condition) DeepCopyInto(out *Condition) {
	*out = *in
	in.LastTransitionTime.DeepCopyInto(&out.LastTransitionTime)
}

func cloneSlice[S ~[]E, E any](s S) S {
	if s == nil {
		return nil
	}
	return append(make(S, 0, len(s)), s...)
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
