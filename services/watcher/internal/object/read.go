package object

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/condition"
)

// Reference names an object by apiVersion, kind, namespace and name, as
// spec.claimRef of an XR does.
type Reference struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

// GroupKind returns the group and kind of the reference.
func (r Reference) GroupKind() schema.GroupKind {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return schema.GroupKind{Group: gv.Group, Kind: r.Kind}
}

// ClaimRef returns the claim an XR is bound to (spec.claimRef, or
// spec.crossplane.claimRef), or nil if it names none.
func ClaimRef(u *unstructured.Unstructured) *Reference {
	for _, path := range [][]string{{"spec", "claimRef"}, {"spec", "crossplane", "claimRef"}} {
		m, ok, _ := unstructured.NestedMap(u.Object, path...)
		if !ok {
			continue
		}
		r := Reference{
			APIVersion: str(m, "apiVersion"),
			Kind:       str(m, "kind"),
			Namespace:  str(m, "namespace"),
			Name:       str(m, "name"),
		}
		if r.Kind == "" || r.Name == "" {
			continue
		}
		return &r
	}
	return nil
}

// RevisionName returns the name of the CompositionRevision an XR's
// spec.compositionRevisionRef (or spec.crossplane.compositionRevisionRef)
// names, or "".
func RevisionName(u *unstructured.Unstructured) string {
	return specRefName(u, "compositionRevisionRef")
}

// CompositionName returns the name of the Composition an XR names
// (spec.compositionRef, or spec.crossplane.compositionRef), empty if none.
func CompositionName(u *unstructured.Unstructured) string {
	return specRefName(u, "compositionRef")
}

// specRefName returns the name of the reference at spec.<field>, or
// spec.crossplane.<field>, of an XR; empty if it has none.
func specRefName(u *unstructured.Unstructured, field string) string {
	for _, path := range [][]string{{"spec", field, "name"}, {"spec", "crossplane", field, "name"}} {
		if n, _, _ := unstructured.NestedString(u.Object, path...); n != "" {
			return n
		}
	}
	return ""
}

// ResourceKinds returns the kinds an XR's spec.resourceRefs (or
// spec.crossplane.resourceRefs) name, sorted and without duplicates.
// Malformed entries are skipped.
func ResourceKinds(u *unstructured.Unstructured) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, path := range [][]string{{"spec", "resourceRefs"}, {"spec", "crossplane", "resourceRefs"}} {
		l, _, _ := unstructured.NestedSlice(u.Object, path...)
		for _, e := range l {
			if m, ok := e.(map[string]any); ok {
				out = appendGVK(out, str(m, "apiVersion"), str(m, "kind"))
			}
		}
	}
	return sortGVKs(out)
}

// ResourceRefs returns the objects an XR's spec.resourceRefs (or
// spec.crossplane.resourceRefs) name. Entries without a kind or name are
// skipped.
func ResourceRefs(u *unstructured.Unstructured) []Reference {
	var out []Reference
	for _, path := range [][]string{{"spec", "resourceRefs"}, {"spec", "crossplane", "resourceRefs"}} {
		l, _, _ := unstructured.NestedSlice(u.Object, path...)
		for _, e := range l {
			m, ok := e.(map[string]any)
			if !ok {
				continue
			}
			r := Reference{APIVersion: str(m, "apiVersion"), Kind: str(m, "kind"), Namespace: str(m, "namespace"), Name: str(m, "name")}
			if r.Kind != "" && r.Name != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// RuleKinds returns the kinds a ReferenceRule names: spec.for and the
// target of each of spec.references. Entries without a kind are skipped.
func RuleKinds(u *unstructured.Unstructured) []schema.GroupKind {
	var out []schema.GroupKind
	add := func(m map[string]any) {
		if gk := kindOf(m); gk.Kind != "" {
			out = append(out, gk)
		}
	}
	if m, ok, _ := unstructured.NestedMap(u.Object, "spec", "for"); ok {
		add(m)
	}
	l, _, _ := unstructured.NestedSlice(u.Object, "spec", "references")
	for _, e := range l {
		if m, ok := e.(map[string]any); ok {
			if t, ok := m["target"].(map[string]any); ok {
				add(t)
			}
		}
	}
	return out
}

// TemplateKinds returns the kinds the templates of a Composition compose:
// the base apiVersion and kind of spec.resources[] and of the resources of
// each pipeline step's input (function-patch-and-transform's input has that
// shape). Sorted, without duplicates; templates without a base are skipped.
func TemplateKinds(u *unstructured.Unstructured) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	collect := func(resources []any) {
		for _, r := range resources {
			m, ok := r.(map[string]any)
			if !ok {
				continue
			}
			base, ok := m["base"].(map[string]any)
			if !ok {
				continue
			}
			out = appendGVK(out, str(base, "apiVersion"), str(base, "kind"))
		}
	}
	resources, _, _ := unstructured.NestedSlice(u.Object, "spec", "resources")
	collect(resources)
	steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "pipeline")
	for _, s := range steps {
		m, ok := s.(map[string]any)
		if !ok {
			continue
		}
		resources, _, _ := unstructured.NestedSlice(m, "input", "resources")
		collect(resources)
	}
	return sortGVKs(out)
}

// Definition is what an XRD defines: the kind of its XRs and, if it offers
// claims, the kind of its claims, both at the referenceable version.
type Definition struct {
	XR    schema.GroupVersionKind
	Claim *schema.GroupVersionKind
}

// DefinitionOf reads an XRD. The XR version is the version marked
// referenceable, else the first served version, else the first version.
func DefinitionOf(u *unstructured.Unstructured) (Definition, error) {
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
	if group == "" || kind == "" {
		return Definition{}, errors.New("cannot read definition: spec.group and spec.names.kind are required")
	}
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	var referenceable, served, first string
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok || str(m, "name") == "" {
			continue
		}
		name := str(m, "name")
		if first == "" {
			first = name
		}
		if b, _ := m["served"].(bool); b && served == "" {
			served = name
		}
		if b, _ := m["referenceable"].(bool); b && referenceable == "" {
			referenceable = name
		}
	}
	version := firstNonEmpty(referenceable, served, first)
	if version == "" {
		return Definition{}, errors.New("cannot read definition: spec.versions names no version")
	}
	d := Definition{XR: schema.GroupVersionKind{Group: group, Version: version, Kind: kind}}
	if ck, _, _ := unstructured.NestedString(u.Object, "spec", "claimNames", "kind"); ck != "" {
		d.Claim = &schema.GroupVersionKind{Group: group, Version: version, Kind: ck}
	}
	return d, nil
}

// CRD is what the watcher reads of a CustomResourceDefinition: enough to map
// the kinds it serves to resources.
type CRD struct {
	Group       string
	Kind        string
	Plural      string
	Namespaced  bool
	Served      []string
	Established bool
}

// CRDOf reads a CustomResourceDefinition.
func CRDOf(u *unstructured.Unstructured) (CRD, error) {
	c := CRD{}
	c.Group, _, _ = unstructured.NestedString(u.Object, "spec", "group")
	c.Kind, _, _ = unstructured.NestedString(u.Object, "spec", "names", "kind")
	c.Plural, _, _ = unstructured.NestedString(u.Object, "spec", "names", "plural")
	scope, _, _ := unstructured.NestedString(u.Object, "spec", "scope")
	c.Namespaced = scope == "Namespaced"
	if c.Group == "" || c.Kind == "" || c.Plural == "" {
		return CRD{}, fmt.Errorf("cannot read CustomResourceDefinition %s: spec.group, spec.names.kind and spec.names.plural are required", u.GetName())
	}
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if b, _ := m["served"].(bool); b && str(m, "name") != "" {
			c.Served = append(c.Served, str(m, "name"))
		}
	}
	c.Established = condition.IsTrue(u, "Established")
	return c, nil
}

// Serves reports whether the CRD is established and serves the version.
func (c CRD) Serves(version string) bool {
	return c.Established && slices.Contains(c.Served, version)
}

func appendGVK(out []schema.GroupVersionKind, apiVersion, kind string) []schema.GroupVersionKind {
	if apiVersion == "" || kind == "" {
		return out
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || gv.Version == "" {
		return out
	}
	return append(out, gv.WithKind(kind))
}

func sortGVKs(l []schema.GroupVersionKind) []schema.GroupVersionKind {
	slices.SortFunc(l, CompareGVK)
	return slices.Compact(l)
}

// CompareGVK orders kinds by group, version and kind.
func CompareGVK(a, b schema.GroupVersionKind) int {
	switch {
	case a.Group != b.Group:
		return strings.Compare(a.Group, b.Group)
	case a.Version != b.Version:
		return strings.Compare(a.Version, b.Version)
	default:
		return strings.Compare(a.Kind, b.Kind)
	}
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
