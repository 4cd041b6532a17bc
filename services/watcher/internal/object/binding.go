package object

import (
	"hash/fnv"
	"maps"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationBinding is kept on cached XRs only, beside AnnotationStatus: a
// digest of the spec fields that the binder reads back from an XR to its
// claim or that bind the two (bindingFields), so that the watcher can tell
// a change of them from the renderer's own writes of the XR's spec
// (resourceRefs, the connection Secret's reference), which are no news to
// the claim (see BindingChanged). Like the digest it exists only in the
// watcher's cache.
const AnnotationBinding = "loom.dev/watcher-binding-digest"

// bindingFields are the XR spec fields the binder reads back to the claim
// (services/binder/internal/claim.BackPropagate) and the claim reference,
// each also under spec.crossplane (the Crossplane v2 layout).
var bindingFields = []string{ //nolint:gochecknoglobals // Treated as a constant.
	"claimRef", "compositionRef", "compositionRevisionRef", "compositionRevisionSelector", "compositionUpdatePolicy",
}

// bindingSummary returns the AnnotationBinding value of an XR. An object
// that was cached already (it has the annotation) keeps its value: the
// cached shape keeps only some of the fields.
func bindingSummary(u *unstructured.Unstructured) string {
	if v, ok := u.GetAnnotations()[AnnotationBinding]; ok {
		return v
	}
	spec, _ := u.Object["spec"].(map[string]any)
	xp, _ := spec["crossplane"].(map[string]any)
	h := fnv.New64a()
	for _, m := range []map[string]any{spec, xp} {
		hashValue(h, pick(m, bindingFields))
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// pick returns the entries of m under keys (nil values count as absent).
func pick(m map[string]any, keys []string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := m[k]; ok && v != nil {
			out[k] = v
		}
	}
	return out
}

// BindingChanged reports whether a change of an XR from old to cur may
// concern its claim beyond the status: a spec field the binder reads back
// (bindingFields), the labels, annotations or finalizers (Digest: the
// external name, say), or the deletion. True when either summary is
// unknown.
func BindingChanged(old, cur Meta) bool {
	return old.Binding == "" || cur.Binding == "" || old.Binding != cur.Binding ||
		old.Digest != cur.Digest || !maps.Equal(old.Labels, cur.Labels) || old.Deleting != cur.Deleting ||
		old.UID != cur.UID
}
