package compose

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/fieldpath"
)

// An environment is the in-memory environment of one render and the names of
// the EnvironmentConfigs it was built from.
type environment struct {
	data     map[string]any
	selected []string
	// refs are the references to record on the XR (Result.EnvironmentConfigRefs).
	refs []string
}

// buildEnvironment selects EnvironmentConfigs, or keeps the XR's resolved
// ones (refs) when the resolve policy is IfNotPresent, and merges their data
// over the default data, in order. It does not apply the environment
// patches.
func buildEnvironment(cfg *v1.EnvironmentConfiguration, xr *fieldpath.Paved, configs []*unstructured.Unstructured, refs []string) (environment, error) {
	env := environment{data: map[string]any{}}
	if cfg == nil {
		return env, nil
	}
	for k, v := range cfg.DefaultData {
		val, err := decodeJSON(v.Raw)
		if err != nil {
			return env, &EnvironmentError{Field: fmt.Sprintf("defaultData[%s]", k), Err: err}
		}
		env.data[k] = val
	}

	byName := make(map[string]*unstructured.Unstructured, len(configs))
	sorted := make([]*unstructured.Unstructured, 0, len(configs))
	for _, c := range configs {
		if c == nil {
			continue
		}
		if _, dup := byName[c.GetName()]; !dup {
			sorted = append(sorted, c)
		}
		byName[c.GetName()] = c
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].GetName() < sorted[j].GetName() })

	optional := cfg.IsOptional()
	if len(cfg.EnvironmentConfigs) > 0 && len(refs) > 0 && !cfg.ResolveAlways() {
		// IfNotPresent: the XR resolved its EnvironmentConfigs before;
		// keep them, whatever the selectors would match now.
		env.refs = refs
		for i, name := range refs {
			c, ok := byName[name]
			if !ok {
				if optional {
					continue
				}
				return env, &EnvironmentError{Field: "environmentConfigs", Err: fmt.Errorf("the composite resource's spec.environmentConfigRefs[%d]: %w", i, unavailable("EnvironmentConfig %q does not exist", name))}
			}
			if err := env.merge(c, "environmentConfigs"); err != nil {
				return env, err
			}
		}
		return env, nil
	}
	for i, src := range cfg.EnvironmentConfigs {
		field := fmt.Sprintf("environmentConfigs[%d]", i)
		picked, err := selectConfigs(src, xr, byName, sorted, optional)
		if err != nil {
			return env, &EnvironmentError{Field: field, Err: err}
		}
		if src.GetType() == v1.EnvironmentSourceTypeReference {
			// Recorded even while it does not exist (resolution
			// Optional), as Crossplane records it.
			env.refs = append(env.refs, src.Ref.Name)
		}
		for _, c := range picked {
			if src.GetType() != v1.EnvironmentSourceTypeReference {
				env.refs = append(env.refs, c.GetName())
			}
			if err := env.merge(c, field); err != nil {
				return env, err
			}
		}
	}
	return env, nil
}

// merge merges the data of the EnvironmentConfig c, selected by field, into
// the environment.
func (env *environment) merge(c *unstructured.Unstructured, field string) error {
	data, _, err := unstructured.NestedFieldNoCopy(c.Object, "data")
	if err != nil {
		return &EnvironmentError{Field: field, Err: fmt.Errorf("EnvironmentConfig %q: cannot read data: %w", c.GetName(), err)}
	}
	if data == nil {
		env.selected = append(env.selected, c.GetName())
		return nil
	}
	m, ok := data.(map[string]any)
	if !ok {
		return &EnvironmentError{Field: field, Err: fmt.Errorf("EnvironmentConfig %q: data is %s, want an object", c.GetName(), TypeOf(data))}
	}
	cp, err := fieldpath.ToJSON(m)
	if err != nil {
		return &EnvironmentError{Field: field, Err: fmt.Errorf("EnvironmentConfig %q: %w", c.GetName(), err)}
	}
	mergeOver(env.data, cp.(map[string]any)) //nolint:forcetypeassert // An object stays an object.
	env.selected = append(env.selected, c.GetName())
	return nil
}

// mergeOver merges src into dst: objects recursively, everything else
// replaced.
func mergeOver(dst, src map[string]any) {
	for k, sv := range src {
		sm, sok := sv.(map[string]any)
		dm, dok := dst[k].(map[string]any)
		if sok && dok {
			mergeOver(dm, sm)
			continue
		}
		dst[k] = sv
	}
}

// selectConfigs returns the EnvironmentConfigs one source selects, in merge
// order.
func selectConfigs(src v1.EnvironmentSource, xr *fieldpath.Paved, byName map[string]*unstructured.Unstructured, all []*unstructured.Unstructured, optional bool) ([]*unstructured.Unstructured, error) {
	switch src.GetType() {
	case v1.EnvironmentSourceTypeReference:
		if src.Ref == nil || src.Ref.Name == "" {
			return nil, errors.New("ref.name is required by type Reference")
		}
		c, ok := byName[src.Ref.Name]
		if !ok {
			if optional {
				return nil, nil
			}
			return nil, unavailable("EnvironmentConfig %q does not exist", src.Ref.Name)
		}
		return []*unstructured.Unstructured{c}, nil
	case v1.EnvironmentSourceTypeSelector:
		if src.Selector == nil {
			return nil, errors.New("selector is required by type Selector")
		}
		return selectByLabels(src.Selector, xr, all, optional)
	}
	return nil, fmt.Errorf("unknown type %q (want Reference or Selector)", src.Type)
}

func selectByLabels(sel *v1.EnvironmentSourceSelector, xr *fieldpath.Paved, all []*unstructured.Unstructured, optional bool) ([]*unstructured.Unstructured, error) {
	labels, err := selectorLabels(sel, xr)
	if err != nil {
		return nil, err
	}
	var matched []*unstructured.Unstructured
	if len(labels) > 0 {
		for _, c := range all {
			if hasLabels(c.GetLabels(), labels) {
				matched = append(matched, c)
			}
		}
	}

	switch sel.GetMode() {
	case v1.EnvironmentSourceSelectorSingleMode:
		if sel.MinMatch != nil || sel.MaxMatch != nil {
			return nil, errors.New("selector.minMatch and selector.maxMatch are only allowed in mode Multiple")
		}
		switch len(matched) {
		case 1:
			return matched, nil
		case 0:
			if optional {
				return nil, nil
			}
			return nil, unavailable("no EnvironmentConfig has the labels %s", formatLabels(labels))
		}
		names := make([]string, len(matched))
		for i, c := range matched {
			names[i] = c.GetName()
		}
		return nil, fmt.Errorf("selector in mode Single matches %d EnvironmentConfigs (%s); want exactly one", len(matched), strings.Join(names, ", "))
	case v1.EnvironmentSourceSelectorMultiMode:
		if err := sortConfigs(matched, sel.GetSortByFieldPath()); err != nil {
			return nil, err
		}
		if sel.MaxMatch != nil && uint64(len(matched)) > *sel.MaxMatch {
			matched = matched[:*sel.MaxMatch]
		}
		if sel.MinMatch != nil && uint64(len(matched)) < *sel.MinMatch && !optional {
			return nil, unavailable("%d EnvironmentConfigs have the labels %s; want at least %d", len(matched), formatLabels(labels), *sel.MinMatch)
		}
		return matched, nil
	}
	return nil, fmt.Errorf("unknown selector.mode %q (want Single or Multiple)", sel.Mode)
}

// selectorLabels resolves the label values of a selector.
func selectorLabels(sel *v1.EnvironmentSourceSelector, xr *fieldpath.Paved) (map[string]string, error) {
	labels := make(map[string]string, len(sel.MatchLabels))
	for i, m := range sel.MatchLabels {
		if m.Key == "" {
			return nil, fmt.Errorf("selector.matchLabels[%d].key is required", i)
		}
		switch m.GetType() {
		case v1.EnvironmentSourceSelectorLabelMatcherTypeValue:
			if m.Value == nil {
				return nil, fmt.Errorf("selector.matchLabels[%d].value is required by type Value", i)
			}
			labels[m.Key] = *m.Value
		case v1.EnvironmentSourceSelectorLabelMatcherTypeFromCompositeFieldPath:
			if m.ValueFromFieldPath == nil || *m.ValueFromFieldPath == "" {
				return nil, fmt.Errorf("selector.matchLabels[%d].valueFromFieldPath is required by type FromCompositeFieldPath", i)
			}
			v, err := xr.GetValue(*m.ValueFromFieldPath)
			if fieldpath.IsNotFound(err) && m.FromFieldPathIsOptional() {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("selector.matchLabels[%d]: cannot read the composite resource's %s: %w", i, *m.ValueFromFieldPath, err)
			}
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("selector.matchLabels[%d]: the composite resource's %s is %s, want a string", i, *m.ValueFromFieldPath, TypeOf(v))
			}
			labels[m.Key] = s
		default:
			return nil, fmt.Errorf("selector.matchLabels[%d]: unknown type %q (want FromCompositeFieldPath or Value)", i, m.Type)
		}
	}
	return labels, nil
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

func formatLabels(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// sortConfigs sorts EnvironmentConfigs by the value at path, which must be
// all strings or all numbers. Ties keep name order.
func sortConfigs(cs []*unstructured.Unstructured, path string) error {
	type keyed struct {
		c *unstructured.Unstructured
		v any
	}
	ks := make([]keyed, len(cs))
	kind := ""
	for i, c := range cs {
		v, err := fieldpath.Pave(c.Object).GetValue(path)
		if err != nil {
			return fmt.Errorf("cannot sort by selector.sortByFieldPath %s: EnvironmentConfig %q: %w", path, c.GetName(), err)
		}
		k := TypeOf(v)
		if k == "integer" {
			k = "number"
			v = float64(toInt64(v))
		}
		if k != "string" && k != "number" {
			return fmt.Errorf("cannot sort by selector.sortByFieldPath %s: EnvironmentConfig %q has %s, want a string or a number", path, c.GetName(), TypeOf(v))
		}
		if kind != "" && k != kind {
			return fmt.Errorf("cannot sort by selector.sortByFieldPath %s: values are both %ss and %ss", path, kind, k)
		}
		kind = k
		ks[i] = keyed{c: c, v: v}
	}
	sort.SliceStable(ks, func(i, j int) bool {
		if kind == "string" {
			return ks[i].v.(string) < ks[j].v.(string) //nolint:forcetypeassert // Checked above.
		}
		return ks[i].v.(float64) < ks[j].v.(float64) //nolint:forcetypeassert // Checked above.
	})
	for i := range ks {
		cs[i] = ks[i].c
	}
	return nil
}
