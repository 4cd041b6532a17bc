package claim

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/apply"
	"github.com/loomxr/loom/pkg/condition"
)

// Well-known keys, as Crossplane v1 defines them.
const (
	// FieldManager is the binder's server-side-apply field manager.
	FieldManager = "loom-binder"

	// Finalizer holds a claim until its composite resource is deleted or
	// released.
	Finalizer = "finalizer.apiextensions.crossplane.io"

	// LabelClaimName and LabelClaimNamespace name the claim on its
	// composite resource.
	LabelClaimName      = "crossplane.io/claim-name"
	LabelClaimNamespace = "crossplane.io/claim-namespace"

	// AnnotationExternalName is the external name of a resource.
	AnnotationExternalName = "crossplane.io/external-name"

	// AnnotationPaused stops the binder from reconciling a claim when "true".
	AnnotationPaused = "crossplane.io/paused"
)

// Reclaim policies of a claim or composite resource (spec.reclaimPolicy).
// Crossplane v1 has no such field; Loom adds it, optional, defaulting to
// Delete, which is v1's behaviour.
const (
	// ReclaimDelete deletes the composite resource with its claim.
	ReclaimDelete = "Delete"

	// ReclaimRetain releases the composite resource when its claim is
	// deleted: its claimRef is cleared and a new claim may bind it.
	ReclaimRetain = "Retain"
)

// claimOnlySpecFields are claim spec fields that never propagate to the
// composite resource: the claim's own machinery (Crossplane v1's claim spec
// properties minus the propagated ones), the composite-only machinery a claim
// must not smuggle through preserve-unknown-fields, and Loom's reclaimPolicy.
// compositionRevisionRef is handled apart: it propagates only under the
// Manual update policy.
var claimOnlySpecFields = []string{ //nolint:gochecknoglobals // Treated as a constant.
	"compositeDeletePolicy",
	"resourceRef",
	"writeConnectionSecretToRef",
	"publishConnectionDetailsTo",
	"claimRef",
	"resourceRefs",
	"reclaimPolicy",
}

// compositeOnlyStatusFields are composite resource status fields that are
// machinery of the composite resource and are not copied to its claim. The
// claim keeps conditions of its own.
var compositeOnlyStatusFields = []string{ //nolint:gochecknoglobals // Treated as a constant.
	"conditions",
	"connectionDetails",
	"claimConditionTypes",
	"watchedResourceRefs",
}

// A Reference names an object by API version, kind, namespace and name, the
// shape of a composite resource's spec.claimRef and of a claim's
// spec.resourceRef (which has no namespace).
type Reference struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

// String returns namespace/name, or name for a cluster-scoped object.
func (r Reference) String() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// refersTo reports whether r names the same object as other, ignoring the
// API version (the same object is served at several versions).
func (r Reference) refersTo(other Reference) bool {
	g1 := schema.FromAPIVersionAndKind(r.APIVersion, r.Kind).Group
	g2 := schema.FromAPIVersionAndKind(other.APIVersion, other.Kind).Group
	return g1 == g2 && r.Kind == other.Kind && r.Namespace == other.Namespace && r.Name == other.Name
}

func referenceAt(u *unstructured.Unstructured, fields ...string) *Reference {
	if u == nil {
		return nil
	}
	m, ok, _ := unstructured.NestedMap(u.Object, fields...)
	if !ok {
		return nil
	}
	s := func(k string) string { v, _ := m[k].(string); return v }
	r := &Reference{APIVersion: s("apiVersion"), Kind: s("kind"), Namespace: s("namespace"), Name: s("name")}
	if r.Name == "" {
		return nil
	}
	return r
}

// ClaimRef returns the claim a composite resource is bound to, or nil.
func ClaimRef(xr *unstructured.Unstructured) *Reference { return referenceAt(xr, "spec", "claimRef") }

// ResourceRef returns the composite resource a claim names, or nil.
func ResourceRef(cm *unstructured.Unstructured) *Reference {
	return referenceAt(cm, "spec", "resourceRef")
}

// referenceTo returns a reference to obj.
func referenceTo(obj *unstructured.Unstructured) Reference {
	return Reference{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// BoundTo reports whether xr's claimRef names cm.
func BoundTo(xr, cm *unstructured.Unstructured) bool {
	ref := ClaimRef(xr)
	return ref != nil && ref.refersTo(referenceTo(cm))
}

// isReserved reports whether a label or annotation key belongs to
// Kubernetes (a prefix ending in kubernetes.io or k8s.io), such as
// kubectl.kubernetes.io/last-applied-configuration, and so must not be
// copied from a claim to its composite resource.
func isReserved(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	return strings.HasSuffix(prefix, "kubernetes.io") || strings.HasSuffix(prefix, "k8s.io")
}

func withoutReserved(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		if !isReserved(k) {
			out[k] = v
		}
	}
	return out
}

func nestedString(u *unstructured.Unstructured, fields ...string) string {
	if u == nil {
		return ""
	}
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

// updatePolicy returns the composition update policy in force: the claim's,
// else the composite resource's, else the XRD's default, else Automatic.
func updatePolicy(cm, xr *unstructured.Unstructured, d *xv1.CompositeResourceDefinition) xv1.UpdatePolicy {
	if p := nestedString(cm, "spec", "compositionUpdatePolicy"); p != "" {
		return xv1.UpdatePolicy(p)
	}
	if p := nestedString(xr, "spec", "compositionUpdatePolicy"); p != "" {
		return xv1.UpdatePolicy(p)
	}
	if d.Spec.DefaultCompositionUpdatePolicy != nil && *d.Spec.DefaultCompositionUpdatePolicy != "" {
		return *d.Spec.DefaultCompositionUpdatePolicy
	}
	return xv1.UpdateAutomatic
}

// ReclaimPolicy returns the reclaim policy in force when cm is deleted: the
// claim's spec.reclaimPolicy, else the composite resource's, else Delete.
func ReclaimPolicy(cm, xr *unstructured.Unstructured) string {
	if p := nestedString(cm, "spec", "reclaimPolicy"); p != "" {
		return p
	}
	if p := nestedString(xr, "spec", "reclaimPolicy"); p != "" {
		return p
	}
	return ReclaimDelete
}

// DeletePolicy returns the composite delete policy in force when cm is
// deleted: the claim's spec.compositeDeletePolicy, else the XRD's default,
// else Background.
func DeletePolicy(cm *unstructured.Unstructured, d *xv1.CompositeResourceDefinition) xv1.CompositeDeletePolicy {
	if p := nestedString(cm, "spec", "compositeDeletePolicy"); p != "" {
		return xv1.CompositeDeletePolicy(p)
	}
	if d != nil && d.Spec.DefaultCompositeDeletePolicy != nil {
		return *d.Spec.DefaultCompositeDeletePolicy
	}
	return xv1.CompositeDeleteBackground
}

// CompositeIntent returns the binder's fully specified server-side-apply
// intent for the composite resource bound to claim cm, named by cm's
// spec.resourceRef. xr is the composite resource as it is now, or nil if it
// does not exist yet.
//
// As Crossplane v1: the claim's labels and annotations, except Kubernetes'
// own, plus the claim-name and claim-namespace labels; the composite
// resource's own external name if it has one, else the claim's; the claim's
// spec minus claim-only fields (compositionRef is left out when the XRD
// enforces one, compositionRevisionRef unless the update policy is Manual);
// and a claimRef to cm. The intent always states compositionUpdatePolicy
// (see updatePolicy): the API server defaults it when the binder creates
// the composite resource and records the default as the binder's, so an
// intent without it would remove it and cost every claim an apply.
func CompositeIntent(cm, xr *unstructured.Unstructured, d *xv1.CompositeResourceDefinition) *unstructured.Unstructured {
	in := &unstructured.Unstructured{Object: map[string]any{}}
	in.SetGroupVersionKind(d.GetCompositeGroupVersionKind())
	if ref := ResourceRef(cm); ref != nil {
		in.SetName(ref.Name)
	}

	labels := withoutReserved(cm.GetLabels())
	labels[LabelClaimName] = cm.GetName()
	labels[LabelClaimNamespace] = cm.GetNamespace()
	in.SetLabels(labels)

	annotations := withoutReserved(cm.GetAnnotations())
	if xr != nil {
		if en, ok := xr.GetAnnotations()[AnnotationExternalName]; ok {
			annotations[AnnotationExternalName] = en
		}
	}
	if len(annotations) > 0 {
		in.SetAnnotations(annotations)
	}

	spec := map[string]any{}
	if s, ok, _ := unstructured.NestedMap(cm.Object, "spec"); ok {
		spec = s
	}
	for _, f := range claimOnlySpecFields {
		delete(spec, f)
	}
	if d.Spec.EnforcedCompositionRef != nil {
		delete(spec, "compositionRef")
	}
	policy := updatePolicy(cm, xr, d)
	spec["compositionUpdatePolicy"] = string(policy)
	if policy != xv1.UpdateManual {
		delete(spec, "compositionRevisionRef")
	}
	self := referenceTo(cm)
	spec["claimRef"] = map[string]any{
		"apiVersion": self.APIVersion,
		"kind":       self.Kind,
		"namespace":  self.Namespace,
		"name":       self.Name,
	}
	in.Object["spec"] = spec
	return in
}

// Bind returns a copy of cm bound to a composite resource of the XRD's kind
// named name: spec.resourceRef names it and the finalizer is present. It
// reports whether that changed cm. An existing resourceRef keeps its name;
// only its missing apiVersion and kind are filled in.
func Bind(cm *unstructured.Unstructured, d *xv1.CompositeResourceDefinition, name string) (*unstructured.Unstructured, bool) {
	out := cm.DeepCopy()
	gvk := d.GetCompositeGroupVersionKind()
	ref := map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "name": name}
	if cur := ResourceRef(cm); cur != nil {
		ref["name"] = cur.Name
		if cur.APIVersion != "" {
			ref["apiVersion"] = cur.APIVersion
		}
		if cur.Kind != "" {
			ref["kind"] = cur.Kind
		}
	}
	_ = unstructured.SetNestedMap(out.Object, ref, "spec", "resourceRef")
	if !hasFinalizer(out) {
		out.SetFinalizers(append(out.GetFinalizers(), Finalizer))
	}
	return out, !apply.Equal(cm.Object, out.Object)
}

func hasFinalizer(u *unstructured.Unstructured) bool {
	for _, f := range u.GetFinalizers() {
		if f == Finalizer {
			return true
		}
	}
	return false
}

// withoutFinalizer returns a copy of cm without the binder's finalizer.
func withoutFinalizer(cm *unstructured.Unstructured) *unstructured.Unstructured {
	out := cm.DeepCopy()
	var keep []string
	for _, f := range out.GetFinalizers() {
		if f != Finalizer {
			keep = append(keep, f)
		}
	}
	out.SetFinalizers(keep)
	return out
}

// BackPropagate returns a copy of cm with what flows from its composite
// resource xr back to the claim, as Crossplane v1 does, and reports whether
// that changed cm: xr's external name; xr's compositionRef if the claim has
// none, or always when the XRD enforces one; xr's compositionRevisionSelector
// if the claim has none; and xr's compositionRevisionRef under the Automatic
// update policy.
func BackPropagate(cm, xr *unstructured.Unstructured, d *xv1.CompositeResourceDefinition) (*unstructured.Unstructured, bool) {
	out := cm.DeepCopy()
	if en, ok := xr.GetAnnotations()[AnnotationExternalName]; ok && en != "" {
		a := out.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[AnnotationExternalName] = en
		out.SetAnnotations(a)
	}
	copyField := func(field string, when func(claimHas bool) bool) {
		v, ok, _ := unstructured.NestedFieldCopy(xr.Object, "spec", field)
		if !ok || v == nil {
			return
		}
		_, claimHas, _ := unstructured.NestedFieldNoCopy(cm.Object, "spec", field)
		if when(claimHas) {
			_ = unstructured.SetNestedField(out.Object, v, "spec", field)
		}
	}
	copyField("compositionRef", func(claimHas bool) bool { return !claimHas || d.Spec.EnforcedCompositionRef != nil })
	copyField("compositionRevisionSelector", func(claimHas bool) bool { return !claimHas })
	if p := nestedString(xr, "spec", "compositionUpdatePolicy"); p == "" || p == string(xv1.UpdateAutomatic) {
		copyField("compositionRevisionRef", func(bool) bool { return true })
	}
	return out, !apply.Equal(cm.Object, out.Object)
}

// statusFields returns the status fields a claim mirrors from src (its
// composite resource's status, or its own when the composite resource could
// not be read): everything but composite machinery and connection details.
func statusFields(src *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	if src == nil {
		return out
	}
	s, ok, _ := unstructured.NestedMap(src.Object, "status")
	if !ok {
		return out
	}
	for k, v := range s {
		out[k] = v
	}
	for _, f := range compositeOnlyStatusFields {
		delete(out, f)
	}
	return out
}

// StatusIntent returns the binder's fully specified status apply intent for
// claim cm: the status fields mirrored from src (see statusFields), the
// supplied conditions, already rendered (see condition.List), and
// connectionDetails.lastPublishedTime (see lastPublished).
func StatusIntent(cm, src *unstructured.Unstructured, conditions []any) *unstructured.Unstructured {
	in := &unstructured.Unstructured{Object: map[string]any{}}
	in.SetGroupVersionKind(cm.GroupVersionKind())
	in.SetNamespace(cm.GetNamespace())
	in.SetName(cm.GetName())
	status := statusFields(src)
	status["conditions"] = conditions
	if t := lastPublished(cm, src); t != "" {
		status["connectionDetails"] = map[string]any{"lastPublishedTime": t}
	}
	in.Object["status"] = status
	return in
}

// lastPublished returns the claim's status.connectionDetails.lastPublishedTime
// as the binder writes it with the rest of the claim's status, so that the
// claim's status is written once rather than once by the binder and once by
// the secrets service: the later of the claim's own value and, when the
// claim asks for a connection Secret (spec.writeConnectionSecretToRef) and
// its XR src is Ready (the secrets service copies the XR's Secret to the
// claim's once the XR is Ready, as Crossplane does) or was published to the
// claim before, the XR's. The XR's value is when the XR's connection Secret
// last changed, which is when the claim's changes too. A claim's own value
// is always kept (a claim adopted from Crossplane keeps Crossplane's time);
// "" means the claim has none.
func lastPublished(cm, src *unstructured.Unstructured) string {
	cur, _, _ := unstructured.NestedString(cm.Object, "status", "connectionDetails", "lastPublishedTime")
	if src == nil || src == cm || !asksForSecret(cm) {
		return cur
	}
	xr, _, _ := unstructured.NestedString(src.Object, "status", "connectionDetails", "lastPublishedTime")
	if xr == "" || (cur == "" && !condition.IsTrue(src, common.TypeReady)) {
		return cur
	}
	return later(cur, xr)
}

// asksForSecret reports whether claim cm asks for a connection Secret
// (spec.writeConnectionSecretToRef).
func asksForSecret(cm *unstructured.Unstructured) bool {
	return nestedString(cm, "spec", "writeConnectionSecretToRef", "name") != ""
}

// later returns the later of two RFC 3339 times; an unparsable one loses.
func later(a, b string) string {
	ta, errA := time.Parse(time.RFC3339, a)
	tb, errB := time.Parse(time.RFC3339, b)
	switch {
	case errA != nil:
		return b
	case errB != nil || !tb.After(ta):
		return a
	}
	return b
}
