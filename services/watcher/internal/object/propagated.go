package object

import (
	"hash/fnv"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// AnnotationPropagated is kept on cached XRs and claims: a digest of what
// the binder copies from an XR back to its claim (propagatedFields and the
// external name), so that the watcher can tell whether the renderer's
// write of an XR's spec (its resourceRefs, the revision it chose, the
// connection Secret's reference) leaves anything for the binder to copy:
// not when the XR's digest equals its claim's, the claim holding what the
// XR holds already (the binder names the Composition and revision on the
// claim when it binds). Like the metadata digest it exists only in the
// watcher's cache.
const AnnotationPropagated = "loom.dev/watcher-propagated-digest"

// propagatedFields are the spec fields the binder copies from an XR back to
// its claim (services/binder/internal/claim.BackPropagate).
var propagatedFields = []string{ //nolint:gochecknoglobals // Treated as a constant.
	"compositionRef", "compositionRevisionRef", "compositionRevisionSelector",
}

// propagatedSummary returns the AnnotationPropagated value of an XR or a
// claim. An object that was cached already (it has the annotation) keeps its
// value: the cached shape keeps only some of the fields.
func propagatedSummary(u *unstructured.Unstructured) string {
	if v, ok := u.GetAnnotations()[AnnotationPropagated]; ok {
		return v
	}
	spec, _ := u.Object["spec"].(map[string]any)
	h := fnv.New64a()
	for _, k := range propagatedFields {
		hashValue(h, spec[k])
	}
	// The binder copies a non-empty external name only: none and an
	// empty one are the same to it.
	hashValue(h, u.GetAnnotations()[xv1.AnnotationExternalName])
	return strconv.FormatUint(h.Sum64(), 16)
}
