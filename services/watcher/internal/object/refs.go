package object

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/condition"
	"github.com/loomxr/loom/pkg/fieldpath"
)

// References says what a composed resource is to the ReferenceRules, as it
// is now: which of its changes the binder, which resolves references between
// an XR's composed resources, can act on.
type References struct {
	// Source is true when a rule for its kind (spec.for) finds a reference
	// or a selector on it: it has references to resolve.
	Source bool
	// Pending is true, for a source, when one of those has not resolved
	// yet (its value field is empty) or resolves again whenever a target
	// changes (policy Always, of the rule or of the reference or selector
	// itself).
	Pending bool
	// Target is true when a rule names its kind as a target and it shows
	// the condition the reference waits for (or the reference waits for
	// none): it may resolve a reference. A target that does not show it
	// cannot resolve anything yet; the change that shows it can.
	Target bool
}

// policyAlways is the resolve policy that resolves a reference again at
// every reconcile.
const policyAlways = "Always"

// ReferencesOf returns what u, a composed resource, is to rules (cached
// ReferenceRules, as the informer holds them). A rule that is not an
// unstructured object makes every part true; so does, for a source, a field
// path that cannot be read on u.
func ReferencesOf(rules []any, u *unstructured.Unstructured) References {
	all := References{Source: true, Pending: true, Target: true}
	gk := u.GroupVersionKind().GroupKind()
	var out References
	for _, r := range rules {
		rule, ok := r.(*unstructured.Unstructured)
		if !ok {
			return all
		}
		forKind := false
		if m, ok, _ := unstructured.NestedMap(rule.Object, "spec", "for"); ok {
			forKind = kindOf(m) == gk
		}
		refs, _, _ := unstructured.NestedSlice(rule.Object, "spec", "references")
		for _, e := range refs {
			ref, ok := e.(map[string]any)
			if !ok {
				return all
			}
			if forKind {
				src, pending := sourceOf(u, ref)
				out.Source = out.Source || src
				out.Pending = out.Pending || pending
			}
			if t, ok := ref["target"].(map[string]any); ok && kindOf(t) == gk {
				w, _ := ref["waitFor"].(map[string]any)
				ct := str(w, "conditionType")
				out.Target = out.Target || ct == "" || condition.IsTrue(u, common.ConditionType(ct))
			}
		}
	}
	return out
}

// sourceOf reports whether u holds the reference or selector of ref (a
// rule's reference), and whether it is pending: not resolved yet, or
// resolved again whenever a target changes.
func sourceOf(u *unstructured.Unstructured, ref map[string]any) (source, pending bool) {
	p := fieldpath.Pave(u.Object)
	refVal, refOK := valueAt(p, str(ref, "referenceField"))
	selVal, selOK := valueAt(p, str(ref, "selectorField"))
	if !refOK || !selOK {
		return true, true
	}
	if refVal == nil && selVal == nil {
		return false, false
	}
	val, ok := valueAt(p, str(ref, "valueField"))
	if !ok || empty(val) {
		return true, true
	}
	pol, _ := ref["policy"].(map[string]any)
	return true, str(pol, "resolve") == policyAlways || always(refVal) || always(selVal)
}

// valueAt returns the value at a field path of p (nil when there is none),
// and false when the path cannot be read.
func valueAt(p *fieldpath.Paved, path string) (any, bool) {
	if path == "" {
		return nil, true
	}
	v, err := p.GetValue(path)
	if err != nil {
		return nil, fieldpath.IsNotFound(err)
	}
	return v, true
}

// empty reports whether a resolved value is missing: nil, "", or an empty
// list (a list reference resolves all its values at once).
func empty(v any) bool {
	switch tv := v.(type) {
	case nil:
		return true
	case string:
		return tv == ""
	case []any:
		return len(tv) == 0
	}
	return false
}

// always reports whether a reference or selector (or a list of them)
// carries policy.resolve Always.
func always(v any) bool {
	switch tv := v.(type) {
	case map[string]any:
		if pol, ok := tv["policy"].(map[string]any); ok && str(pol, "resolve") == policyAlways {
			return true
		}
		if from, ok := tv["from"].(map[string]any); ok {
			return always(from)
		}
	case []any:
		for _, e := range tv {
			if always(e) {
				return true
			}
		}
	}
	return false
}

// kindOf returns the group and kind of an {apiVersion, kind} map.
func kindOf(m map[string]any) schema.GroupKind {
	gv, _ := schema.ParseGroupVersion(str(m, "apiVersion"))
	return schema.GroupKind{Group: gv.Group, Kind: str(m, "kind")}
}
