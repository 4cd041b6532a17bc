package composite

import (
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"

	"github.com/loomxr/loom/pkg/mirror"
	"github.com/loomxr/loom/services/secrets/internal/secret"
)

// DefaultMemoSize is how many XRs a replica's memos remember by default.
const DefaultMemoSize = 16384

// memo is a bounded per-XR memory of a replica: least-recently-used caches,
// so that above its size only the XRs used longest ago are forgotten (a
// forgotten XR is read or reported again on its next reconcile) instead of
// all of them at once.
type memo struct {
	// conflicts holds, per XR, the key conflicts last reported, so that
	// each new set is reported once.
	conflicts *lru.Cache // types.UID to the encoding of its conflicts
	// templates holds, per XR, the template of each composed resource it
	// references, so that resources whose template contributes nothing are
	// not read again. A composed resource keeps its template for life (its
	// name is derived from it), so entries never go stale.
	templates *lru.Cache // types.UID to map[string]string, ref to template
	// mu guards the maps templates holds.
	mu sync.Mutex
	// secrets holds the connection Secrets of composed resources (and the
	// staging Secrets) as last read, by key, so that a Secret is read once
	// per version: the tracker's informer tells, without a request, which
	// version is current. Only the fields the reconciler reads are kept.
	secrets *lru.Cache // secret.Key to *corev1.Secret
	// handOvers holds, per XR, the last publication handed over to the
	// renderer, so that it is not handed over again before the XR's
	// status shows it (or the XR changes without showing it: the hand-over
	// was lost).
	handOvers *lru.Cache // types.UID to handOver
}

// handOver is a publication handed over to the renderer.
type handOver struct {
	// key encodes the condition and lastPublishedTime handed over.
	key string
	// lastPublished is the lastPublishedTime handed over.
	lastPublished string
	// xrVersion is the XR's resourceVersion when it was handed over.
	xrVersion string
}

func newMemo(size int) *memo {
	return &memo{conflicts: lru.New(size), templates: lru.New(size), secrets: lru.New(size), handOvers: lru.New(size)}
}

// handedOver returns the last publication handed over for xr.
func (m *memo) handedOver(xr types.UID) (handOver, bool) {
	v, ok := m.handOvers.Get(xr)
	if !ok {
		return handOver{}, false
	}
	return v.(handOver), true //nolint:forcetypeassert // Only handOvers are stored.
}

// conflictsChanged reports whether the encoding of xr's conflicts differs
// from the one last recorded (unknown counts as changed unless there are
// none), and records it.
func (m *memo) conflictsChanged(xr types.UID, conflicts string) bool {
	prev, known := m.conflicts.Get(xr)
	m.conflicts.Add(xr, conflicts)
	if !known {
		return conflicts != ""
	}
	return prev.(string) != conflicts //nolint:forcetypeassert // Only strings are stored.
}

// template returns the template recorded for the composed resource ref of
// xr.
func (m *memo) template(xr types.UID, ref string) (string, bool) {
	v, ok := m.templates.Get(xr)
	if !ok {
		return "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	tmpl, ok := v.(map[string]string)[ref] //nolint:forcetypeassert // Only such maps are stored.
	return tmpl, ok
}

// putTemplate records the template of the composed resource ref of xr.
func (m *memo) putTemplate(xr types.UID, ref, tmpl string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.templates.Get(xr); ok {
		v.(map[string]string)[ref] = tmpl //nolint:forcetypeassert // Only such maps are stored.
		return
	}
	m.templates.Add(xr, map[string]string{ref: tmpl})
}

// secret returns the Secret k as last read, if it was read at
// resourceVersion rv or later (see mirror.AtLeast), as the tracker's
// informer shows it. The Secret must not be modified.
func (m *memo) secret(k secret.Key, rv string) (*corev1.Secret, bool) {
	if rv == "" {
		return nil, false
	}
	v, ok := m.secrets.Get(k)
	if !ok {
		return nil, false
	}
	s := v.(*corev1.Secret) //nolint:forcetypeassert // Only Secrets are stored.
	if !mirror.AtLeast(s.ResourceVersion, rv) {
		return nil, false
	}
	return s, true
}

// putSecret records the Secret k as read: its resourceVersion, type, owner
// references and data.
func (m *memo) putSecret(k secret.Key, s *corev1.Secret) {
	m.secrets.Add(k, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion,
			OwnerReferences: slices.Clone(s.OwnerReferences),
		},
		Type: s.Type,
		Data: maps.Clone(s.Data),
	})
}

// forget drops what is recorded for a gone XR.
func (m *memo) forget(xr types.UID) {
	m.conflicts.Remove(xr)
	m.templates.Remove(xr)
	m.handOvers.Remove(xr)
}

// forget drops what is recorded for a gone XR.
func (r *Reconciler) forget(uid types.UID) {
	if uid == "" {
		return
	}
	r.tracker.Forget(uid)
	r.memo.forget(uid)
}
