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
	return templatesThatRead(u, AnnotationReadsComposedSpec, patchReadsComposedSpec, func(c map[string]any) bool {
		switch ty, _ := c["type"].(string); ty {
		case "None", "MatchCondition":
			// None reads nothing; MatchCondition reads status.conditions.
			return false
		default:
			return !statusPath(c["fieldPath"])
		}
	})
}

// templatesThatRead returns the templatesWhere value of a Composition or
// CompositionRevision for the templates whose patches (those of the
// PatchSets they include too) or readiness checks read their composed
// resource as patchReads and checkReads tell. A PatchSet that is not there
// counts as one that reads.
func templatesThatRead(u *unstructured.Unstructured, annotation string, patchReads func(any) bool, checkReads func(map[string]any) bool) string {
	spec, _ := u.Object["spec"].(map[string]any)
	sets := map[string]bool{} // PatchSets that read composed resources
	for _, ps := range asList(spec["patchSets"]) {
		m := asMap(ps)
		name, _ := m["name"].(string)
		sets[name] = slices.ContainsFunc(asList(m["patches"]), patchReads)
	}
	return templatesWhere(u, annotation, func(t map[string]any) bool {
		for _, p := range asList(t["patches"]) {
			m := asMap(p)
			if m["type"] == "PatchSet" {
				name, _ := m["patchSetName"].(string)
				if reads, ok := sets[name]; reads || !ok {
					return true
				}
				continue
			}
			if patchReads(p) {
				return true
			}
		}
		return slices.ContainsFunc(asList(t["readinessChecks"]), func(c any) bool { return checkReads(asMap(c)) })
	})
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

// AnnotationReadsComposedStatus is kept on cached Compositions and
// CompositionRevisions, like AnnotationReadsComposedSpec: the names of the
// templates whose render reads a composed resource's status beyond its Ready
// condition: a patch that reads the composed resource under status (in the
// template or a PatchSet it includes), or a readiness check other than None
// and MatchCondition on the Ready condition, with a path under status. It is
// "*" when any composed resource may be read whole (mode Pipeline, or such a
// read in a template without a name). A change of another template's
// resource's status that leaves its Ready condition as it was (what a
// provider writes under status.atProvider, its Synced condition) changes
// none of the render's inputs.
const AnnotationReadsComposedStatus = "loom.dev/watcher-reads-composed-status"

// readsComposedStatus returns the AnnotationReadsComposedStatus value of a
// Composition or CompositionRevision. An object that was cached already
// keeps its value (see cachedValue).
func readsComposedStatus(u *unstructured.Unstructured) string {
	return templatesThatRead(u, AnnotationReadsComposedStatus, patchReadsComposedStatus, func(c map[string]any) bool {
		switch ty, _ := c["type"].(string); ty {
		case "None":
			return false
		case "MatchCondition":
			// The Ready condition is news to the renderer anyway.
			return asMap(c["matchCondition"])["type"] != "Ready"
		default:
			return statusPath(c["fieldPath"])
		}
	})
}

// patchReadsComposedStatus reports whether a patch reads its composed
// resource at a path under status.
func patchReadsComposedStatus(p any) bool {
	m := asMap(p)
	switch t, _ := m["type"].(string); t {
	case "ToCompositeFieldPath", "ToEnvironmentFieldPath":
		return statusPath(m["fromFieldPath"])
	case "CombineToComposite", "CombineToEnvironment":
		vars := asList(asMap(m["combine"])["variables"])
		return slices.ContainsFunc(vars, func(v any) bool { return statusPath(asMap(v)["fromFieldPath"]) })
	}
	return false
}

// ReadsComposedStatus reports whether a render with a cached Composition or
// CompositionRevision may read the status of a composed resource of the
// named template beyond its Ready condition (see
// AnnotationReadsComposedStatus); true when that is not known (no
// annotation, no template name).
func ReadsComposedStatus(u *unstructured.Unstructured, template string) bool {
	return templateNamed(u, AnnotationReadsComposedStatus, template)
}
