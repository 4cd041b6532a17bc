package composite

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	kitkube "github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/services/secrets/internal/connection"
	"github.com/loomxr/loom/services/secrets/internal/secret"
	"github.com/loomxr/loom/services/secrets/internal/staging"
	"github.com/loomxr/loom/services/secrets/internal/tracker"
)

// observe reads the XR's composed resources and the connection Secrets the
// Composition needs (for a pipeline: the staging Secret), and records them
// with the tracker first.
func (r *Reconciler) observe(ctx context.Context, st *xrState) ([]connection.Observed, error) {
	refs, _, _ := unstructured.NestedSlice(st.xr.Object, "spec", "resourceRefs")
	var (
		out     []connection.Observed
		keys    []secret.Key
		uids    []types.UID
		secrets = map[int]secret.Key{}
	)
	for _, ref := range refs {
		m, ok := ref.(map[string]any)
		if !ok {
			continue
		}
		apiVersion, _ := m["apiVersion"].(string)
		kind, _ := m["kind"].(string)
		name, _ := m["name"].(string)
		ns, _ := m["namespace"].(string)
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil || kind == "" || name == "" {
			continue
		}
		refKey := apiVersion + "/" + kind + "/" + ns + "/" + name
		if tmpl, ok := r.memo.template(st.xr.GetUID(), refKey); ok && !contributes(st.comp.Plan, tmpl) {
			// Its template contributes nothing: no need to read it.
			continue
		}
		// Never written here; what it names is read afresh (Secrets are
		// never mirrored), and a newer version brings an event of its own.
		obj, err := r.client.Get(kitkube.Guarded(ctx), gv.WithKind(kind), ns, name)
		if kerrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot get composed resource %s %q: %w", kind, name, err)
		}
		if c := metav1.GetControllerOfNoCopy(obj); c == nil || c.UID != st.xr.GetUID() {
			// Not this XR's (Crossplane ignores such references too).
			continue
		}
		tmpl := obj.GetAnnotations()[v1.AnnotationCompositionResourceName]
		if tmpl == "" {
			continue
		}
		r.memo.putTemplate(st.xr.GetUID(), refKey, tmpl)
		uids = append(uids, obj.GetUID())
		o := connection.Observed{Name: tmpl, Object: obj.Object, Prefix: obj.GetAnnotations()[connection.AnnotationPrefix]}
		sn, _, _ := unstructured.NestedString(obj.Object, "spec", fieldWriteConnection, "name")
		sns, _, _ := unstructured.NestedString(obj.Object, "spec", fieldWriteConnection, "namespace")
		if sns == "" {
			sns = obj.GetNamespace()
		}
		if sn != "" && sns != "" {
			o.HasSecretRef = true
			k := secret.Key{Namespace: sns, Name: sn}
			keys = append(keys, k)
			if needsSecret(st.comp.Plan, tmpl) {
				secrets[len(out)] = k
			}
		}
		out = append(out, o)
	}
	// Record before reading, so that a Secret that changes after the read
	// requeues the XR.
	st.deps = tracker.Deps{Secrets: []secret.Key{st.key}, Composed: uids, Observed: keys, Pipeline: st.comp.Plan.Pipeline}
	if st.comp.Plan.Pipeline {
		st.deps.Secrets = append(st.deps.Secrets, staging.Key(r.staging, st.xr.GetUID()))
	}
	r.tracker.Track(st.target, st.deps)
	if st.comp.Plan.Pipeline {
		return out, r.readStaging(ctx, st)
	}
	for i, k := range secrets {
		m, ok := r.tracker.Metadata(k)
		if !ok {
			// It does not exist (yet): its creation requeues the XR.
			continue
		}
		s, err := r.readSecret(ctx, k, m.ResourceVersion)
		if kerrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot get connection Secret %s of composed resource %q: %w", k, out[i].Name, err)
		}
		out[i].Secret = s.Data
		if out[i].Secret == nil {
			out[i].Secret = map[string][]byte{}
		}
	}
	return out, nil
}

// readStaging reads what a Pipeline XR's functions returned from its
// staging Secret. It is read even when the tracker's cache does not know it
// yet: the requeue that follows its creation may outrun the cache.
func (r *Reconciler) readStaging(ctx context.Context, st *xrState) error {
	k := staging.Key(r.staging, st.xr.GetUID())
	rv := ""
	if m, ok := r.tracker.Metadata(k); ok {
		rv = m.ResourceVersion
	}
	s, err := r.readSecret(ctx, k, rv)
	if kerrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot get staging Secret %s of %s %q: %w", k, st.xr.GetKind(), st.xr.GetName(), err)
	}
	if c := metav1.GetControllerOfNoCopy(s); c == nil || c.UID != st.xr.GetUID() {
		// Not this XR's: a Secret of the same name it must not trust.
		return nil
	}
	st.returned, st.staged = s.Data, true
	return nil
}

// readSecret returns the Secret k: as last read, when that was at rv (the
// version the tracker's informer shows; empty for one it does not know) or
// later, else with a GET, which is remembered. A Secret changes rarely and
// is read by every reconcile of its XR, so most reads cost no request; a
// change is seen by the informer, whose newer version makes the next read a
// GET. The Secret must not be modified.
func (r *Reconciler) readSecret(ctx context.Context, k secret.Key, rv string) (*corev1.Secret, error) {
	if s, ok := r.memo.secret(k, rv); ok {
		return s, nil
	}
	s, err := r.client.GetSecret(ctx, k.Namespace, k.Name)
	if err != nil {
		return nil, err
	}
	r.memo.putSecret(k, s)
	return s, nil
}

// contributes reports whether the resource of a template can contribute
// connection details: always when aggregating, otherwise when its template
// lists some. A pipeline's resources are always read: their Secrets are
// tracked, because the functions observe them.
func contributes(p connection.Plan, tmpl string) bool {
	if p.Aggregate || p.Pipeline {
		return true
	}
	for _, t := range p.Templates {
		if t.Name == tmpl {
			return len(t.Details) > 0
		}
	}
	return false
}

// needsSecret reports whether the connection details need the Secret of the
// template's resource: always when aggregating, otherwise when the template
// reads a key of it.
func needsSecret(p connection.Plan, tmpl string) bool {
	if p.Aggregate {
		return true
	}
	for _, t := range p.Templates {
		if t.Name != tmpl {
			continue
		}
		for _, d := range t.Details {
			if d.GetType() == v1.ConnectionDetailTypeFromConnectionSecretKey {
				return true
			}
		}
	}
	return false
}
