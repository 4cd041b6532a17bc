package object

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationDetailsFromStatus is kept on cached Compositions and
// CompositionRevisions: the names of the templates (spec.resources[].name)
// whose connection details read a composed resource's status (type
// FromFieldPath, or no type and a fromFieldPath, with a path under status),
// sorted and comma-separated; "*" when any composed resource's status may
// be read (mode Pipeline, whose functions' details the renderer hands over,
// or such a detail in a template without a name). The secrets service reads
// a composed resource's status for nothing else, so a change of the status
// alone of a resource of another template is no news to it. Like the digest
// it exists only in the watcher's cache.
const AnnotationDetailsFromStatus = "loom.dev/watcher-details-from-status"

// anyTemplate is the AnnotationDetailsFromStatus value that names every
// template.
const anyTemplate = "*"

// detailsFromStatus returns the AnnotationDetailsFromStatus value of a
// Composition or CompositionRevision. An object that was cached already
// (it has the annotation and no spec.compositeTypeRef, which every
// Composition has and the cached shape drops) keeps its value.
func detailsFromStatus(u *unstructured.Unstructured) string {
	if v, ok := cachedValue(u, AnnotationDetailsFromStatus); ok {
		return v
	}
	spec, _ := u.Object["spec"].(map[string]any)
	if spec["mode"] == "Pipeline" || len(asList(spec["pipeline"])) > 0 {
		return anyTemplate
	}
	var names []string
	for _, r := range asList(spec["resources"]) {
		t := asMap(r)
		if !slices.ContainsFunc(asList(t["connectionDetails"]), detailFromStatus) {
			continue
		}
		name, _ := t["name"].(string)
		if name == "" {
			return anyTemplate
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ",")
}

// detailFromStatus reports whether a connection detail reads a path under
// the composed resource's status. A detail without a type is a
// FromFieldPath detail when it has a fromFieldPath.
func detailFromStatus(d any) bool {
	m := asMap(d)
	switch t, _ := m["type"].(string); t {
	case "", "FromFieldPath":
		return statusPath(m["fromFieldPath"])
	}
	return false
}

// DetailsFromStatus reports whether the connection details of a cached
// Composition or CompositionRevision may read the status of a composed
// resource of the named template (see AnnotationDetailsFromStatus); true
// when that is not known (no annotation, no template name).
func DetailsFromStatus(u *unstructured.Unstructured, template string) bool {
	v, ok := u.GetAnnotations()[AnnotationDetailsFromStatus]
	if !ok || v == anyTemplate || template == "" {
		return true
	}
	return slices.Contains(strings.Split(v, ","), template)
}
