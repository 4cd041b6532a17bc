package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/xcrd"
)

// traceClient reads what `loomctl trace` shows.
type traceClient interface {
	// Get returns the object of kind gvk named namespace/name; namespace is
	// ignored for cluster-scoped kinds. A missing object is a NotFound
	// error.
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	// Definitions returns every CompositeResourceDefinition.
	Definitions(ctx context.Context) ([]*unstructured.Unstructured, error)
}

// Roles of the objects in a trace.
const (
	roleClaim     = "Claim"
	roleComposite = "Composite"
	roleComposed  = "Composed"
)

// Condition types the trace explains, besides Synced and Ready: the
// binder's reference condition and the secrets service's connection
// condition. Other condition types are explained too, after these.
const (
	typeSynced           = "Synced"
	typeReady            = "Ready"
	typeReferences       = "ReferencesResolved"
	typeConnection       = "ConnectionDetailsReady"
	annotationResourceNm = xcrd.AnnotationKeyCompositionResourceName
)

// maxDepth bounds how deep nested composite resources are followed.
const maxDepth = 8

// A traceNode is one object of a trace: a claim, a composite resource or a
// composed resource, with what holds it back.
type traceNode struct {
	Role         string `json:"role"`
	APIVersion   string `json:"apiVersion"`
	Kind         string `json:"kind"`
	Namespace    string `json:"namespace,omitempty"`
	Name         string `json:"name"`
	ResourceName string `json:"resourceName,omitempty"`
	// Synced and Ready are the statuses of the conditions of those types:
	// True, False, Unknown, or "" when the object has none.
	Synced string `json:"synced"`
	Ready  string `json:"ready"`
	// Missing is set when the object does not exist.
	Missing bool `json:"missing,omitempty"`
	// Causes say why the object is not synced or not ready, most specific
	// first. Empty when it is fine.
	Causes   []traceCause `json:"causes,omitempty"`
	Children []*traceNode `json:"children,omitempty"`
}

// A traceCause is one reason an object is held back: a condition that is
// not True, or the renderer's summary of a composed resource.
type traceCause struct {
	// Condition is the condition type, or "" for a cause that is not a
	// condition of the object (a missing object, the renderer's summary).
	Condition string `json:"condition,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
}

func (c traceCause) String() string {
	switch {
	case c.Reason == "":
		return c.Message
	case c.Message == "":
		return c.Reason
	}
	return c.Reason + ": " + c.Message
}

// definitions indexes the XRDs by the kinds they define.
type definitions struct {
	claims     map[schema.GroupKind]bool
	composites map[schema.GroupKind]bool
}

func loadDefinitions(ctx context.Context, c traceClient) (definitions, error) {
	d := definitions{claims: map[schema.GroupKind]bool{}, composites: map[schema.GroupKind]bool{}}
	xrds, err := c.Definitions(ctx)
	if err != nil {
		return d, fmt.Errorf("cannot list CompositeResourceDefinitions: %w", err)
	}
	for _, u := range xrds {
		x := &xv1.CompositeResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, x); err != nil {
			continue
		}
		d.composites[schema.GroupKind{Group: x.Spec.Group, Kind: x.Spec.Names.Kind}] = true
		if x.Spec.ClaimNames != nil && x.Spec.ClaimNames.Kind != "" {
			d.claims[schema.GroupKind{Group: x.Spec.Group, Kind: x.Spec.ClaimNames.Kind}] = true
		}
	}
	return d, nil
}

// buildTrace reads the claim or composite resource of kind gvk named
// namespace/name and everything below it.
func buildTrace(ctx context.Context, c traceClient, gvk schema.GroupVersionKind, namespace, name string) (*traceNode, error) {
	defs, err := loadDefinitions(ctx, c)
	if err != nil {
		return nil, err
	}
	obj, err := c.Get(ctx, gvk, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("cannot get %s %q: %w", gvk.Kind, name, err)
	}
	b := &builder{c: c, defs: defs, seen: map[string]bool{}}
	switch {
	case defs.claims[gvk.GroupKind()]:
		return b.claim(ctx, obj)
	case defs.composites[gvk.GroupKind()]:
		return b.composite(ctx, obj, 0)
	default:
		return nil, fmt.Errorf("%s is neither a claim nor a composite resource kind of any CompositeResourceDefinition", gvk.GroupKind())
	}
}

type builder struct {
	c    traceClient
	defs definitions
	seen map[string]bool // composite resources already in the tree, by UID
}

func (b *builder) claim(ctx context.Context, cm *unstructured.Unstructured) (*traceNode, error) {
	n := nodeOf(roleClaim, cm)
	n.Causes = conditionCauses(cm)
	apiVersion, _, _ := unstructured.NestedString(cm.Object, "spec", "resourceRef", "apiVersion")
	kind, _, _ := unstructured.NestedString(cm.Object, "spec", "resourceRef", "kind")
	name, _, _ := unstructured.NestedString(cm.Object, "spec", "resourceRef", "name")
	if name == "" {
		if len(n.Causes) == 0 {
			n.Causes = append(n.Causes, traceCause{Reason: "Unbound", Message: "the claim has no composite resource yet (spec.resourceRef is unset)"})
		}
		return n, nil
	}
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	xr, err := b.c.Get(ctx, gvk, "", name)
	switch {
	case kerrors.IsNotFound(err):
		child := missingNode(roleComposite, apiVersion, kind, "", name)
		child.Causes = []traceCause{{Reason: "NotFound", Message: "the composite resource named by spec.resourceRef does not exist (yet)"}}
		n.Children = append(n.Children, child)
	case err != nil:
		return nil, fmt.Errorf("cannot get composite resource %q: %w", name, err)
	default:
		child, err := b.composite(ctx, xr, 1)
		if err != nil {
			return nil, err
		}
		n.Children = append(n.Children, child)
	}
	return n, nil
}

// summaryEntry is one entry of an XR's status.loom.resources.
type summaryEntry struct {
	ResourceName, APIVersion, Kind, Name, Namespace, Ready, Reason, Message string
	used                                                                    bool
}

func summaries(xr *unstructured.Unstructured) []*summaryEntry {
	raw, _, _ := unstructured.NestedSlice(xr.Object, "status", xcrd.FieldLoom, "resources")
	out := make([]*summaryEntry, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		s := func(k string) string { v, _ := m[k].(string); return v }
		out = append(out, &summaryEntry{ResourceName: s("resourceName"), APIVersion: s("apiVersion"), Kind: s("kind"),
			Name: s("name"), Namespace: s("namespace"), Ready: s("ready"), Reason: s("reason"), Message: s("message")})
	}
	return out
}

// resourceRefs returns an XR's composed resource references, from
// spec.resourceRefs or spec.crossplane.resourceRefs.
func resourceRefs(xr *unstructured.Unstructured) []map[string]any {
	raw, ok, _ := unstructured.NestedSlice(xr.Object, "spec", "resourceRefs")
	if !ok {
		raw, _, _ = unstructured.NestedSlice(xr.Object, "spec", "crossplane", "resourceRefs")
	}
	out := make([]map[string]any, 0, len(raw))
	for _, r := range raw {
		if m, ok := r.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func (b *builder) composite(ctx context.Context, xr *unstructured.Unstructured, depth int) (*traceNode, error) {
	n := nodeOf(roleComposite, xr)
	n.Causes = conditionCauses(xr)
	if uid := string(xr.GetUID()); uid != "" {
		if b.seen[uid] || depth > maxDepth {
			n.Causes = append(n.Causes, traceCause{Reason: "NotFollowed", Message: "already shown above, or nested too deep"})
			return n, nil
		}
		b.seen[uid] = true
	}
	sums := summaries(xr)
	problems := referenceProblems(xr)
	attributed := 0
	for _, ref := range resourceRefs(xr) {
		s := func(k string) string { v, _ := ref[k].(string); return v }
		apiVersion, kind, name, ns := s("apiVersion"), s("kind"), s("name"), s("namespace")
		if name == "" {
			continue
		}
		if ns == "" {
			ns = xr.GetNamespace()
		}
		gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
		var child *traceNode
		obj, err := b.c.Get(ctx, gvk, ns, name)
		switch {
		case kerrors.IsNotFound(err):
			child = missingNode(roleComposed, apiVersion, kind, ns, name)
		case err != nil:
			return nil, fmt.Errorf("cannot get %s %q: %w", kind, name, err)
		case b.defs.composites[gvk.GroupKind()]:
			if child, err = b.composite(ctx, obj, depth+1); err != nil {
				return nil, err
			}
			child.Role = roleComposed
		default:
			child = nodeOf(roleComposed, obj)
			child.Causes = conditionCauses(obj)
		}
		if child.ResourceName == "" {
			child.ResourceName = s("resourceName")
		}
		if e := findSummary(sums, child); e != nil {
			e.used = true
			if child.ResourceName == "" {
				child.ResourceName = e.ResourceName
			}
			addSummaryCause(child, e)
		}
		if child.Missing {
			child.Causes = append([]traceCause{{Reason: "NotFound", Message: "the composed resource does not exist (yet)"}}, child.Causes...)
		}
		if ps := problems[describeObject(kind, name)]; len(ps) > 0 {
			child.Causes = append(child.Causes, ps...)
			attributed += len(ps)
		}
		n.Children = append(n.Children, child)
	}
	if attributed > 0 && attributed == countProblems(problems) {
		// Every unresolved reference shows on its composed resource's
		// line: keep the XR's to the count.
		for i, c := range n.Causes {
			if head, _, ok := strings.Cut(c.Message, ": "); ok && c.Condition == typeReferences {
				n.Causes[i].Message = head + " (below)"
			}
		}
	}
	// Templates the renderer could not render (or has not applied) have no
	// reference yet; show them from the summary.
	for _, e := range sums {
		if e.used || e.Ready == "True" {
			continue
		}
		child := missingNode(roleComposed, e.APIVersion, e.Kind, e.Namespace, e.Name)
		child.ResourceName = e.ResourceName
		addSummaryCause(child, e)
		n.Children = append(n.Children, child)
	}
	return n, nil
}

// findSummary returns the summary entry of a composed resource: by kind and
// name, else by resource name.
func findSummary(sums []*summaryEntry, n *traceNode) *summaryEntry {
	for _, e := range sums {
		if !e.used && e.Name != "" && e.Kind == n.Kind && e.Name == n.Name {
			return e
		}
	}
	if n.ResourceName == "" {
		return nil
	}
	for _, e := range sums {
		if !e.used && e.ResourceName == n.ResourceName {
			return e
		}
	}
	return nil
}

// addSummaryCause adds the renderer's view of a composed resource that is
// not ready, unless the resource's own Ready condition says the same.
func addSummaryCause(n *traceNode, e *summaryEntry) {
	if n.Ready == "" && e.Ready != "" {
		n.Ready = e.Ready
	}
	if e.Ready == "True" || e.Reason == "" {
		return
	}
	// The renderer's reason (a failed template, a readiness check) is more
	// specific than the resource's own Ready condition: show it first, and
	// drop the condition when it says no more.
	causes := []traceCause{{Reason: e.Reason, Message: e.Message}}
	for _, c := range n.Causes {
		if c.Reason == e.Reason && (c.Message == "" || c.Message == e.Message) {
			continue
		}
		causes = append(causes, c)
	}
	n.Causes = causes
}

// describeObject names an object as the binder's reference condition does.
func describeObject(kind, name string) string { return fmt.Sprintf("%s %q", kind, name) }

// referenceProblems splits the message of an XR's ReferencesResolved
// condition into the problems of each composed resource, keyed as
// describeObject names them. The binder writes one problem per unresolved
// reference, `<Kind> "<name>": <field> <what it waits for>`, joined by "; ".
func referenceProblems(xr *unstructured.Unstructured) map[string][]traceCause {
	out := map[string][]traceCause{}
	c, ok := condition(xr, typeReferences)
	if !ok || c.Status == "True" {
		return out
	}
	_, list, ok := strings.Cut(c.Message, ": ")
	if !ok {
		return out
	}
	for _, p := range strings.Split(list, "; ") {
		i := strings.Index(p, "\": ")
		if i < 0 {
			continue
		}
		key, msg := p[:i+1], p[i+3:]
		out[key] = append(out[key], traceCause{Condition: typeReferences, Reason: c.Reason, Message: msg})
	}
	return out
}

func countProblems(ps map[string][]traceCause) int {
	n := 0
	for _, p := range ps {
		n += len(p)
	}
	return n
}

// traceCondition is the part of a status condition the trace reads.
type traceCondition struct {
	Type, Status, Reason, Message string
}

func conditions(u *unstructured.Unstructured) []traceCondition {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	out := make([]traceCondition, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		s := func(k string) string { v, _ := m[k].(string); return v }
		if s("type") != "" {
			out = append(out, traceCondition{Type: s("type"), Status: s("status"), Reason: s("reason"), Message: s("message")})
		}
	}
	return out
}

func condition(u *unstructured.Unstructured, t string) (traceCondition, bool) {
	for _, c := range conditions(u) {
		if c.Type == t {
			return c, true
		}
	}
	return traceCondition{}, false
}

// conditionCauses returns the conditions of u that are not True: Synced
// first (a failing patch or function step), then the binder's and the
// secrets service's, then any other, then Ready (usually the consequence of
// the others).
func conditionCauses(u *unstructured.Unstructured) []traceCause {
	rank := func(t string) int {
		switch t {
		case typeSynced:
			return 0
		case typeReferences:
			return 1
		case typeConnection:
			return 2
		case typeReady:
			return 4
		}
		return 3
	}
	conds := conditions(u)
	sort.SliceStable(conds, func(i, j int) bool {
		if rank(conds[i].Type) != rank(conds[j].Type) {
			return rank(conds[i].Type) < rank(conds[j].Type)
		}
		return conds[i].Type < conds[j].Type
	})
	var out []traceCause
	for _, c := range conds {
		if c.Status == "True" {
			continue
		}
		out = append(out, traceCause{Condition: c.Type, Reason: c.Reason, Message: c.Message})
	}
	return out
}

func nodeOf(role string, u *unstructured.Unstructured) *traceNode {
	n := &traceNode{Role: role, APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(),
		ResourceName: u.GetAnnotations()[annotationResourceNm]}
	if c, ok := condition(u, typeSynced); ok {
		n.Synced = c.Status
	}
	if c, ok := condition(u, typeReady); ok {
		n.Ready = c.Status
	}
	return n
}

func missingNode(role, apiVersion, kind, namespace, name string) *traceNode {
	return &traceNode{Role: role, APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name, Missing: true}
}

// Healthy reports whether n and everything below it are fine.
func (n *traceNode) Healthy() bool {
	if len(n.Causes) > 0 {
		return false
	}
	for _, c := range n.Children {
		if !c.Healthy() {
			return false
		}
	}
	return true
}
