package reference

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
	"github.com/loomxr/loom/pkg/fieldpath"
	kitkube "github.com/loomxr/loom/pkg/kube"
)

// RuleGroupVersionKind is the kind of Loom's reference rules.
var RuleGroupVersionKind = v1alpha1.SchemeGroupVersion.WithKind("ReferenceRule") //nolint:gochecknoglobals // Treated as a constant.

// A Rule is every reference of one composed kind, merged from the
// ReferenceRules for that kind and compiled.
type Rule struct {
	// For is the composed kind.
	For schema.GroupKind
	// References, sorted by value field.
	References []Reference
	// Sources are the names of the ReferenceRules merged into this rule.
	Sources []string
}

// A Reference is a compiled reference of a rule: its field paths parsed.
type Reference struct {
	v1alpha1.Reference

	// Rule is the name of the ReferenceRule that defines this reference.
	Rule string

	value, ref, selector, from fieldpath.Segments
	target                     schema.GroupVersionKind
	shape                      v1alpha1.ReferenceShape
}

// Compile parses a ReferenceRule's field paths and kinds. Its error names
// the rule, the reference and the field at fault.
func Compile(r *v1alpha1.ReferenceRule) ([]Reference, error) {
	if r.Spec.For.Kind == "" || r.Spec.For.APIVersion == "" {
		return nil, fmt.Errorf("reference rule %q: spec.for needs an apiVersion and a kind", r.GetName())
	}
	if _, err := schema.ParseGroupVersion(r.Spec.For.APIVersion); err != nil {
		return nil, fmt.Errorf("reference rule %q: spec.for.apiVersion: %w", r.GetName(), err)
	}
	out := make([]Reference, 0, len(r.Spec.References))
	seen := map[string]bool{}
	var errs []error
	for i, ref := range r.Spec.References {
		at := fmt.Sprintf("reference rule %q: spec.references[%d]", r.GetName(), i)
		c := Reference{Reference: ref, Rule: r.GetName(), shape: ref.ReferenceShape}
		if c.shape == "" {
			c.shape = v1alpha1.ReferenceShapeName
		}
		if c.shape != v1alpha1.ReferenceShapeName && c.shape != v1alpha1.ReferenceShapeFrom {
			errs = append(errs, fmt.Errorf("%s.referenceShape: unknown shape %q (want Name or From)", at, c.shape))
			continue
		}
		parse := func(field, path string, required bool) fieldpath.Segments {
			if path == "" {
				if required {
					errs = append(errs, fmt.Errorf("%s.%s: must not be empty", at, field))
				}
				return nil
			}
			s, err := fieldpath.Parse(path)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.%s: %w", at, field, err))
				return nil
			}
			if s.HasWildcard() {
				errs = append(errs, fmt.Errorf("%s.%s: wildcards are not allowed in %q", at, field, path))
				return nil
			}
			return s
		}
		c.value = parse("valueField", ref.ValueField, true)
		c.ref = parse("referenceField", ref.ReferenceField, true)
		c.selector = parse("selectorField", ref.SelectorField, false)
		c.from = parse("fromFieldPath", ref.FromFieldPath, true)
		gv, err := schema.ParseGroupVersion(ref.Target.APIVersion)
		if err != nil || ref.Target.APIVersion == "" || ref.Target.Kind == "" {
			errs = append(errs, fmt.Errorf("%s.target: needs a valid apiVersion and a kind", at))
		}
		c.target = gv.WithKind(ref.Target.Kind)
		if seen[ref.ValueField] {
			errs = append(errs, fmt.Errorf("%s.valueField: %q is listed twice", at, ref.ValueField))
		}
		seen[ref.ValueField] = true
		out = append(out, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// A Lister lists objects of a kind.
type Lister interface {
	List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]unstructured.Unstructured, error)
}

// Rules caches the compiled ReferenceRules by composed kind. It loads them
// with one LIST, on first use, on Refresh (a rule changed) and when older
// than its time to live. It is safe for concurrent use.
type Rules struct {
	list Lister
	ttl  time.Duration
	now  func() time.Time

	mu       sync.Mutex
	loadedAt time.Time
	byKind   map[schema.GroupKind]*Rule
	invalid  map[string]error
	kindOf   map[string]schema.GroupKind
}

// NewRules returns a cache that lists rules through l and reloads them when
// older than ttl.
func NewRules(l Lister, ttl time.Duration) *Rules {
	return &Rules{list: l, ttl: ttl, now: time.Now}
}

// For returns the rule of composed kind gk, or nil if no ReferenceRule is
// for that kind.
func (r *Rules) For(ctx context.Context, gk schema.GroupKind) (*Rule, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKind == nil || r.now().Sub(r.loadedAt) >= r.ttl {
		if err := r.load(ctx); err != nil {
			return nil, err
		}
	}
	return r.byKind[gk], nil
}

// Refresh reloads every rule now.
func (r *Rules) Refresh(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.load(ctx)
}

// Invalid returns why the named ReferenceRule was not used, or nil if it
// was (or does not exist).
func (r *Rules) Invalid(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.invalid[name]
}

// KindOf returns the composed kind the named ReferenceRule was for when the
// rules were last loaded.
func (r *Rules) KindOf(name string) (schema.GroupKind, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gk, ok := r.kindOf[name]
	return gk, ok
}

func (r *Rules) load(ctx context.Context) error {
	// The watcher watches every ReferenceRule, and mirrors a changed one
	// before its event asks for a Refresh: with the object mirror, the
	// list is a scan of it, not a LIST per XR a rule change fans out to.
	items, err := r.list.List(kitkube.WholeKind(ctx), RuleGroupVersionKind, "", nil)
	if meta.IsNoMatchError(err) {
		// Without Loom's ReferenceRule CRD there are no rules.
		items, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("cannot list reference rules: %w", err)
	}
	// Sorted by name, so that when two rules claim the same value field the
	// same one wins on every replica.
	sort.Slice(items, func(i, j int) bool { return items[i].GetName() < items[j].GetName() })
	byKind := map[schema.GroupKind]*Rule{}
	invalid := map[string]error{}
	kindOf := map[string]schema.GroupKind{}
	for i := range items {
		rr := &v1alpha1.ReferenceRule{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(items[i].Object, rr); err != nil {
			invalid[items[i].GetName()] = fmt.Errorf("reference rule %q: cannot decode: %w", items[i].GetName(), err)
			continue
		}
		gk := schema.FromAPIVersionAndKind(rr.Spec.For.APIVersion, rr.Spec.For.Kind).GroupKind()
		kindOf[rr.GetName()] = gk
		refs, err := Compile(rr)
		if err != nil {
			invalid[rr.GetName()] = err
			continue
		}
		rule := byKind[gk]
		if rule == nil {
			rule = &Rule{For: gk}
			byKind[gk] = rule
		}
		if err := merge(rule, rr.GetName(), refs); err != nil {
			invalid[rr.GetName()] = err
			continue
		}
	}
	r.byKind, r.invalid, r.kindOf, r.loadedAt = byKind, invalid, kindOf, r.now()
	return nil
}

// merge adds refs to rule unless one of their value fields is already
// there, in which case the whole rule named name is refused.
func merge(rule *Rule, name string, refs []Reference) error {
	for _, c := range refs {
		for _, e := range rule.References {
			if e.ValueField == c.ValueField {
				return fmt.Errorf("reference rule %q: value field %q of %s is already resolved by reference rule %q", name, c.ValueField, rule.For.Kind, e.Rule)
			}
		}
	}
	rule.References = append(rule.References, refs...)
	sort.Slice(rule.References, func(i, j int) bool { return rule.References[i].ValueField < rule.References[j].ValueField })
	rule.Sources = append(rule.Sources, name)
	return nil
}
