// Package kube is the secrets service's access to the Kubernetes API:
// composite resources, claims and composed resources read as unstructured
// data, Secrets read and written through the typed client, and a tally of
// every request, so that the cost of handling one target can be logged and
// measured.
//
// The service never LISTs anything but Secrets (the metadata informer of
// package tracker does that): it GETs each object an event names or an XR
// references.
package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	kitkube "github.com/loomxr/loom/pkg/kube"
)

// FieldManager is the field manager of every write the service makes.
const FieldManager = "loom-secrets"

// A Tally counts the API requests made with a context (see WithTally):
// pkg/kube's, counted by the transport (install Count with
// rest.Config.Wrap), so that reads the read path answered without the API
// server are not counted.
type Tally = kitkube.Tally

// WithTally and Count are pkg/kube's.
var (
	WithTally = kitkube.WithTally //nolint:gochecknoglobals // An alias of a function.
	Count     = kitkube.Count     //nolint:gochecknoglobals // An alias of a function.
)

// Client reads and writes objects (pkg/kube's Client, writing as
// FieldManager) and Secrets. It is safe for concurrent use.
type Client struct {
	*kitkube.Client
	md   metadata.Interface
	kube kubernetes.Interface
}

// New returns a Client. The mapper maps kinds to resources; a kind it does
// not know makes it reload, at most once a second. opts configure the reads
// of objects (see kitkube.WithMirror; Secrets are always read from the API
// server); the client reports every write of an object to them.
func New(dyn dynamic.Interface, md metadata.Interface, kube kubernetes.Interface, mapper meta.ResettableRESTMapper, opts ...kitkube.Option) *Client {
	return &Client{Client: kitkube.NewClient(dyn, mapper, FieldManager, opts...), md: md, kube: kube}
}

// Controller returns the controller reference of the object that ref (an
// owner reference found in namespace, "" for a cluster-scoped kind) names,
// reading only its metadata; nil if it has none or is gone (or has another
// UID than ref says).
func (c *Client) Controller(ctx context.Context, ref metav1.OwnerReference, namespace string) (*metav1.OwnerReference, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("cannot parse apiVersion %q: %w", ref.APIVersion, err)
	}
	m, err := c.Mapping(gv.WithKind(ref.Kind))
	if err != nil {
		return nil, err
	}
	var r metadata.ResourceInterface = c.md.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = c.md.Resource(m.Resource).Namespace(namespace)
	}
	o, err := r.Get(ctx, ref.Name, metav1.GetOptions{})
	if kerrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if o.UID != ref.UID {
		return nil, nil
	}
	return metav1.GetControllerOf(o), nil
}

// GetSecret returns the Secret, or an error for which kerrors.IsNotFound is
// true.
func (c *Client) GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return c.kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// CreateSecret creates s. A Secret that exists already fails with an error
// for which kerrors.IsAlreadyExists is true.
func (c *Client) CreateSecret(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	return c.kube.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{FieldManager: FieldManager})
}

// UpdateSecret replaces s, with s's resourceVersion as a precondition: a
// stale s fails with an error for which kerrors.IsConflict is true.
func (c *Client) UpdateSecret(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	return c.kube.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{FieldManager: FieldManager})
}
