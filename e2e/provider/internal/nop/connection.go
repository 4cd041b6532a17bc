package nop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretTypeConnection is the type of Crossplane connection Secrets.
const SecretTypeConnection corev1.SecretType = "connection.crossplane.io/v1alpha1"

// ConnectionDetails returns the Secret data a NopResource publishes. A later
// entry wins over an earlier one with the same name. It never returns nil.
func ConnectionDetails(p NopParameters) map[string][]byte {
	data := make(map[string][]byte, len(p.ConnectionDetails))
	for _, cd := range p.ConnectionDetails {
		data[cd.Name] = []byte(cd.Value)
	}
	return data
}

// A Publisher writes NopResources' connection Secrets. It needs only get,
// create and update on Secrets (no list or watch): it remembers, per
// NopResource, what it last published, so that reconciling an unchanged
// NopResource reads and writes nothing. The memory is lost on restart, which
// costs one GET per NopResource. A Publisher is safe for concurrent use, but
// a single NopResource must not be published concurrently (controller-runtime
// guarantees this per key).
type Publisher struct {
	client client.Client

	mu        sync.Mutex
	published map[string]publication // by NopResource name
}

// A publication is what was last written for, or found current in, a
// NopResource's Secret.
type publication struct {
	owner types.UID
	ref   SecretReference
	sum   [sha256.Size]byte
}

// NewPublisher returns a Publisher that reads and writes Secrets through c.
// Secrets must not be served from a cache by c: the provider has no right to
// list or watch them.
func NewPublisher(c client.Client) *Publisher {
	return &Publisher{client: c, published: map[string]publication{}}
}

// Publish makes the Secret named by nr's writeConnectionSecretToRef hold
// exactly nr's connection details, with type SecretTypeConnection and a
// controller reference to nr so that the garbage collector deletes it with
// nr. It writes only when the data or the controller reference differ. It
// refuses Secrets controlled by another object and uncontrolled Secrets of
// another type. Publish does nothing when nr has no
// writeConnectionSecretToRef.
func (p *Publisher) Publish(ctx context.Context, nr *NopResource) error {
	ref := nr.Spec.WriteConnectionSecretToRef
	if ref == nil {
		p.Forget(nr.GetName())
		return nil
	}
	data := ConnectionDetails(nr.Spec.ForProvider)
	want := publication{owner: nr.GetUID(), ref: *ref, sum: digest(data)}

	p.mu.Lock()
	last, known := p.published[nr.GetName()]
	p.mu.Unlock()
	if known && last == want {
		return nil
	}

	if err := p.apply(ctx, nr, data, !known && isNew(nr)); err != nil {
		return err
	}

	p.mu.Lock()
	p.published[nr.GetName()] = want
	p.mu.Unlock()
	return nil
}

// Forget drops what the Publisher remembers about the named NopResource.
// Call it when the NopResource is gone.
func (p *Publisher) Forget(name string) {
	p.mu.Lock()
	delete(p.published, name)
	p.mu.Unlock()
}

// apply creates or updates the Secret. When createFirst is set (a NopResource
// never reconciled before, whose Secret almost certainly does not exist) it
// tries to create before reading, saving a GET per new NopResource.
func (p *Publisher) apply(ctx context.Context, nr *NopResource, data map[string][]byte, createFirst bool) error {
	ref := nr.Spec.WriteConnectionSecretToRef
	if createFirst {
		err := p.client.Create(ctx, p.desired(nr, data))
		if err == nil {
			return nil
		}
		if !kerrors.IsAlreadyExists(err) {
			return fmt.Errorf("cannot create connection secret %s/%s: %w", ref.Namespace, ref.Name, err)
		}
	}

	s := &corev1.Secret{}
	err := p.client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, s)
	if kerrors.IsNotFound(err) {
		if err := p.client.Create(ctx, p.desired(nr, data)); err != nil {
			return fmt.Errorf("cannot create connection secret %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot get connection secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}

	c := metav1.GetControllerOf(s)
	switch {
	case c == nil && s.Type != SecretTypeConnection:
		return fmt.Errorf("cannot establish control of existing connection secret %s/%s: it is uncontrolled and of type %q", ref.Namespace, ref.Name, s.Type)
	case c != nil && c.UID != nr.GetUID():
		return fmt.Errorf("cannot establish control of existing connection secret %s/%s: it is controlled by %s %s", ref.Namespace, ref.Name, c.Kind, c.Name)
	case c != nil && sameData(s.Data, data):
		return nil
	}

	if c == nil {
		s.OwnerReferences = append(s.OwnerReferences, controllerRef(nr))
	}
	s.Data = data
	if err := p.client.Update(ctx, s); err != nil {
		return fmt.Errorf("cannot update connection secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return nil
}

func (p *Publisher) desired(nr *NopResource, data map[string][]byte) *corev1.Secret {
	ref := nr.Spec.WriteConnectionSecretToRef
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ref.Name,
			Namespace:       ref.Namespace,
			OwnerReferences: []metav1.OwnerReference{controllerRef(nr)},
		},
		Type: SecretTypeConnection,
		Data: data,
	}
}

// controllerRef makes nr the controller of a Secret. BlockOwnerDeletion stays
// unset: setting it would need update rights on nopresources/finalizers, and
// background deletion does not need it.
func controllerRef(nr *NopResource) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: GroupVersion.String(),
		Kind:       Kind.Kind,
		Name:       nr.GetName(),
		UID:        nr.GetUID(),
		Controller: new(true),
	}
}

// isNew reports whether nr was never reconciled: every reconcile leaves a
// Synced condition.
func isNew(nr *NopResource) bool {
	for _, c := range nr.Status.Conditions {
		if c.Type == TypeSynced {
			return false
		}
	}
	return true
}

func sameData(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, bytes.Equal)
}

// digest is a collision-resistant summary of data, so that the Publisher's
// memory holds 32 bytes per NopResource rather than the data itself.
func digest(data map[string][]byte) [sha256.Size]byte {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(data[k]))
		h.Write(data[k])
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
