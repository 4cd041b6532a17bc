// Package secret writes connection Secrets: the Secret of a composite
// resource (XR) and its copy in the claim's namespace. A Store writes a
// Secret only when its content differs from what it should be, and knows
// without a request, most of the time, whether it does.
//
// # Writes
//
// Secrets are written with create and update (the update carries the
// resourceVersion it was computed from, so a concurrent change fails it and
// the handler runs again): the written data replaces the Secret's data
// whole, so keys that disappear upstream disappear downstream. Every write
// uses the field manager loom-secrets and sets type
// connection.crossplane.io/v1alpha1, the label
// app.kubernetes.io/managed-by: loom-secrets (and the labels the caller
// asks for) and a controller reference to the owner (the XR or the claim), so that the garbage collector deletes the
// Secret with its owner. Like Crossplane, a Store refuses to write a Secret
// that another object controls, or an uncontrolled Secret of another type.
//
// # Knowing without reading
//
// A Store remembers, per Secret it wrote, the resourceVersion the API
// server returned and a SHA-256 digest of the data (never the data). When
// the metadata cache (package tracker's informer) shows that the Secret
// still has that resourceVersion, the Store knows its data without reading
// it: an unchanged Secret costs no request, a changed one costs one update.
// A Secret the cache does not know and the Store never wrote is created
// directly. Otherwise (another writer, a restart, a cache that lags) it is
// read first.
package secret

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/loomxr/loom/pkg/secretdata"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
)

// TypeConnection is the type of connection Secrets.
const TypeConnection corev1.SecretType = "connection.crossplane.io/v1alpha1"

// LabelManagedBy marks the Secrets Loom's secrets service writes, with the
// value ManagedBy.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "loom-secrets"
)

// ErrNotControllable matches an existing Secret that a Store refuses to
// write: controlled by another object, or uncontrolled and not a connection
// Secret. Writing again fails the same way until someone removes it.
var ErrNotControllable = errors.New("cannot establish control of existing connection Secret")

// A Key names a Secret.
type Key struct {
	Namespace string
	Name      string
}

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Client reads and writes Secrets (see kube.Client).
type Client interface {
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	CreateSecret(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error)
	UpdateSecret(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error)
}

// A Cache knows the metadata of the connection Secrets in the cluster (see
// tracker.Tracker). It may lag behind the API server.
type Cache interface {
	Metadata(k Key) (*metav1.PartialObjectMetadata, bool)
}

// Desired is what a connection Secret must be.
type Desired struct {
	Key
	// Owner becomes the Secret's controller reference.
	Owner metav1.OwnerReference
	// Data is the Secret's whole data.
	Data map[string][]byte
	// Labels are further labels the Secret carries, beside LabelManagedBy.
	Labels map[string]string
}

// DefaultMemoSize bounds how many Secrets a Store remembers; beyond it the
// least recently used are forgotten (each then costs one read again, and no
// write if it is as desired).
const DefaultMemoSize = 100_000

// A Store writes connection Secrets. It is safe for concurrent use, but
// callers must not ensure the same Secret concurrently (the bus hands each
// XR to one handler at a time, and each Secret belongs to one XR).
type Store struct {
	client Client
	cache  Cache

	memo *lru.Cache // Key to written; safe for concurrent use
}

// An Option configures a Store.
type Option func(*Store)

// WithMemoSize sets how many Secrets the Store remembers (default
// DefaultMemoSize); n <= 0 keeps the default.
func WithMemoSize(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.memo = lru.New(n)
		}
	}
}

// written is what a Store remembers of a Secret it wrote or read.
type written struct {
	resourceVersion string
	digest          [sha256.Size]byte
}

// New returns a Store that writes through c and consults cache.
func New(c Client, cache Cache, o ...Option) *Store {
	s := &Store{client: c, cache: cache, memo: lru.New(DefaultMemoSize)}
	for _, fn := range o {
		fn(s)
	}
	return s
}

// Ensure makes the Secret d names hold exactly d.Data, creating it if
// needed, and reports whether it wrote (created the Secret or changed its
// data or metadata). It is idempotent: a Secret that is as desired costs no
// write. It fails with ErrNotControllable for a Secret it must not write.
func (s *Store) Ensure(ctx context.Context, d Desired) (bool, error) {
	want := secretdata.Digest(d.Data)
	m, cached := s.cache.Metadata(d.Key)
	w, known := s.recall(d.Key)
	switch {
	case cached && known && w.resourceVersion == m.ResourceVersion:
		if w.digest == want {
			return false, nil
		}
		// The Secret is as this Store last wrote it: update it without
		// reading it.
		cur := &corev1.Secret{ObjectMeta: *m.ObjectMeta.DeepCopy(), Type: TypeConnection}
		cur.ManagedFields = nil
		wrote, err := s.update(ctx, d, cur, w.digest, want)
		if !kerrors.IsConflict(err) {
			return wrote, err
		}
		// The cache was stale after all; read and try again below.
	case !cached && !known:
		created, err := s.create(ctx, d, want)
		if !kerrors.IsAlreadyExists(err) {
			return created, err
		}
	}
	cur, err := s.client.GetSecret(ctx, d.Namespace, d.Name)
	if kerrors.IsNotFound(err) {
		return s.create(ctx, d, want)
	}
	if err != nil {
		return false, fmt.Errorf("cannot get connection Secret %s: %w", d.Key, err)
	}
	return s.update(ctx, d, cur, secretdata.Digest(cur.Data), want)
}

// create creates the Secret.
func (s *Store) create(ctx context.Context, d Desired, digest [sha256.Size]byte) (bool, error) {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name},
		Type:       TypeConnection,
	}
	setDesired(sec, d)
	out, err := s.client.CreateSecret(ctx, sec)
	if err != nil {
		if kerrors.IsAlreadyExists(err) {
			return false, err
		}
		return false, fmt.Errorf("cannot create connection Secret %s: %w", d.Key, err)
	}
	s.remember(d.Key, out.ResourceVersion, digest)
	return true, nil
}

// update makes cur, the current Secret whose data has the digest have, as
// desired if it is not. cur may come from the metadata cache, without its
// data: have says what the data is.
func (s *Store) update(ctx context.Context, d Desired, cur *corev1.Secret, have, digest [sha256.Size]byte) (bool, error) {
	if err := controllable(cur, d.Owner.UID); err != nil {
		s.forget(d.Key)
		return false, fmt.Errorf("%w %s: %w", ErrNotControllable, d.Key, err)
	}
	want := cur.DeepCopy()
	setDesired(want, d)
	if have == digest && labelsHold(cur.Labels, want.Labels) && slices.EqualFunc(cur.OwnerReferences, want.OwnerReferences, sameRef) {
		s.remember(d.Key, cur.ResourceVersion, digest)
		return false, nil
	}
	out, err := s.client.UpdateSecret(ctx, want)
	if err != nil {
		s.forget(d.Key)
		if kerrors.IsConflict(err) {
			return false, err
		}
		return false, fmt.Errorf("cannot update connection Secret %s: %w", d.Key, err)
	}
	s.remember(d.Key, out.ResourceVersion, digest)
	return true, nil
}

// labelsHold reports whether a Secret's labels have are as desired. A
// Secret without LabelManagedBy but otherwise as desired (one Crossplane
// wrote before Loom took over) holds too: the label alone is not worth a
// write, and the Secret's next change adds it.
func labelsHold(have, want map[string]string) bool {
	if maps.Equal(have, want) {
		return true
	}
	if _, ok := have[LabelManagedBy]; ok {
		return false
	}
	w := maps.Clone(want)
	delete(w, LabelManagedBy)
	return maps.Equal(have, w)
}

// setDesired sets the data, the label and the controller reference.
func setDesired(sec *corev1.Secret, d Desired) {
	sec.Data = maps.Clone(d.Data)
	if sec.Labels == nil {
		sec.Labels = map[string]string{}
	}
	maps.Copy(sec.Labels, d.Labels)
	sec.Labels[LabelManagedBy] = ManagedBy
	owner := d.Owner
	yes := true
	owner.Controller = &yes
	for i, r := range sec.OwnerReferences {
		if r.UID == owner.UID {
			// Keep blockOwnerDeletion as the Secret has it: Crossplane
			// sets it, Loom does not need it, and dropping it would cost
			// every adopted Secret a write.
			owner.BlockOwnerDeletion = r.BlockOwnerDeletion
			sec.OwnerReferences[i] = owner
			return
		}
	}
	sec.OwnerReferences = append(sec.OwnerReferences, owner)
}

// controllable reports whether a Secret may be written for owner uid: it is
// controlled by uid, or by nothing and is a connection Secret.
func controllable(s *corev1.Secret, uid types.UID) error {
	c := metav1.GetControllerOfNoCopy(s)
	switch {
	case c == nil && s.Type != TypeConnection:
		return fmt.Errorf("it is not controlled by anything and its type is %q, not %q", s.Type, TypeConnection)
	case c == nil:
		return nil
	case c.UID != uid:
		return fmt.Errorf("it is controlled by %s %q", c.Kind, c.Name)
	}
	return nil
}

func sameRef(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		ptrEqual(a.Controller, b.Controller) && ptrEqual(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}

func ptrEqual(a, b *bool) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// Written reports whether the Secret k, at resourceVersion rv, is what this
// Store last wrote or read: a change notification for it is this Store's
// own doing (or old news), and needs no handling.
func (s *Store) Written(k Key, rv string) bool {
	w, ok := s.recall(k)
	return ok && w.resourceVersion == rv
}

// Exists reports whether the Secret k exists as far as the cache and this
// Store know, without a request.
func (s *Store) Exists(k Key) bool {
	if _, ok := s.cache.Metadata(k); ok {
		return true
	}
	_, ok := s.recall(k)
	return ok
}

// Forget drops what the Store remembers of k, for example because it was
// deleted.
func (s *Store) Forget(k Key) { s.forget(k) }

func (s *Store) recall(k Key) (written, bool) {
	w, ok := s.memo.Get(k)
	if !ok {
		return written{}, false
	}
	return w.(written), true //nolint:forcetypeassert // Only written values are stored.
}

func (s *Store) remember(k Key, rv string, digest [sha256.Size]byte) {
	s.memo.Add(k, written{resourceVersion: rv, digest: digest})
}

func (s *Store) forget(k Key) { s.memo.Remove(k) }
