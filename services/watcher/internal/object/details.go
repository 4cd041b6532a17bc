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
	return detailTemplates(u, AnnotationDetailsFromStatus, detailFromStatus)
}

// AnnotationDetailsFromSpec is kept on cached Compositions and
// CompositionRevisions like AnnotationDetailsFromStatus: the templates
// whose connection details read a composed resource outside its status (a
// FromFieldPath detail with a path not under status), or "*". A detail
// read from the resource's connection Secret needs only the Secret's
// reference, which only the render sets: so a change that another writer
// made outside the status of a resource of another template (the binder's
// resolved reference) is no news to the secrets service.
const AnnotationDetailsFromSpec = "loom.dev/watcher-details-from-spec"

// detailsFromSpec returns the AnnotationDetailsFromSpec value of a
// Composition or CompositionRevision.
func detailsFromSpec(u *unstructured.Unstructured) string {
	return detailTemplates(u, AnnotationDetailsFromSpec, detailFromSpec)
}

// detailTemplates returns the names of the templates of a Composition or
// CompositionRevision with a connection detail reads reports true of (see
// templatesWhere).
func detailTemplates(u *unstructured.Unstructured, annotation string, reads func(any) bool) string {
	return templatesWhere(u, annotation, func(t map[string]any) bool {
		return slices.ContainsFunc(asList(t["connectionDetails"]), reads)
	})
}

// templatesWhere returns the names of the templates of a Composition or
// CompositionRevision that match reports true of, sorted and
// comma-separated, or anyTemplate: for mode Pipeline, or when a template
// without a name matches (see AnnotationDetailsFromStatus). An object that
// was cached already (it has the annotation and no spec.compositeTypeRef,
// which every Composition has and the cached shape drops) keeps the value
// of its annotation.
func templatesWhere(u *unstructured.Unstructured, annotation string, match func(t map[string]any) bool) string {
	if v, ok := cachedValue(u, annotation); ok {
		return v
	}
	spec, _ := u.Object["spec"].(map[string]any)
	if spec["mode"] == "Pipeline" || len(asList(spec["pipeline"])) > 0 {
		return anyTemplate
	}
	var names []string
	for _, r := range asList(spec["resources"]) {
		t := asMap(r)
		if !match(t) {
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

// detailFromSpec reports whether a connection detail reads a path of the
// composed resource outside its status.
func detailFromSpec(d any) bool {
	m := asMap(d)
	switch t, _ := m["type"].(string); t {
	case "", "FromFieldPath":
		p, ok := m["fromFieldPath"].(string)
		return ok && p != "" && !statusPath(p)
	}
	return false
}

// DetailsFromSpec reports whether the connection details of a cached
// Composition or CompositionRevision may read a composed resource of the
// named template outside its status (see AnnotationDetailsFromSpec); true
// when that is not known (no annotation, no template name).
func DetailsFromSpec(u *unstructured.Unstructured, template string) bool {
	return templateNamed(u, AnnotationDetailsFromSpec, template)
}

// templateNamed reports whether the value of a templates annotation (see
// AnnotationDetailsFromStatus) names template; true when that is not known
// (no annotation, no template name).
func templateNamed(u *unstructured.Unstructured, annotation, template string) bool {
	v, ok := u.GetAnnotations()[annotation]
	if !ok || v == anyTemplate || template == "" {
		return true
	}
	return slices.Contains(strings.Split(v, ","), template)
}

// DetailsFromStatus reports whether the connection details of a cached
// Composition or CompositionRevision may read the status of a composed
// resource of the named template (see AnnotationDetailsFromStatus); true
// when that is not known (no annotation, no template name).
func DetailsFromStatus(u *unstructured.Unstructured, template string) bool {
	return templateNamed(u, AnnotationDetailsFromStatus, template)
}
