// Package fake is an in-memory stand-in for the Kubernetes API server, for
// the secrets service's unit tests: objects of any kind read by GET, Secrets
// created and updated with resourceVersion preconditions, XR status applied
// (conditions merged by type, other fields replaced), and a count of every
// request. The end-to-end tests run the same code against a real API server.
package fake

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/loomxr/loom/services/secrets/internal/secret"
)

// Request kinds counted by Cluster.
const (
	Get          = "get"
	GetSecret    = "getSecret"
	CreateSecret = "createSecret"
	UpdateSecret = "updateSecret"
	ApplyStatus  = "applyStatus"
)

type objKey struct {
	gk        schema.GroupKind
	namespace string
	name      string
}

// Cluster is an in-memory API server. It is safe for concurrent use.
type Cluster struct {
	mu      sync.Mutex
	rv      int
	uid     int
	objs    map[objKey]*unstructured.Unstructured
	secrets map[secret.Key]*corev1.Secret
	calls   map[string]int
	// Namespaced kinds; every other kind is cluster scoped.
	namespaced map[schema.GroupKind]bool
}

// New returns an empty Cluster in which the given kinds are namespaced.
func New(namespaced ...schema.GroupKind) *Cluster {
	c := &Cluster{objs: map[objKey]*unstructured.Unstructured{}, secrets: map[secret.Key]*corev1.Secret{}, calls: map[string]int{}, namespaced: map[schema.GroupKind]bool{}}
	for _, gk := range namespaced {
		c.namespaced[gk] = true
	}
	return c
}

func (c *Cluster) nextRV() string {
	c.rv++
	return strconv.Itoa(c.rv)
}

func (c *Cluster) nextUID() types.UID {
	c.uid++
	return types.UID(fmt.Sprintf("uid-%d", c.uid))
}

// Add stores the objects of a YAML stream (documents separated by ---),
// giving each a UID (unless it has one) and a resourceVersion, and returns
// them. It panics on invalid YAML: tests pass literals.
func (c *Cluster) Add(docs string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, d := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(d) == "" {
			continue
		}
		j, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			panic(err)
		}
		u := &unstructured.Unstructured{}
		// Integers decode as int64, as they do from the API server.
		if err := u.UnmarshalJSON(j); err != nil {
			panic(err)
		}
		c.Put(u)
		out = append(out, u)
	}
	return out
}

// Put stores u (a copy), giving it a UID if it has none and a new
// resourceVersion, which it sets on u too.
func (c *Cluster) Put(u *unstructured.Unstructured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u.GetUID() == "" {
		u.SetUID(c.nextUID())
	}
	u.SetResourceVersion(c.nextRV())
	gvk := u.GroupVersionKind()
	c.objs[objKey{gk: gvk.GroupKind(), namespace: u.GetNamespace(), name: u.GetName()}] = u.DeepCopy()
}

// PutSecret stores s (a copy), giving it a UID if it has none and a new
// resourceVersion, which it sets on s too.
func (c *Cluster) PutSecret(s *corev1.Secret) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.UID == "" {
		s.UID = c.nextUID()
	}
	s.ResourceVersion = c.nextRV()
	c.secrets[secret.Key{Namespace: s.Namespace, Name: s.Name}] = s.DeepCopy()
}

// Object returns a copy of the stored object, or nil.
func (c *Cluster) Object(gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.objs[objKey{gk: gvk.GroupKind(), namespace: namespace, name: name}]; ok {
		return o.DeepCopy()
	}
	return nil
}

// Delete removes an object.
func (c *Cluster) Delete(gvk schema.GroupVersionKind, namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.objs, objKey{gk: gvk.GroupKind(), namespace: namespace, name: name})
}

// Secret returns a copy of a stored Secret, or nil.
func (c *Cluster) Secret(namespace, name string) *corev1.Secret {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.secrets[secret.Key{Namespace: namespace, Name: name}]; ok {
		return s.DeepCopy()
	}
	return nil
}

// SetSecretData replaces the data of a stored Secret, as its owner would.
func (c *Cluster) SetSecretData(namespace, name string, data map[string][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.secrets[secret.Key{Namespace: namespace, Name: name}]
	s.Data = maps.Clone(data)
	s.ResourceVersion = c.nextRV()
}

// Calls returns the count of each kind of request since the last call, and
// resets it.
func (c *Cluster) Calls() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

// Mapping maps a kind to its lower-case plural resource.
func (c *Cluster) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	scope := meta.RESTScopeRoot
	if c.namespaced[gvk.GroupKind()] {
		scope = meta.RESTScopeNamespace
	}
	return &meta.RESTMapping{
		Resource:         gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s"),
		GroupVersionKind: gvk,
		Scope:            scope,
	}, nil
}

// Namespaced reports whether the kind is namespaced.
func (c *Cluster) Namespaced(gvk schema.GroupVersionKind) (bool, error) {
	return c.namespaced[gvk.GroupKind()], nil
}

// Get returns a copy of an object.
func (c *Cluster) Get(_ context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[Get]++
	o, ok := c.objs[objKey{gk: gvk.GroupKind(), namespace: namespace, name: name}]
	if !ok {
		return nil, kerrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, name)
	}
	return o.DeepCopy(), nil
}

// GetSecret returns a copy of a Secret.
func (c *Cluster) GetSecret(_ context.Context, namespace, name string) (*corev1.Secret, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[GetSecret]++
	s, ok := c.secrets[secret.Key{Namespace: namespace, Name: name}]
	if !ok {
		return nil, kerrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	return s.DeepCopy(), nil
}

// CreateSecret stores a new Secret.
func (c *Cluster) CreateSecret(_ context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[CreateSecret]++
	k := secret.Key{Namespace: s.Namespace, Name: s.Name}
	if _, ok := c.secrets[k]; ok {
		return nil, kerrors.NewAlreadyExists(corev1.Resource("secrets"), s.Name)
	}
	s = s.DeepCopy()
	s.UID = c.nextUID()
	s.ResourceVersion = c.nextRV()
	c.secrets[k] = s
	return s.DeepCopy(), nil
}

// UpdateSecret replaces a Secret whose resourceVersion s carries.
func (c *Cluster) UpdateSecret(_ context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[UpdateSecret]++
	k := secret.Key{Namespace: s.Namespace, Name: s.Name}
	cur, ok := c.secrets[k]
	if !ok {
		return nil, kerrors.NewNotFound(corev1.Resource("secrets"), s.Name)
	}
	if s.ResourceVersion != cur.ResourceVersion {
		return nil, kerrors.NewConflict(corev1.Resource("secrets"), s.Name, fmt.Errorf("resourceVersion %s is not %s", s.ResourceVersion, cur.ResourceVersion))
	}
	s = s.DeepCopy()
	s.UID = cur.UID
	s.ResourceVersion = c.nextRV()
	c.secrets[k] = s
	return s.DeepCopy(), nil
}

// ApplyStatus merges intent's status into the object: conditions by type,
// other top-level status fields replaced.
func (c *Cluster) ApplyStatus(_ context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[ApplyStatus]++
	gvk := intent.GroupVersionKind()
	k := objKey{gk: gvk.GroupKind(), namespace: intent.GetNamespace(), name: intent.GetName()}
	o, ok := c.objs[k]
	if !ok {
		return nil, kerrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, intent.GetName())
	}
	status, _, _ := unstructured.NestedMap(o.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	in, _, _ := unstructured.NestedMap(intent.Object, "status")
	for f, v := range in {
		if f != "conditions" {
			status[f] = v
			continue
		}
		have, _ := status["conditions"].([]any)
		for _, nc := range v.([]any) { //nolint:forcetypeassert // Conditions the code under test wrote: a list of objects.
			t := nc.(map[string]any)["type"] //nolint:forcetypeassert // As above.
			replaced := false
			for i, hc := range have {
				if hc.(map[string]any)["type"] == t { //nolint:forcetypeassert // As above.
					have[i], replaced = nc, true
				}
			}
			if !replaced {
				have = append(have, nc)
			}
		}
		status["conditions"] = have
	}
	o.Object["status"] = status
	o.SetResourceVersion(c.nextRV())
	return o.DeepCopy(), nil
}

// Metadata returns the metadata of a Secret, as an up-to-date informer
// would.
func (c *Cluster) Metadata(k secret.Key) (*metav1.PartialObjectMetadata, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.secrets[k]
	if !ok {
		return nil, false
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: *s.ObjectMeta.DeepCopy()}, true
}
