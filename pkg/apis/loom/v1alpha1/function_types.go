package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loomxr/loom/pkg/apis/common"
)

// Keys Loom reads from the Secrets a Function's TLS settings name.
const (
	// CACertKey is the key of the PEM CA bundle in the Secret named by
	// tls.caSecretRef.
	CACertKey = "ca.crt"

	// TLSCertKey and TLSKeyKey are the keys of the PEM client certificate and
	// private key in the Secret named by tls.clientSecretRef (the layout of a
	// kubernetes.io/tls Secret).
	TLSCertKey = "tls.crt"
	TLSKeyKey  = "tls.key"
)

// FunctionSpec says where a composition function listens and how to reach it.
//
// +kubebuilder:validation:XValidation:rule="(has(self.insecure) && self.insecure) || (has(self.tls) && has(self.tls.caSecretRef) && has(self.tls.clientSecretRef))",message="tls.caSecretRef and tls.clientSecretRef are required unless insecure is true"
// +kubebuilder:validation:XValidation:rule="!(has(self.insecure) && self.insecure && has(self.tls))",message="tls must not be set when insecure is true"
type FunctionSpec struct {
	// Endpoint is the gRPC target of the function's FunctionRunnerService, in
	// gRPC name syntax: for example `dns:///function-foo.functions:9443`
	// (resolved by DNS, load-balanced across all addresses) or
	// `127.0.0.1:9443`.
	// +kubebuilder:validation:MinLength=1
	Endpoint string `json:"endpoint"`

	// TLS names the material for mutual TLS with the function: Loom verifies
	// the function's certificate against tls.caSecretRef and presents the
	// certificate in tls.clientSecretRef. Required unless insecure is true.
	// +optional
	TLS *FunctionTLS `json:"tls,omitempty"`

	// Insecure makes Loom talk to the function in plaintext, without TLS. For
	// local development only; it must be set explicitly, and excludes tls.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// Timeout is the default deadline of one call to this function (one
	// pipeline step). When unset the renderer's default applies.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// MaxConcurrency caps the calls one renderer replica makes to this
	// function at the same time; further steps wait. When unset the
	// renderer's default applies.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxConcurrency *int32 `json:"maxConcurrency,omitempty"`
}

// FunctionTLS names the Secrets that hold a function's TLS material.
type FunctionTLS struct {
	// CASecretRef names a Secret whose `ca.crt` key holds the PEM bundle of
	// the certificate authorities that sign the function's server certificate.
	// +optional
	CASecretRef *SecretReference `json:"caSecretRef,omitempty"`

	// ClientSecretRef names a kubernetes.io/tls Secret (`tls.crt`, `tls.key`)
	// with the client certificate Loom presents to the function.
	// +optional
	ClientSecretRef *SecretReference `json:"clientSecretRef,omitempty"`

	// ServerName is the name Loom expects in the function's certificate. When
	// unset it is the host of the endpoint.
	// +optional
	ServerName string `json:"serverName,omitempty"`
}

// A SecretReference names a Secret in a namespace.
type SecretReference struct {
	// Namespace of the Secret.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`

	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// FunctionStatus is the observed state of a Function.
type FunctionStatus struct {
	common.ConditionedStatus `json:",inline"`
}

// A Function tells Loom where a composition function runs. A Composition's
// pipeline step refers to it by name (functionRef.name); Loom calls its
// FunctionRunnerService at spec.endpoint over mutual TLS, or in plaintext when
// spec.insecure is true. Loom does not run functions; they run wherever the
// operator deploys them.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="ENDPOINT",type="string",JSONPath=".spec.endpoint"
// +kubebuilder:printcolumn:name="INSECURE",type="boolean",JSONPath=".spec.insecure",priority=1
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Cluster,categories=loom,shortName=fn
type Function struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FunctionSpec   `json:"spec"`
	Status FunctionStatus `json:"status,omitempty"`
}

// FunctionList contains a list of Functions.
//
// +kubebuilder:object:root=true
type FunctionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Function `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Function{}, &FunctionList{})
}
