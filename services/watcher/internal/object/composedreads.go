package object

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationReadsComposedSpec is kept on cached Compositions and
// CompositionRevisions: the names of the templates (spec.resources[].name)
// whose render reads a composed resource outside its status: a patch that
// reads the composed resource (ToCompositeFieldPath, CombineToComposite,
// ToEnvironmentFieldPath, CombineToEnvironment), in the template or a
// PatchSet it includes, or a readiness check, with a path not under status;
// sorted and comma-separated. It is "*" when any composed resource may be
// read whole (mode Pipeline, whose functions see observed resources as they
// are, or such a read in a template without a name). A change of another
// template's resource outside its status that the renderer did not write
// changes none of the render's inputs: what the binder writes (a resolved
// reference) is no news to the renderer then. Like the digest it exists
// only in the watcher's cache.
const AnnotationReadsComposedSpec = "loom.dev/watcher-reads-composed-spec"

// readsComposedSpec returns the AnnotationReadsComposedSpec value of a
// Composition or CompositionRevision. An object that was cached already
// keeps its value (see cachedValue).
func readsComposedSpec(u *unstructured.Unstructured) string {
	spec, _ := u.Object["spec"].(map[string]any)
	sets := map[string]bool{} // PatchSets that read composed resources outside status
	for _, ps := range asList(spec["patchSets"]) {
		m := asMap(ps)
		name, _ := m["name"].(string)
		sets[name] = slices.ContainsFunc(asList(m["patches"]), patchReadsComposedSpec)
	}
	return templatesWhere(u, AnnotationReadsComposedSpec, func(t map[string]any) bool {
		return templateReadsComposedSpec(t, sets)
	})
}

// templateReadsComposedSpec reports whether a template's patches (those of
// the PatchSets it includes too) or readiness checks read its composed
// resource outside status. sets says which PatchSets do; a PatchSet not in
// it counts as one that does.
func templateReadsComposedSpec(t map[string]any, sets map[string]bool) bool {
	for _, p := range asList(t["patches"]) {
		m := asMap(p)
		if m["type"] == "PatchSet" {
			name, _ := m["patchSetName"].(string)
			if reads, ok := sets[name]; reads || !ok {
				return true
			}
			continue
		}
		if patchReadsComposedSpec(p) {
			return true
		}
	}
	for _, c := range asList(t["readinessChecks"]) {
		m := asMap(c)
		switch ty, _ := m["type"].(string); ty {
		case "None", "MatchCondition":
			// None reads nothing; MatchCondition reads status.conditions.
		default:
			if !statusPath(m["fieldPath"]) {
				return true
			}
		}
	}
	return false
}

// patchReadsComposedSpec reports whether a patch reads its composed
// resource at a path not under status.
func patchReadsComposedSpec(p any) bool {
	m := asMap(p)
	switch t, _ := m["type"].(string); t {
	case "ToCompositeFieldPath", "ToEnvironmentFieldPath":
		return !statusPath(m["fromFieldPath"])
	case "CombineToComposite", "CombineToEnvironment":
		vars := asList(asMap(m["combine"])["variables"])
		return slices.ContainsFunc(vars, func(v any) bool { return !statusPath(asMap(v)["fromFieldPath"]) })
	}
	return false
}

// ReadsComposedSpec reports whether a render with a cached Composition or
// CompositionRevision may read a composed resource of the named template
// outside its status (see AnnotationReadsComposedSpec); true when that is
// not known (no annotation, no template name).
func ReadsComposedSpec(u *unstructured.Unstructured, template string) bool {
	return templateNamed(u, AnnotationReadsComposedSpec, template)
}
