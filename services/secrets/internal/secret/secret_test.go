package secret_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/services/secrets/internal/fake"
	"github.com/loomxr/loom/services/secrets/internal/secret"
)

// staleCache is a metadata cache that knows nothing, or an old version.
type staleCache map[secret.Key]*metav1.PartialObjectMetadata

func (c staleCache) Metadata(k secret.Key) (*metav1.PartialObjectMetadata, bool) {
	m, ok := c[k]
	return m, ok
}

var (
	key   = secret.Key{Namespace: "system", Name: "xr-uid"}
	owner = metav1.OwnerReference{APIVersion: "example.org/v1", Kind: "XDB", Name: "db", UID: "xr-uid"}
)

func desired(data map[string]string) secret.Desired {
	d := secret.Desired{Key: key, Owner: owner, Data: map[string][]byte{}}
	for k, v := range data {
		d.Data[k] = []byte(v)
	}
	return d
}

func TestEnsure(t *testing.T) {
	yes := true
	ours := metav1.OwnerReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID, Controller: &yes}
	// Crossplane's controller reference also blocks the owner's deletion.
	crossplanes := *ours.DeepCopy()
	crossplanes.BlockOwnerDeletion = &yes
	type want struct {
		wrote bool
		err   error
		calls map[string]int
		data  map[string][]byte
		owner []metav1.OwnerReference
	}
	cases := map[string]struct {
		reason string
		// setup prepares the cluster and the store, and returns the cache
		// the store under test uses (nil: the cluster, an up-to-date cache).
		setup   func(t *testing.T, c *fake.Cluster) secret.Cache
		prior   *secret.Desired
		desired secret.Desired
		want    want
		// unlabelled: the Secret keeps no managed-by label.
		unlabelled bool
	}{
		"CreateUnknown": {
			reason:  "A Secret neither the cache nor the store knows is created without a read.",
			desired: desired(map[string]string{"user": "admin"}),
			want: want{wrote: true, calls: map[string]int{fake.CreateSecret: 1},
				data: map[string][]byte{"user": []byte("admin")}, owner: []metav1.OwnerReference{ours}},
		},
		"Unchanged": {
			reason:  "A Secret the store wrote, unchanged since, costs no request.",
			prior:   new(desired(map[string]string{"user": "admin"})),
			desired: desired(map[string]string{"user": "admin"}),
			want:    want{calls: map[string]int{}, data: map[string][]byte{"user": []byte("admin")}, owner: []metav1.OwnerReference{ours}},
		},
		"ChangedWithoutRead": {
			reason:  "A Secret the store wrote is updated without a read; keys that disappear upstream disappear.",
			prior:   new(desired(map[string]string{"user": "admin", "old": "x"})),
			desired: desired(map[string]string{"user": "admin", "password": "new"}),
			want: want{wrote: true, calls: map[string]int{fake.UpdateSecret: 1},
				data: map[string][]byte{"user": []byte("admin"), "password": []byte("new")}, owner: []metav1.OwnerReference{ours}},
		},
		"EmptiedWithoutRead": {
			reason:  "A Secret the store wrote is emptied without a read when every key disappears upstream.",
			prior:   new(desired(map[string]string{"user": "admin"})),
			desired: desired(nil),
			want:    want{wrote: true, calls: map[string]int{fake.UpdateSecret: 1}, owner: []metav1.OwnerReference{ours}},
		},
		"ChangedBySomeoneElse": {
			reason: "A Secret changed since the store wrote it is read, then restored.",
			prior:  new(desired(map[string]string{"user": "admin"})),
			setup: func(t *testing.T, c *fake.Cluster) secret.Cache {
				c.SetSecretData(key.Namespace, key.Name, map[string][]byte{"user": []byte("mallory")})
				return nil
			},
			desired: desired(map[string]string{"user": "admin"}),
			want: want{wrote: true, calls: map[string]int{fake.GetSecret: 1, fake.UpdateSecret: 1},
				data: map[string][]byte{"user": []byte("admin")}, owner: []metav1.OwnerReference{ours}},
		},
		"ExistsUnknownToStore": {
			reason: "A Secret the store does not remember (a restart) is read and left alone when it is as desired.",
			setup: func(t *testing.T, c *fake.Cluster) secret.Cache {
				c.PutSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
					Labels: map[string]string{secret.LabelManagedBy: secret.ManagedBy}, OwnerReferences: []metav1.OwnerReference{ours}},
					Type: secret.TypeConnection, Data: map[string][]byte{"user": []byte("admin")}})
				return nil
			},
			desired: desired(map[string]string{"user": "admin"}),
			want: want{calls: map[string]int{fake.GetSecret: 1},
				data: map[string][]byte{"user": []byte("admin")}, owner: []metav1.OwnerReference{ours}},
		},
		"CrossplaneWrote": {
			reason: "A Secret Crossplane wrote (no managed-by label, otherwise as desired) is left alone: the label alone is no reason to write.",
			setup: func(t *testing.T, c *fake.Cluster) secret.Cache {
				c.PutSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, OwnerReferences: []metav1.OwnerReference{crossplanes}},
					Type: secret.TypeConnection, Data: map[string][]byte{"user": []byte("admin")}})
				return nil
			},
			desired: desired(map[string]string{"user": "admin"}),
			want: want{calls: map[string]int{fake.GetSecret: 1},
				data: map[string][]byte{"user": []byte("admin")}, owner: []metav1.OwnerReference{crossplanes}},
			unlabelled: true,
		},
		"CacheLagsCreate": {
			reason: "A Secret the cache does not know yet but that exists is read after the create fails, then updated.",
			setup: func(t *testing.T, c *fake.Cluster) secret.Cache {
				c.PutSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
					Type: secret.TypeConnection, Data: map[string][]byte{"user": []byte("old")}})
				return staleCache{}
			},
			desired: desired(map[string]string{"user": "admin"}),
			want: want{wrote: true, calls: map[string]int{fake.CreateSecret: 1, fake.GetSecret: 1, fake.UpdateSecret: 1},
				data: map[string][]byte{"user": []byte("admin")}, owner: []metav1.OwnerReference{ours}},
		},
		"CacheStaleConflict": {
			reason: "A stale cache that matches the store's memory makes the update conflict; the store reads and updates again.",
			prior:  new(desired(map[string]string{"user": "admin"})),
			setup: func(t *testing.T, c *fake.Cluster) secret.Cache {
				stale := staleCache{key: {ObjectMeta: *c.Secret(key.Namespace, key.Name).ObjectMeta.DeepCopy()}}
				c.SetSecretData(key.Namespace, key.Name, map[string][]byte{"user": []byte("mallory")})
				return stale
			},
			desired: desired(map[string]string{"user": "root"}),
			want: want{wrote: true, calls: map[string]int{fake.UpdateSecret: 2, fake.GetSecret: 1},
				data: map[string][]byte{"user": []byte("root")}, owner: []metav1.OwnerReference{ours}},
		},
		"AdoptUncontrolled": {
			reason: "An uncontrolled connection Secret is adopted: the owner becomes its controller.",
			setup: func(t *testing.T, c *fake.Cluster) secret.Cache {
				c.PutSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
					Type: secret.TypeConnection, Data: map[string][]byte{"user": []byte("admin")}})
				return nil
			},
			desired: desired(map[string]string{"user": "admin"}),
			want: want{wrote: true, calls: map[string]int{fake.GetSecret: 1, fake.UpdateSecret: 1},
				data: map[string][]byte{"user": []byte("admin")}, owner: []metav1.OwnerReference{ours}},
		},
		"ControlledByAnother": {
			reason: "A Secret another object controls is refused.",
			setup: func(t *testing.T, c *fake.Cluster) secret.Cache {
				c.PutSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
					OwnerReferences: []metav1.OwnerReference{{Kind: "Other", Name: "o", UID: "other", Controller: &yes}}},
					Type: secret.TypeConnection, Data: map[string][]byte{"k": []byte("v")}})
				return nil
			},
			desired: desired(map[string]string{"user": "admin"}),
			want: want{err: secret.ErrNotControllable, calls: map[string]int{fake.GetSecret: 1},
				data: map[string][]byte{"k": []byte("v")}, owner: []metav1.OwnerReference{{Kind: "Other", Name: "o", UID: "other", Controller: &yes}}},
		},
		"UncontrolledOtherType": {
			reason: "An uncontrolled Secret of another type is refused.",
			setup: func(t *testing.T, c *fake.Cluster) secret.Cache {
				c.PutSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
					Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v")}})
				return nil
			},
			desired: desired(map[string]string{"user": "admin"}),
			want:    want{err: secret.ErrNotControllable, calls: map[string]int{fake.GetSecret: 1}, data: map[string][]byte{"k": []byte("v")}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.New()
			cache := &switchCache{Cache: c}
			s := secret.New(c, cache)
			if tc.prior != nil {
				if _, err := s.Ensure(t.Context(), *tc.prior); err != nil {
					t.Fatal(err)
				}
			}
			if tc.setup != nil {
				if sc := tc.setup(t, c); sc != nil {
					cache.Cache = sc
				}
			}
			c.Calls()
			wrote, err := s.Ensure(t.Context(), tc.desired)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("\n%s\nEnsure(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if wrote != tc.want.wrote {
				t.Errorf("\n%s\nEnsure(...): wrote %t, want %t", tc.reason, wrote, tc.want.wrote)
			}
			if diff := cmp.Diff(tc.want.calls, c.Calls(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nEnsure(...): requests -want, +got:\n%s", tc.reason, diff)
			}
			got := c.Secret(key.Namespace, key.Name)
			if diff := cmp.Diff(tc.want.data, got.Data, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nEnsure(...): data -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.owner, got.OwnerReferences, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nEnsure(...): owner references -want, +got:\n%s", tc.reason, diff)
			}
			if tc.want.err == nil && (got.Type != secret.TypeConnection || (got.Labels[secret.LabelManagedBy] != secret.ManagedBy) != tc.unlabelled) {
				t.Errorf("\n%s\nEnsure(...): type %q, labels %v; want a labelled connection Secret", tc.reason, got.Type, got.Labels)
			}
		})
	}
}

// switchCache is a cache whose source a test replaces.
type switchCache struct{ secret.Cache }

func TestWritten(t *testing.T) {
	c := fake.New()
	s := secret.New(c, c)
	if _, err := s.Ensure(t.Context(), desired(map[string]string{"user": "admin"})); err != nil {
		t.Fatal(err)
	}
	rv := c.Secret(key.Namespace, key.Name).ResourceVersion
	if !s.Written(key, rv) {
		t.Errorf("Written(%s, %s): false after the Store wrote that version", key, rv)
	}
	c.SetSecretData(key.Namespace, key.Name, map[string][]byte{"user": []byte("other")})
	if rv2 := c.Secret(key.Namespace, key.Name).ResourceVersion; s.Written(key, rv2) {
		t.Errorf("Written(%s, %s): true for a version someone else wrote", key, rv2)
	}
	if !s.Exists(key) {
		t.Errorf("Exists(%s): false for a Secret the Store wrote", key)
	}
	s.Forget(key)
	c2 := fake.New()
	if secret.New(c2, c2).Exists(key) {
		t.Errorf("Exists(%s): true for a Secret nobody wrote", key)
	}
}

func TestEnsureLabels(t *testing.T) {
	c := fake.New()
	s := secret.New(c, c)
	d := desired(map[string]string{"user": "admin"})
	d.Labels = map[string]string{"loom.dev/composite-uid": "xr-uid", secret.LabelManagedBy: "someone-else"}
	if _, err := s.Ensure(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"loom.dev/composite-uid": "xr-uid", secret.LabelManagedBy: secret.ManagedBy}
	if diff := cmp.Diff(want, c.Secret(key.Namespace, key.Name).Labels); diff != "" {
		t.Errorf("Ensure(...): the caller's labels are added and managed-by is always Loom's: -want, +got:\n%s", diff)
	}
}

// TestMemoBound crosses the Store's memory bound: with room for 8 Secrets,
// an unchanged resync of 20 XRs' Secrets writes nothing; the 8 still
// remembered cost no request at all and the 12 forgotten a read each.
func TestMemoBound(t *testing.T) {
	const size, xrs = 8, 20
	c := fake.New()
	s := secret.New(c, c, secret.WithMemoSize(size))
	d := func(i int) secret.Desired {
		uid := types.UID(fmt.Sprintf("xr-%02d", i))
		return secret.Desired{
			Key:   secret.Key{Namespace: "system", Name: string(uid)},
			Owner: metav1.OwnerReference{APIVersion: "example.org/v1", Kind: "XDB", Name: "db", UID: uid},
			Data:  map[string][]byte{"user": []byte("admin")},
		}
	}
	for i := range xrs {
		if _, err := s.Ensure(t.Context(), d(i)); err != nil {
			t.Fatal(err)
		}
	}
	c.Calls()
	// The most recent first, so that the resync's own reads do not evict
	// the Secrets still remembered before it reaches them.
	for i := xrs - 1; i >= 0; i-- {
		wrote, err := s.Ensure(t.Context(), d(i))
		if err != nil {
			t.Fatal(err)
		}
		if wrote {
			t.Errorf("Ensure(%s): wrote an unchanged Secret", d(i).Key)
		}
	}
	want := map[string]int{fake.GetSecret: xrs - size}
	if diff := cmp.Diff(want, c.Calls(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("API requests of an unchanged resync of %d Secrets with room for %d: -want, +got:\n%s", xrs, size, diff)
	}
}
