package object

import (
	"slices"

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
	// Wants are, for a pending source, the targets its pending references
	// and selectors may resolve to; nil means any (what they want cannot
	// be told).
	Wants []Want
}

// A Want is what a pending reference or selector of a source may resolve
// to: a target of kind GK that, when ByName, is named one of Names (the
// reference names it), or, when BySelector, carries every one of Labels
// (the selector's matchLabels). A Want by neither takes any target of its
// kind. Both may hold: a reference and a selector side by side (the binder
// uses the selector when the reference is missing, or always under policy
// Always), so a target either would pick is wanted.
type Want struct {
	GK         schema.GroupKind
	ByName     bool
	Names      []string
	BySelector bool
	Labels     map[string]string
}

// Takes reports whether a target of kind gk, named name, carrying labels,
// is what w wants.
func (w Want) Takes(gk schema.GroupKind, name string, labels map[string]string) bool {
	if gk != w.GK {
		return false
	}
	if !w.ByName && !w.BySelector {
		return true
	}
	if w.ByName && slices.Contains(w.Names, name) {
		return true
	}
	if !w.BySelector {
		return false
	}
	for k, v := range w.Labels {
		if lv, ok := labels[k]; !ok || lv != v {
			return false
		}
	}
	return true
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
	wantsAny := false
	p := fieldpath.Pave(u.Object)
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
				f := readRefFields(p, ref)
				src, pending := sourceOf(p, ref, f)
				out.Source = out.Source || src
				out.Pending = out.Pending || pending
				if pending {
					w, ok := wantOf(ref, f)
					wantsAny = wantsAny || !ok
					out.Wants = append(out.Wants, w)
				}
			}
			if t, ok := ref["target"].(map[string]any); ok && kindOf(t) == gk {
				w, _ := ref["waitFor"].(map[string]any)
				ct := str(w, "conditionType")
				out.Target = out.Target || ct == "" || condition.IsTrue(u, common.ConditionType(ct))
			}
		}
	}
	if wantsAny {
		out.Wants = nil
	}
	return out
}

// refFields are the values of a rule reference's reference and selector
// fields on a resource (nil where there is none); ok is false when either
// path cannot be read.
type refFields struct {
	ref, sel any
	ok       bool
}

// readRefFields reads the reference and selector fields of ref (a rule's
// reference) on the resource p paves.
func readRefFields(p *fieldpath.Paved, ref map[string]any) refFields {
	r, rOK := valueAt(p, str(ref, "referenceField"))
	s, sOK := valueAt(p, str(ref, "selectorField"))
	return refFields{ref: r, sel: s, ok: rOK && sOK}
}

// wantOf returns what the pending reference or selector of ref (a rule's
// reference), whose fields on the resource are f, wants, and false when
// that cannot be told (a field that cannot be read, a target kind or a
// reference of a shape not understood).
func wantOf(ref map[string]any, f refFields) (Want, bool) {
	t, ok := ref["target"].(map[string]any)
	if !ok {
		return Want{}, false
	}
	w := Want{GK: kindOf(t)}
	if w.GK.Kind == "" {
		return Want{}, false
	}
	if !f.ok {
		return Want{}, false
	}
	refVal, selVal := f.ref, f.sel
	from := str(ref, "referenceShape") == "From"
	if refVal != nil {
		names, ok := namesOf(refVal, from)
		if !ok {
			return Want{}, false
		}
		w.ByName, w.Names = true, names
	}
	if selVal != nil {
		sel, ok := selVal.(map[string]any)
		if !ok {
			return Want{}, false
		}
		w.BySelector = true
		switch ml := sel["matchLabels"].(type) {
		case nil:
		case map[string]any:
			w.Labels = make(map[string]string, len(ml))
			for k, v := range ml {
				s, ok := v.(string)
				if !ok {
					return Want{}, false
				}
				w.Labels[k] = s
			}
		default:
			return Want{}, false
		}
	}
	return w, true
}

// namesOf returns the target names a reference (or a list of them) holds:
// {name} or, of shape From, {from: {name}}; false for any other value.
func namesOf(v any, from bool) ([]string, bool) {
	switch tv := v.(type) {
	case map[string]any:
		if from {
			tv, _ = tv["from"].(map[string]any)
		}
		n, ok := tv["name"].(string)
		if !ok {
			return nil, false
		}
		return []string{n}, true
	case []any:
		var names []string
		for _, e := range tv {
			n, ok := namesOf(e, from)
			if !ok {
				return nil, false
			}
			names = append(names, n...)
		}
		return names, true
	}
	return nil, false
}

// sourceOf reports whether the resource p paves, whose reference and
// selector fields of ref (a rule's reference) are f, holds that reference or
// selector, and whether it is pending: not resolved yet, or
// resolved again whenever a target changes.
func sourceOf(p *fieldpath.Paved, ref map[string]any, f refFields) (source, pending bool) {
	if !f.ok {
		return true, true
	}
	refVal, selVal := f.ref, f.sel
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
