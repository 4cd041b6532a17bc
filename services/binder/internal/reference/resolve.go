package reference

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
	"github.com/loomxr/loom/pkg/apply"
	"github.com/loomxr/loom/pkg/condition"
	"github.com/loomxr/loom/pkg/fieldpath"
)

// A World is what a resolution may look at: objects by name, and the
// candidates of a selector. Implementations may cache within one reconcile.
type World interface {
	// Get returns the object, or nil if it does not exist. namespace is
	// ignored for cluster-scoped kinds.
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)

	// Candidates returns the objects of kind gvk that a selector with the
	// supplied labels may pick for a resource in namespace (ignored for
	// cluster-scoped kinds): with controlledBy, only the composed resources
	// of that composite resource that it controls; without, every object
	// of the kind. Objects being deleted are left out. The order does not
	// matter.
	Candidates(ctx context.Context, gvk schema.GroupVersionKind, namespace string, controlledBy *unstructured.Unstructured, matchLabels map[string]string) ([]*unstructured.Unstructured, error)
}

// A Problem is a reference that did not resolve.
type Problem struct {
	// Resource is the composed resource, "<Kind> \"<name>\"".
	Resource string
	// Field is the value field (or, for a selector, the reference field).
	Field string
	// Message says what the reference waits for or why it failed.
	Message string
	// Error is true for a failure a user must fix (both a value and a
	// reference set, a write the API server refused), false for a wait.
	Error bool
	// External is true when what is waited for is not a resource the
	// composite resource controls: its changes do not reach the binder,
	// so the binder must look again later.
	External bool
	// Waits names the composed resource waited for, when it is one, for
	// cycle detection ("<Kind> \"<name>\"").
	Waits string
}

// String renders the problem for a condition message.
func (p Problem) String() string {
	return fmt.Sprintf("%s: %s %s", p.Resource, p.Field, p.Message)
}

// An assignment sets one field of a composed resource.
type assignment struct {
	path  fieldpath.Segments
	value any
}

// A resolution resolves the references of one composed resource.
type resolution struct {
	world World
	xr    *unstructured.Unstructured
	obj   *unstructured.Unstructured
	owned map[string]any

	set      []assignment
	problems []Problem
}

// Resolve resolves every reference of rule on obj, a composed resource that
// xr controls, and returns the binder's fully specified server-side-apply
// intent for obj (its identity and the value and reference fields the
// binder sets or keeps) and the references that did not resolve.
func Resolve(ctx context.Context, w World, xr, obj *unstructured.Unstructured, rule *Rule, manager string) (*unstructured.Unstructured, []Problem, error) {
	owned, _, err := apply.Owned(obj, manager, "")
	if err != nil {
		return nil, nil, err
	}
	rs := &resolution{world: w, xr: xr, obj: obj, owned: owned}
	for i := range rule.References {
		c := &rule.References[i]
		if c.List {
			rs.list(ctx, c)
		} else {
			rs.single(ctx, c)
		}
	}
	intent := &unstructured.Unstructured{Object: map[string]any{}}
	intent.SetAPIVersion(obj.GetAPIVersion())
	intent.SetKind(obj.GetKind())
	intent.SetName(obj.GetName())
	if obj.GetNamespace() != "" {
		intent.SetNamespace(obj.GetNamespace())
	}
	p := fieldpath.Pave(intent.Object)
	for _, a := range rs.set {
		if err := p.SetSegments(a.path, a.value); err != nil {
			return nil, nil, fmt.Errorf("cannot set %s of %s: %w", a.path, describe(obj), err)
		}
	}
	return intent, rs.problems, nil
}

// describe renders an object as <Kind> "<name>".
func describe(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %q", u.GetKind(), u.GetName())
}

func (rs *resolution) get(s fieldpath.Segments) any {
	if s == nil {
		return nil
	}
	v, err := fieldpath.GetSegments(rs.obj.Object, s)
	if err != nil {
		return nil
	}
	return v
}

// owns reports whether the binder set the field at s by an earlier apply.
func (rs *resolution) owns(s fieldpath.Segments) bool {
	names := make([]string, 0, len(s))
	for _, seg := range s {
		if seg.Type != fieldpath.SegmentField {
			return false
		}
		names = append(names, seg.Field)
	}
	return apply.OwnsField(rs.owned, names)
}

// keep carries a field the binder owns, with its current value, so the
// apply does not remove it.
func (rs *resolution) keep(s fieldpath.Segments) {
	if v := rs.get(s); v != nil && rs.owns(s) {
		rs.set = append(rs.set, assignment{path: s, value: v})
	}
}

func (rs *resolution) problem(c *Reference, field, msg string, isErr, external bool, waits string) {
	rs.problems = append(rs.problems, Problem{
		Resource: describe(rs.obj), Field: field, Message: msg, Error: isErr, External: external, Waits: waits,
	})
}

// A policy is a reference's effective policy.
type policy struct {
	always   bool
	optional bool
}

// policyOf returns the policy of a reference or selector object (its
// "policy" field), falling back to the rule's default, then to
// crossplane-runtime's defaults (IfNotPresent, Required).
func policyOf(def *v1alpha1.ReferencePolicy, obj map[string]any) policy {
	p := policy{}
	if def != nil {
		p.always = def.Resolve != nil && *def.Resolve == v1alpha1.ResolvePolicyAlways
		p.optional = def.Resolution != nil && *def.Resolution == v1alpha1.ResolutionPolicyOptional
	}
	if m, ok := obj["policy"].(map[string]any); ok {
		if r, ok := m["resolve"].(string); ok && r != "" {
			p.always = r == string(v1alpha1.ResolvePolicyAlways)
		}
		if r, ok := m["resolution"].(string); ok && r != "" {
			p.optional = r == string(v1alpha1.ResolutionPolicyOptional)
		}
	}
	return p
}

// nameOf returns the target name of one reference object of shape.
func nameOf(ref map[string]any, shape v1alpha1.ReferenceShape) string {
	if shape == v1alpha1.ReferenceShapeFrom {
		ref, _ = ref["from"].(map[string]any)
	}
	n, _ := ref["name"].(string)
	return n
}

// refObject returns a reference object of shape naming name.
func refObject(name string, shape v1alpha1.ReferenceShape) map[string]any {
	if shape == v1alpha1.ReferenceShapeFrom {
		return map[string]any{"from": map[string]any{"name": name}}
	}
	return map[string]any{"name": name}
}

// namePath is the path of the name within a single reference of c.
func namePath(c *Reference) fieldpath.Segments {
	s := append(fieldpath.Segments{}, c.ref...)
	if c.shape == v1alpha1.ReferenceShapeFrom {
		s = append(s, fieldpath.Field("from"))
	}
	return append(s, fieldpath.Field("name"))
}

func empty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == ""
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	}
	return false
}

// selector decodes a selector object.
type selector struct {
	matchLabels        map[string]string
	matchControllerRef bool
}

func selectorOf(m map[string]any) selector {
	s := selector{matchLabels: map[string]string{}}
	if l, ok := m["matchLabels"].(map[string]any); ok {
		for k, v := range l {
			if sv, ok := v.(string); ok {
				s.matchLabels[k] = sv
			}
		}
	}
	s.matchControllerRef, _ = m["matchControllerRef"].(bool)
	return s
}

// candidates returns the names a selector picks, sorted, so that the first
// is the deterministic single choice. The resource itself is never a
// candidate.
func (rs *resolution) candidates(ctx context.Context, c *Reference, s selector) ([]string, error) {
	var ctrl *unstructured.Unstructured
	if s.matchControllerRef {
		ctrl = rs.xr
	}
	objs, err := rs.world.Candidates(ctx, c.target, rs.obj.GetNamespace(), ctrl, s.matchLabels)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		// A resource never selects itself.
		if o.GroupVersionKind().GroupKind() == rs.obj.GroupVersionKind().GroupKind() &&
			o.GetNamespace() == rs.obj.GetNamespace() && o.GetName() == rs.obj.GetName() {
			continue
		}
		names = append(names, o.GetName())
	}
	sort.Strings(names)
	return names, nil
}

func describeSelector(s selector) string {
	var parts []string
	if s.matchControllerRef {
		parts = append(parts, "matchControllerRef")
	}
	keys := make([]string, 0, len(s.matchLabels))
	for k := range s.matchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+s.matchLabels[k])
	}
	if len(parts) == 0 {
		return "{}"
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// single resolves a reference whose fields hold one value, one reference
// and one selector.
func (rs *resolution) single(ctx context.Context, c *Reference) {
	curVal := rs.get(c.value)
	refObj, _ := rs.get(c.ref).(map[string]any)
	refName := nameOf(refObj, c.shape)
	var sel map[string]any
	if c.selector != nil {
		sel, _ = rs.get(c.selector).(map[string]any)
	}
	refPol := policyOf(c.Policy, refObj)
	selPol := policyOf(c.Policy, sel)
	nameAt := namePath(c)

	if !empty(curVal) && !rs.owns(c.value) && (refName != "" || sel != nil) {
		other := c.ReferenceField
		if refName == "" {
			other = c.SelectorField
		}
		rs.problem(c, c.ValueField, fmt.Sprintf("is set together with %s; set either the value or its reference", other), true, false, "")
		rs.keep(nameAt)
		return
	}

	name := refName
	always := refPol.always
	optional := refPol.optional
	if sel != nil && (name == "" || selPol.always) {
		s := selectorOf(sel)
		always = always || selPol.always
		optional = selPol.optional
		names, err := rs.candidates(ctx, c, s)
		switch {
		case err != nil:
			rs.problem(c, c.ReferenceField, fmt.Sprintf("cannot be selected: cannot list %s: %v", c.Target.Kind, err), true, true, "")
			rs.keep(nameAt)
			rs.keep(c.value)
			return
		case len(names) == 0 && name == "":
			if !selPol.optional {
				rs.problem(c, c.ReferenceField, fmt.Sprintf("waits for a %s matching selector %s", c.Target.Kind, describeSelector(s)), false, !s.matchControllerRef, "")
			}
			rs.keep(c.value)
			return
		case len(names) > 0:
			name = names[0]
		}
	}
	if name != refName || (name != "" && rs.owns(nameAt)) {
		rs.set = append(rs.set, assignment{path: nameAt, value: name})
	}
	if name == "" {
		rs.keep(c.value)
		return
	}
	if !empty(curVal) && !always && name == refName {
		rs.keep(c.value)
		return
	}
	v, ok := rs.targetValue(ctx, c, name, optional)
	if !ok {
		rs.keep(c.value)
		return
	}
	rs.set = append(rs.set, assignment{path: c.value, value: v})
}

// list resolves a reference whose fields hold a list of values and a list
// of references, with a selector that picks every match.
func (rs *resolution) list(ctx context.Context, c *Reference) {
	curVals, _ := rs.get(c.value).([]any)
	refList, _ := rs.get(c.ref).([]any)
	var refNames []string
	var first map[string]any
	for _, r := range refList {
		m, _ := r.(map[string]any)
		if first == nil {
			first = m
		}
		if n := nameOf(m, c.shape); n != "" {
			refNames = append(refNames, n)
		}
	}
	var sel map[string]any
	if c.selector != nil {
		sel, _ = rs.get(c.selector).(map[string]any)
	}
	refPol := policyOf(c.Policy, first)
	selPol := policyOf(c.Policy, sel)

	if len(curVals) > 0 && !rs.owns(c.value) && (len(refNames) > 0 || sel != nil) {
		other := c.ReferenceField
		if len(refNames) == 0 {
			other = c.SelectorField
		}
		rs.problem(c, c.ValueField, fmt.Sprintf("is set together with %s; set either the values or their references", other), true, false, "")
		rs.keep(c.ref)
		return
	}

	names := refNames
	always := refPol.always
	optional := refPol.optional
	if sel != nil && (len(names) == 0 || selPol.always) {
		s := selectorOf(sel)
		always = always || selPol.always
		optional = selPol.optional
		picked, err := rs.candidates(ctx, c, s)
		switch {
		case err != nil:
			rs.problem(c, c.ReferenceField, fmt.Sprintf("cannot be selected: cannot list %s: %v", c.Target.Kind, err), true, true, "")
			rs.keep(c.ref)
			rs.keep(c.value)
			return
		case len(picked) == 0 && len(names) == 0:
			if !selPol.optional {
				rs.problem(c, c.ReferenceField, fmt.Sprintf("waits for a %s matching selector %s", c.Target.Kind, describeSelector(s)), false, !s.matchControllerRef, "")
			}
			rs.keep(c.value)
			return
		case len(picked) > 0:
			names = picked
		}
	}
	if !equalStrings(names, refNames) || (len(names) > 0 && rs.owns(c.ref)) {
		refs := make([]any, 0, len(names))
		for _, n := range names {
			refs = append(refs, refObject(n, c.shape))
		}
		rs.set = append(rs.set, assignment{path: c.ref, value: refs})
	}
	if len(names) == 0 {
		rs.keep(c.value)
		return
	}
	if len(curVals) > 0 && !always && equalStrings(names, refNames) {
		rs.keep(c.value)
		return
	}
	values := make([]any, 0, len(names))
	for _, n := range names {
		v, ok := rs.targetValue(ctx, c, n, optional)
		if !ok {
			if optional {
				continue
			}
			rs.keep(c.value)
			return
		}
		values = append(values, v)
	}
	if len(values) == 0 {
		rs.keep(c.value)
		return
	}
	rs.set = append(rs.set, assignment{path: c.value, value: sortedUnique(values)})
}

// targetValue returns the value to copy from the target named name, once it
// exists, shows c's waitFor condition and has a value at c's fromFieldPath.
// It records a problem (unless optional) and returns false otherwise.
func (rs *resolution) targetValue(ctx context.Context, c *Reference, name string, optional bool) (any, bool) {
	what := fmt.Sprintf("%s %q", c.Target.Kind, name)
	t, err := rs.world.Get(ctx, c.target, rs.obj.GetNamespace(), name)
	if err != nil {
		rs.problem(c, c.ValueField, fmt.Sprintf("cannot read %s: %v", what, err), true, true, "")
		return nil, false
	}
	if t == nil {
		if !optional {
			// A composed resource of this XR that does not exist yet
			// reaches the binder through the XR when it is created.
			listed := composes(rs.xr, c.target.GroupKind(), name)
			waits := ""
			if listed {
				waits = what
			}
			rs.problem(c, c.ValueField, fmt.Sprintf("waits for %s to exist", what), false, !listed, waits)
		}
		return nil, false
	}
	external := !controlledBy(t, rs.xr)
	waits := ""
	if !external {
		waits = what
	}
	if c.WaitFor != nil && !condition.IsTrue(t, common.ConditionType(c.WaitFor.ConditionType)) {
		if !optional {
			rs.problem(c, c.ValueField, fmt.Sprintf("waits for %s to be %s=True", what, c.WaitFor.ConditionType), false, external, waits)
		}
		return nil, false
	}
	v, err := fieldpath.GetSegments(t.Object, c.from)
	if err != nil || empty(v) {
		if !optional {
			rs.problem(c, c.ValueField, fmt.Sprintf("waits for %s of %s", c.FromFieldPath, what), false, external, waits)
		}
		return nil, false
	}
	return v, true
}

// composes reports whether xr's spec.resourceRefs lists an object of kind
// gk named name.
func composes(xr *unstructured.Unstructured, gk schema.GroupKind, name string) bool {
	for _, r := range ResourceRefs(xr) {
		if r.GroupVersionKind().GroupKind() == gk && r.Name == name {
			return true
		}
	}
	return false
}

// controlledBy reports whether obj's controller reference names xr.
func controlledBy(obj, xr *unstructured.Unstructured) bool {
	for _, o := range obj.GetOwnerReferences() {
		if o.Controller != nil && *o.Controller {
			return o.UID == xr.GetUID()
		}
	}
	return false
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sortedUnique dedups values and sorts them by their text, as
// crossplane-runtime's ResolveMultiple does.
func sortedUnique(values []any) []any {
	seen := map[string]bool{}
	out := make([]any, 0, len(values))
	for _, v := range values {
		k := fmt.Sprint(v)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, v)
	}
	sort.SliceStable(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
	return out
}

// Cycles returns one error problem per cycle among the waits in problems:
// composed resources that each wait, directly or not, for the other.
func Cycles(problems []Problem) []Problem {
	edges := map[string][]string{}
	for _, p := range problems {
		if p.Waits != "" {
			edges[p.Resource] = append(edges[p.Resource], p.Waits)
		}
	}
	nodes := make([]string, 0, len(edges))
	for n := range edges {
		nodes = append(nodes, n)
		sort.Strings(edges[n])
	}
	sort.Strings(nodes)
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	var out []Problem
	var stack []string
	var visit func(n string)
	visit = func(n string) {
		state[n] = visiting
		stack = append(stack, n)
		for _, m := range edges[n] {
			switch state[m] {
			case unvisited:
				visit(m)
			case visiting:
				i := len(stack) - 1
				for stack[i] != m {
					i--
				}
				cycle := append(append([]string{}, stack[i:]...), m)
				out = append(out, Problem{
					Resource: m,
					Field:    "references",
					Message:  "form a cycle: " + strings.Join(cycle, " waits for "),
					Error:    true,
				})
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
	}
	for _, n := range nodes {
		if state[n] == unvisited {
			visit(n)
		}
	}
	return out
}
