package object

import (
	"slices"
	"strings"

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

// AnnotationReadyRequired is kept on cached Compositions and
// CompositionRevisions: the names of the templates whose readiness checks
// require the composed resource's Ready condition to be True (a template
// without checks, whose default check is that one, or with a MatchCondition
// check of the Ready condition and status True among its checks); sorted and
// comma-separated. A resource of such a template that has no status yet is
// not ready, whatever else its checks say. Empty for mode Pipeline, whose
// functions judge readiness; a template without a name is never listed. Like
// the digest it exists only in the watcher's cache.
const AnnotationReadyRequired = "loom.dev/watcher-ready-required"

// readyRequired returns the AnnotationReadyRequired value of a Composition
// or CompositionRevision. An object that was cached already keeps its value
// (see cachedValue).
func readyRequired(u *unstructured.Unstructured) string {
	if v, ok := cachedValue(u, AnnotationReadyRequired); ok {
		return v
	}
	spec, _ := u.Object["spec"].(map[string]any)
	if spec["mode"] == "Pipeline" || len(asList(spec["pipeline"])) > 0 {
		return ""
	}
	var names []string
	for _, r := range asList(spec["resources"]) {
		t := asMap(r)
		name, _ := t["name"].(string)
		checks := asList(t["readinessChecks"])
		if name == "" || (len(checks) > 0 && !slices.ContainsFunc(checks, checksReadyTrue)) {
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ",")
}

// checksReadyTrue reports whether a readiness check is MatchCondition on
// the Ready condition with status True.
func checksReadyTrue(c any) bool {
	m := asMap(c)
	mc := asMap(m["matchCondition"])
	return m["type"] == "MatchCondition" && mc["type"] == "Ready" && mc["status"] == "True"
}

// ReadyRequired reports whether the readiness of a composed resource of the
// named template requires its Ready condition to be True, for a cached
// Composition or CompositionRevision (see AnnotationReadyRequired); false
// when that is not known (no annotation, no template name).
func ReadyRequired(u *unstructured.Unstructured, template string) bool {
	v, ok := u.GetAnnotations()[AnnotationReadyRequired]
	if !ok || template == "" {
		return false
	}
	return slices.Contains(strings.Split(v, ","), template)
}

// AnnotationStatusToSpec is kept on cached Compositions and
// CompositionRevisions, like AnnotationReadsComposedStatus: the names of the
// templates whose patches read the composed resource's status into what a
// render writes before the XR's status: the XR's spec or metadata
// (ToCompositeFieldPath or CombineToComposite to a path not under status)
// or the environment (ToEnvironmentFieldPath, CombineToEnvironment), in the
// template or a PatchSet it includes. It is "*" when any composed resource
// may be read whole (mode Pipeline, or such a patch in a template without
// a name). What other templates' patches read of a composed resource's
// status reaches only the XR's status, which the renderer writes with the
// rest of it (and not while the XR's first status waits). Like the digest
// it exists only in the watcher's cache.
const AnnotationStatusToSpec = "loom.dev/watcher-composed-status-to-spec"

// statusToSpec returns the AnnotationStatusToSpec value of a Composition
// or CompositionRevision. An object that was cached already keeps its value
// (see cachedValue).
func statusToSpec(u *unstructured.Unstructured) string {
	return templatesThatRead(u, AnnotationStatusToSpec, patchStatusToSpec, func(map[string]any) bool { return false })
}

// patchStatusToSpec reports whether a patch reads its composed resource's
// status into anything but the XR's status.
func patchStatusToSpec(p any) bool {
	if !patchReadsComposedStatus(p) {
		return false
	}
	m := asMap(p)
	switch t, _ := m["type"].(string); t {
	case "ToCompositeFieldPath", "CombineToComposite":
		to := m["toFieldPath"]
		if s, _ := to.(string); s == "" && t == "ToCompositeFieldPath" {
			// The toFieldPath defaults to the fromFieldPath.
			to = m["fromFieldPath"]
		}
		return !statusPath(to)
	}
	return true
}

// StatusToSpec reports whether a render with a cached Composition or
// CompositionRevision may read the status of a composed resource of the
// named template into the XR's spec or metadata or the environment (see
// AnnotationStatusToSpec); true when that is not known (no annotation, no
// template name).
func StatusToSpec(u *unstructured.Unstructured, template string) bool {
	return templateNamed(u, AnnotationStatusToSpec, template)
}
