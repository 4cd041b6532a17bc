package object

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationReadsStatus is kept on cached Compositions and
// CompositionRevisions: "true" when a render with them may read the XR's
// status (a function pipeline, which may read anything; a patch of type
// FromCompositeFieldPath or CombineFromComposite, in a template, a patch
// set or the environment, or an EnvironmentConfig selector, reading a path
// under status), else "false". A render that reads none of the XR's status
// renders the same after the renderer's own write of it (a
// ToCompositeFieldPath patch's result, say). Like the digest it exists only
// in the watcher's cache.
const AnnotationReadsStatus = "loom.dev/watcher-reads-status"

// readsStatus returns the AnnotationReadsStatus value of a Composition or
// CompositionRevision. An object that was cached already (it has the
// annotation and no spec.compositeTypeRef, which every Composition has and
// the cached shape drops) keeps its value.
func readsStatus(u *unstructured.Unstructured) string {
	if v, ok := cachedValue(u, AnnotationReadsStatus); ok {
		return v
	}
	spec, _ := u.Object["spec"].(map[string]any)
	return strconv.FormatBool(specReadsStatus(spec))
}

// cachedValue returns the value of a watcher annotation of a Composition or
// CompositionRevision that was cached already: it has the annotation and
// no spec.compositeTypeRef, which every Composition has and the cached
// shape drops.
func cachedValue(u *unstructured.Unstructured, annotation string) (string, bool) {
	v, ok := u.GetAnnotations()[annotation]
	if !ok {
		return "", false
	}
	spec, _ := u.Object["spec"].(map[string]any)
	_, full := spec["compositeTypeRef"]
	return v, !full
}

func specReadsStatus(spec map[string]any) bool {
	if spec["mode"] == "Pipeline" || len(asList(spec["pipeline"])) > 0 {
		return true
	}
	var patches []any
	for _, r := range asList(spec["resources"]) {
		patches = append(patches, asList(asMap(r)["patches"])...)
	}
	for _, ps := range asList(spec["patchSets"]) {
		patches = append(patches, asList(asMap(ps)["patches"])...)
	}
	env := asMap(spec["environment"])
	patches = append(patches, asList(env["patches"])...)
	for _, p := range patches {
		if patchReadsStatus(asMap(p)) {
			return true
		}
	}
	return selectorReadsStatus(env["environmentConfigs"])
}

// patchReadsStatus reports whether a patch reads a path under the XR's
// status. A patch without a type is a FromCompositeFieldPath patch.
func patchReadsStatus(p map[string]any) bool {
	switch t, _ := p["type"].(string); t {
	case "", "FromCompositeFieldPath":
		return statusPath(p["fromFieldPath"])
	case "CombineFromComposite":
		for _, v := range asList(asMap(p["combine"])["variables"]) {
			if statusPath(asMap(v)["fromFieldPath"]) {
				return true
			}
		}
	}
	return false
}

// selectorReadsStatus reports whether anything under v names a
// valueFromFieldPath under status (an EnvironmentConfig selector's label
// read from the XR).
func selectorReadsStatus(v any) bool {
	switch tv := v.(type) {
	case map[string]any:
		for k, e := range tv {
			if k == "valueFromFieldPath" && statusPath(e) || selectorReadsStatus(e) {
				return true
			}
		}
	case []any:
		for _, e := range tv {
			if selectorReadsStatus(e) {
				return true
			}
		}
	}
	return false
}

func statusPath(v any) bool {
	p, _ := v.(string)
	return p == "status" || strings.HasPrefix(p, "status.") || strings.HasPrefix(p, "status[")
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// ReadsStatus reports whether a cached Composition or CompositionRevision
// may read the XR's status in a render (see AnnotationReadsStatus); true
// when that is not known.
func ReadsStatus(u *unstructured.Unstructured) bool {
	return u.GetAnnotations()[AnnotationReadsStatus] != "false"
}
