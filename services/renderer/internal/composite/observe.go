package composite

import (
	"context"
	"fmt"
	"slices"
	"strings"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apply"
	kitkube "github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/xcrd"
)

// A ref is one entry of an XR's spec.resourceRefs.
type ref struct {
	APIVersion, Kind, Namespace, Name string
}

func (r ref) gvk() schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return gv.WithKind(r.Kind)
}

// currentRefs returns the XR's spec.resourceRefs.
func currentRefs(st *state) []ref {
	raw, _, _ := unstructured.NestedSlice(st.xr.Object, st.path(xcrd.FieldResourceRefs)...)
	out := make([]ref, 0, len(raw))
	for _, e := range raw {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		s := func(k string) string { v, _ := m[k].(string); return v }
		out = append(out, ref{APIVersion: s("apiVersion"), Kind: s("kind"), Namespace: s("namespace"), Name: s("name")})
	}
	return out
}

// observe reads the composed resources the XR references, keyed by their
// composition resource name. A reference to a resource that is gone, that
// another controller controls, or that has no composition resource name is
// skipped: the render then treats its template as not yet created (and
// Kubernetes refuses a second controller should it try).
func (r *Reconciler) observe(ctx context.Context, st *state) (map[string]*unstructured.Unstructured, error) {
	refs := currentRefs(st)
	out := make(map[string]*unstructured.Unstructured, len(refs))
	for _, rf := range refs {
		if rf.APIVersion == "" || rf.Kind == "" || rf.Name == "" {
			continue
		}
		ns := rf.Namespace
		if st.namespaced() {
			ns = st.xr.GetNamespace()
		}
		// The renderer writes composed resources with server-side apply
		// only: any version the read path holds will do.
		u, err := r.client.Get(kitkube.Guarded(ctx), rf.gvk(), ns, rf.Name)
		if kerrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot get composed resource %s %q: %w", rf.Kind, rf.Name, err)
		}
		if c := metav1.GetControllerOf(u); c == nil || c.UID != st.xr.GetUID() {
			r.log.Debug("Ignoring a referenced resource this composite resource does not control", "kind", rf.Kind, "name", rf.Name, "xr", st.xr.GetName())
			continue
		}
		name := u.GetAnnotations()[v1.AnnotationCompositionResourceName]
		if name == "" {
			r.log.Debug("Ignoring a referenced resource without a composition resource name", "kind", rf.Kind, "name", rf.Name, "xr", st.xr.GetName())
			continue
		}
		if _, dup := out[name]; dup {
			continue
		}
		out[name] = u
	}
	return out, nil
}

// resourceRefs returns the XR's resourceRefs after this render (every
// resource it applies, every observed one it leaves as it is, and the doomed
// ones until they are gone), sorted, and whether they differ from the XR's
// current ones.
func resourceRefs(st *state, out *rendered, doomed map[string]*unstructured.Unstructured) ([]any, bool) {
	objs := make([]*unstructured.Unstructured, 0, len(out.resources)+len(doomed))
	for _, c := range out.resources {
		o := c.desired
		if o == nil {
			o = c.observed
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	for _, o := range doomed {
		objs = append(objs, o)
	}
	var refs []ref
	for _, o := range objs {
		rf := ref{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
		if st.namespaced() {
			rf.Namespace = ""
		}
		refs = append(refs, rf)
	}
	slices.SortFunc(refs, func(a, b ref) int {
		return strings.Compare(a.APIVersion+"\x00"+a.Kind+"\x00"+a.Name+"\x00"+a.Namespace, b.APIVersion+"\x00"+b.Kind+"\x00"+b.Name+"\x00"+b.Namespace)
	})
	refs = slices.Compact(refs)
	list := make([]any, 0, len(refs))
	for _, rf := range refs {
		m := map[string]any{"apiVersion": rf.APIVersion, "kind": rf.Kind, "name": rf.Name}
		if rf.Namespace != "" {
			m["namespace"] = rf.Namespace
		}
		list = append(list, m)
	}
	cur, _, _ := unstructured.NestedSlice(st.xr.Object, st.path(xcrd.FieldResourceRefs)...)
	cur = normalizeRefs(cur)
	if sameRefs(cur, list) {
		// Crossplane lists an XR's resources in template order, Loom by
		// name: an adopted XR keeps its order rather than cost a write.
		return cur, false
	}
	return list, true
}

// sameRefs reports whether a and b hold the same references, in any order.
func sameRefs(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
	for _, x := range a {
		found := false
		for i, y := range b {
			if !used[i] && apply.Equal(x, y) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// normalizeRefs drops empty fields from references, as resourceRefs writes
// them.
func normalizeRefs(in []any) []any {
	out := make([]any, 0, len(in))
	for _, e := range in {
		m, ok := e.(map[string]any)
		if !ok {
			out = append(out, e)
			continue
		}
		n := make(map[string]any, len(m))
		for k, v := range m {
			if s, ok := v.(string); ok && s == "" {
				continue
			}
			n[k] = v
		}
		out = append(out, n)
	}
	return out
}
