package fn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

// WatchPrefix marks a requirement the function wants Loom to watch: a
// requirement (in requirements.resources or the deprecated
// requirements.extra_resources) whose name starts with it is fetched like any
// other and is also returned in Outcome.Watches. See the package
// documentation.
const WatchPrefix = "loom.dev/watch/"

// A Selector says which resources a requirement selects. APIVersion and Kind
// are always set. Name, when set, selects that one resource; otherwise
// MatchLabels (possibly empty: every resource of the kind) selects by labels.
// Namespace, when set, restricts the selection to that namespace; when empty
// the kind is cluster-scoped or the label match spans all namespaces. It has
// the same fields as a watchreq.Request.
type Selector struct {
	APIVersion  string
	Kind        string
	Namespace   string
	Name        string
	MatchLabels map[string]string
}

// String describes the selector for messages, deterministically.
func (s Selector) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", s.APIVersion, s.Kind)
	switch {
	case s.Name != "":
		fmt.Fprintf(&b, " named %q", s.Name)
	case len(s.MatchLabels) > 0:
		b.WriteString(" with labels ")
		for i, k := range slices.Sorted(maps.Keys(s.MatchLabels)) {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%s=%s", k, s.MatchLabels[k])
		}
	default:
		b.WriteString(" (all)")
	}
	if s.Namespace != "" {
		fmt.Fprintf(&b, " in namespace %q", s.Namespace)
	}
	return b.String()
}

// A ResourceFetcher reads the resources a Selector selects. Nothing matching
// (including a name that does not exist) is an empty result, not an error.
// The Executor sorts what it returns by namespace and name.
type ResourceFetcher interface {
	FetchResources(ctx context.Context, s Selector) ([]map[string]any, error)
}

// ResourceFetcherFn adapts a function to a ResourceFetcher.
type ResourceFetcherFn func(ctx context.Context, s Selector) ([]map[string]any, error)

// FetchResources calls fn.
func (fn ResourceFetcherFn) FetchResources(ctx context.Context, s Selector) ([]map[string]any, error) {
	return fn(ctx, s)
}

// An AllowedResource is one entry of a step's allowedExtraResources. A
// requirement for APIVersion and Kind is allowed by it when:
//   - the entry has neither NameRegex nor LabelRegexes: any requirement of
//     the kind (by name, by labels, or all);
//   - the requirement is by name and NameRegex matches the whole name;
//   - the requirement is by labels and, for every key of LabelRegexes, the
//     requirement's labels hold that key with a value the regex matches
//     wholly.
//
// A requirement for all resources of a kind is allowed only by an entry of
// the first sort. Namespaces are not restricted.
type AllowedResource struct {
	APIVersion   string
	Kind         string
	NameRegex    string
	LabelRegexes map[string]string
}

// policy is a compiled allowedExtraResources. A nil *policy allows all.
type policy struct {
	entries []allowed
}

type allowed struct {
	apiVersion, kind string
	name             *regexp.Regexp
	labels           map[string]*regexp.Regexp
}

// compilePolicy compiles allowedExtraResources; nil gives a nil policy.
func compilePolicy(in []AllowedResource) (*policy, error) {
	if in == nil {
		return nil, nil
	}
	p := &policy{}
	for i, a := range in {
		if a.APIVersion == "" || a.Kind == "" {
			return nil, fmt.Errorf("entry %d: apiVersion and kind are required", i)
		}
		e := allowed{apiVersion: a.APIVersion, kind: a.Kind}
		if a.NameRegex != "" {
			re, err := regexp.Compile(`^(?:` + a.NameRegex + `)$`)
			if err != nil {
				return nil, fmt.Errorf("entry %d: nameRegex: %w", i, err)
			}
			e.name = re
		}
		for _, k := range slices.Sorted(maps.Keys(a.LabelRegexes)) {
			re, err := regexp.Compile(`^(?:` + a.LabelRegexes[k] + `)$`)
			if err != nil {
				return nil, fmt.Errorf("entry %d: labelRegexes[%q]: %w", i, k, err)
			}
			if e.labels == nil {
				e.labels = map[string]*regexp.Regexp{}
			}
			e.labels[k] = re
		}
		p.entries = append(p.entries, e)
	}
	return p, nil
}

// allows reports whether the policy allows s.
func (p *policy) allows(s Selector) bool {
	if p == nil {
		return true
	}
	for _, e := range p.entries {
		if e.apiVersion != s.APIVersion || e.kind != s.Kind {
			continue
		}
		switch {
		case e.name == nil && len(e.labels) == 0:
			return true
		case s.Name != "":
			if e.name != nil && e.name.MatchString(s.Name) {
				return true
			}
		case len(e.labels) > 0 && labelsAllowed(e.labels, s.MatchLabels):
			return true
		}
	}
	return false
}

func labelsAllowed(want map[string]*regexp.Regexp, got map[string]string) bool {
	for k, re := range want {
		v, ok := got[k]
		if !ok || !re.MatchString(v) {
			return false
		}
	}
	return true
}

// requirement is one named requirement of a response.
type requirement struct {
	name       string
	deprecated bool // from requirements.extra_resources
	sel        Selector
}

func (r requirement) String() string {
	field := "resources"
	if r.deprecated {
		field = "extra_resources"
	}
	return fmt.Sprintf("%q (%s; %s)", r.name, field, r.sel)
}

// selectorOf validates and converts a ResourceSelector.
func selectorOf(rs *fnv1.ResourceSelector) (Selector, error) {
	s := Selector{APIVersion: rs.GetApiVersion(), Kind: rs.GetKind(), Namespace: rs.GetNamespace()}
	if s.APIVersion == "" || s.Kind == "" {
		return s, errors.New("apiVersion and kind are required")
	}
	switch m := rs.GetMatch().(type) {
	case *fnv1.ResourceSelector_MatchName:
		if m.MatchName == "" {
			return s, errors.New("matchName is empty")
		}
		s.Name = m.MatchName
	case *fnv1.ResourceSelector_MatchLabels:
		s.MatchLabels = maps.Clone(m.MatchLabels.GetLabels())
	}
	return s, nil
}

// requirementsOf lists a response's resource requirements, sorted by name
// (deprecated ones first).
func requirementsOf(r *fnv1.Requirements) ([]requirement, error) {
	var out []requirement
	for _, src := range []struct {
		m          map[string]*fnv1.ResourceSelector
		deprecated bool
	}{{r.GetExtraResources(), true}, {r.GetResources(), false}} {
		for _, name := range slices.Sorted(maps.Keys(src.m)) {
			s, err := selectorOf(src.m[name])
			if err != nil {
				return nil, fmt.Errorf("requirement %q: %w", name, err)
			}
			out = append(out, requirement{name: name, deprecated: src.deprecated, sel: s})
		}
	}
	return out, nil
}

// A Watch asks the caller to watch the resources a requirement selects and
// render the XR again when one of them changes.
type Watch struct {
	// Step is the pipeline step that made the requirement.
	Step string
	// Requirement is the requirement's full name (WatchPrefix included).
	Requirement string
	// Selector is what to watch. Watching the selector (not only Matched)
	// also catches resources that start to match later.
	Selector Selector
	// Matched are the resources the requirement matched when it was last
	// fetched, sorted by namespace and name.
	Matched []ObjectRef
}

// ObjectRef names one Kubernetes object.
type ObjectRef struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

// satisfy checks a response's requirements against the step's policy, fetches
// what they select into the next request and returns the watches they ask
// for. When any requirement is denied, nothing is fetched.
func (e *Executor) satisfy(ctx context.Context, s Step, pol *policy, reqs *fnv1.Requirements, req *fnv1.RunFunctionRequest) ([]Watch, error) {
	rs, err := requirementsOf(reqs)
	if err != nil {
		msg := fmt.Sprintf("pipeline step %q returned an invalid %v", s.Name, err)
		return nil, stepError(s, msg, fmt.Errorf("%w: %w", ErrInvalidRequirement, err))
	}
	var denied []string
	for _, r := range rs {
		if !pol.allows(r.sel) {
			denied = append(denied, r.String())
		}
	}
	if len(denied) > 0 {
		msg := fmt.Sprintf("pipeline step %q required resources that its allowedExtraResources do not allow: %s", s.Name, strings.Join(denied, ", "))
		return nil, stepError(s, msg, fmt.Errorf("%w: %s", ErrDenied, strings.Join(denied, ", ")))
	}
	if len(rs) > 0 && e.resources == nil {
		err := errors.New("this executor cannot fetch resources")
		return nil, stepError(s, fmt.Sprintf("cannot fetch the resources pipeline step %q requires: %v", s.Name, err), fmt.Errorf("%w: %w", ErrFetch, err))
	}

	req.ExtraResources, req.RequiredResources, req.RequiredSchemas = nil, nil, nil
	var watches []Watch
	for _, r := range rs {
		items, err := e.fetch(ctx, r.sel)
		if err != nil {
			msg := fmt.Sprintf("cannot fetch requirement %s of pipeline step %q: %v", r, s.Name, err)
			return nil, stepError(s, msg, fmt.Errorf("%w: %w", ErrFetch, err))
		}
		m := &req.RequiredResources
		if r.deprecated {
			m = &req.ExtraResources
		}
		if *m == nil {
			*m = map[string]*fnv1.Resources{}
		}
		(*m)[r.name] = items
		if strings.HasPrefix(r.name, WatchPrefix) {
			watches = append(watches, Watch{Step: s.Name, Requirement: r.name, Selector: r.sel, Matched: refs(r.sel, items)})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(reqs.GetSchemas())) {
		sc, err := e.fetchSchema(ctx, reqs.GetSchemas()[name])
		if err != nil {
			msg := fmt.Sprintf("cannot fetch required schema %q of pipeline step %q: %v", name, s.Name, err)
			return nil, stepError(s, msg, fmt.Errorf("%w: %w", ErrFetch, err))
		}
		if req.RequiredSchemas == nil {
			req.RequiredSchemas = map[string]*fnv1.Schema{}
		}
		req.RequiredSchemas[name] = sc
	}
	return watches, nil
}

// fetch reads what s selects, sorted by namespace and name. Nothing found is
// an empty (non-nil) Resources.
func (e *Executor) fetch(ctx context.Context, s Selector) (*fnv1.Resources, error) {
	objs, err := e.resources.FetchResources(ctx, s)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(objs, func(a, b map[string]any) int {
		an, ak := namespacedName(a)
		bn, bk := namespacedName(b)
		return cmp.Or(cmp.Compare(an, bn), cmp.Compare(ak, bk))
	})
	out := &fnv1.Resources{}
	for _, o := range objs {
		st, err := toStruct(o)
		if err != nil {
			return nil, fmt.Errorf("cannot encode %s: %w", s, err)
		}
		out.Items = append(out.Items, &fnv1.Resource{Resource: st})
	}
	return out, nil
}

func (e *Executor) fetchSchema(ctx context.Context, s *fnv1.SchemaSelector) (*fnv1.Schema, error) {
	if e.schemas == nil {
		return &fnv1.Schema{}, nil
	}
	o, err := e.schemas.FetchSchema(ctx, s.GetApiVersion(), s.GetKind())
	if err != nil || o == nil {
		return &fnv1.Schema{}, err
	}
	st, err := toStruct(o)
	if err != nil {
		return nil, fmt.Errorf("cannot encode schema of %s %s: %w", s.GetApiVersion(), s.GetKind(), err)
	}
	return &fnv1.Schema{OpenapiV3: st}, nil
}

// namespacedName returns an object's metadata.namespace and metadata.name.
func namespacedName(o map[string]any) (string, string) {
	md, _ := o["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	n, _ := md["name"].(string)
	return ns, n
}

// refs names the fetched resources.
func refs(s Selector, items *fnv1.Resources) []ObjectRef {
	var out []ObjectRef
	for _, it := range items.GetItems() {
		o := it.GetResource().AsMap()
		ref := ObjectRef{APIVersion: s.APIVersion, Kind: s.Kind}
		ref.Namespace, ref.Name = namespacedName(o)
		out = append(out, ref)
	}
	return out
}
