package compose

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/fieldpath"
)

func envConfig(t testing.TB, name string, labels map[string]string, data string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.crossplane.io/v1beta1",
		"kind":       "EnvironmentConfig",
	}}
	u.SetName(name)
	u.SetLabels(labels)
	if data != "" {
		u.Object["data"] = jsonObj(t, data)
	}
	return u
}

func TestBuildEnvironment(t *testing.T) {
	configs := []*unstructured.Unstructured{
		envConfig(t, "base", map[string]string{"tier": "all"}, `{"region":"eu","db":{"size":"small","port":3306}}`),
		envConfig(t, "prod", map[string]string{"stage": "prod", "tier": "all", "order": "b", "mix": "yes-mixed"}, `{"db":{"size":"large"},"rank":2}`),
		envConfig(t, "prod-extra", map[string]string{"stage": "prod", "order": "a"}, `{"extra":true,"rank":1}`),
		envConfig(t, "dev", map[string]string{"stage": "dev", "mix": "yes-mixed"}, `{"db":{"size":"tiny"},"rank":"x"}`),
		envConfig(t, "empty", map[string]string{"stage": "empty"}, ``),
	}
	const xr = `{"metadata":{"name":"x"},"spec":{"stage":"prod","num":3}}`

	type want struct {
		data     map[string]any
		selected []string
		refs     []string
		err      string
		class    error
	}
	cases := map[string]struct {
		reason string
		cfg    string
		refs   []string
		want   want
	}{
		"Nil": {
			reason: "No environment configuration is an empty environment.",
			cfg:    ``,
			want:   want{data: map[string]any{}},
		},
		"DefaultData": {
			reason: "Default data is the starting environment.",
			cfg:    `{defaultData: {region: us, db: {size: medium}}}`,
			want:   want{data: jsonObj(t, `{"region":"us","db":{"size":"medium"}}`)},
		},
		"ReferencesMergedInOrder": {
			reason: "Referenced configs are merged over default data in order; objects merge deeply, later wins.",
			cfg:    `{defaultData: {region: us, keep: 1}, environmentConfigs: [{type: Reference, ref: {name: base}}, {ref: {name: prod}}]}`,
			want: want{
				data:     jsonObj(t, `{"region":"eu","keep":1,"db":{"size":"large","port":3306},"rank":2}`),
				selected: []string{"base", "prod"},
				refs:     []string{"base", "prod"},
			},
		},
		"ReferenceMissing": {
			reason: "A missing referenced config is an unavailable error naming it.",
			cfg:    `{environmentConfigs: [{ref: {name: nope}}]}`,
			want:   want{err: `cannot build the environment: spec.environment.environmentConfigs[0]: EnvironmentConfig "nope" does not exist`, class: ErrUnavailable},
		},
		"ReferenceMissingOptional": {
			reason: "With resolution Optional a missing config is skipped.",
			cfg:    `{policy: {resolution: Optional}, environmentConfigs: [{ref: {name: nope}}, {ref: {name: base}}]}`,
			want:   want{data: jsonObj(t, `{"region":"eu","db":{"size":"small","port":3306}}`), selected: []string{"base"}, refs: []string{"nope", "base"}},
		},
		"ReferenceWithoutName": {
			reason: "A reference needs a name.",
			cfg:    `{environmentConfigs: [{type: Reference}]}`,
			want:   want{err: "cannot build the environment: spec.environment.environmentConfigs[0]: ref.name is required by type Reference", class: ErrInvalid},
		},
		"SelectorSingleFromComposite": {
			reason: "A Single selector with a label read from the XR selects the one match.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {matchLabels: [{key: stage, type: FromCompositeFieldPath, valueFromFieldPath: spec.stage}, {key: tier, type: Value, value: all}]}}]}`,
			want:   want{data: jsonObj(t, `{"db":{"size":"large"},"rank":2}`), selected: []string{"prod"}, refs: []string{"prod"}},
		},
		"SelectorSingleManyMatches": {
			reason: "A Single selector that matches several configs is an error naming them.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {mode: Single, matchLabels: [{key: stage, valueFromFieldPath: spec.stage}]}}]}`,
			want:   want{err: "cannot build the environment: spec.environment.environmentConfigs[0]: selector in mode Single matches 2 EnvironmentConfigs (prod, prod-extra); want exactly one", class: ErrInvalid},
		},
		"SelectorSingleNoMatch": {
			reason: "A Single selector without a match is unavailable.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {matchLabels: [{key: stage, type: Value, value: qa}]}}]}`,
			want:   want{err: "cannot build the environment: spec.environment.environmentConfigs[0]: no EnvironmentConfig has the labels {stage=qa}", class: ErrUnavailable},
		},
		"SelectorSingleNoMatchOptional": {
			reason: "With resolution Optional a Single selector without a match selects nothing.",
			cfg:    `{policy: {resolution: Optional}, environmentConfigs: [{type: Selector, selector: {matchLabels: [{key: stage, type: Value, value: qa}]}}]}`,
			want:   want{data: map[string]any{}},
		},
		"SelectorSingleWithMaxMatch": {
			reason: "maxMatch is only allowed in mode Multiple.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {maxMatch: 1, matchLabels: [{key: stage, type: Value, value: prod}]}}]}`,
			want:   want{err: "cannot build the environment: spec.environment.environmentConfigs[0]: selector.minMatch and selector.maxMatch are only allowed in mode Multiple", class: ErrInvalid},
		},
		"SelectorMultipleSortedByName": {
			reason: "A Multiple selector merges every match sorted by metadata.name.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {mode: Multiple, matchLabels: [{key: stage, type: Value, value: prod}]}}]}`,
			want:   want{data: jsonObj(t, `{"db":{"size":"large"},"rank":1,"extra":true}`), selected: []string{"prod", "prod-extra"}, refs: []string{"prod", "prod-extra"}},
		},
		"SelectorMultipleSortedByField": {
			reason: "sortByFieldPath orders the matches, so the later one wins.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {mode: Multiple, sortByFieldPath: "metadata.labels[order]", matchLabels: [{key: stage, type: Value, value: prod}]}}]}`,
			want:   want{data: jsonObj(t, `{"db":{"size":"large"},"rank":2,"extra":true}`), selected: []string{"prod-extra", "prod"}, refs: []string{"prod-extra", "prod"}},
		},
		"SelectorMultipleSortedByNumber": {
			reason: "Numbers sort numerically.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {mode: Multiple, sortByFieldPath: data.rank, matchLabels: [{key: stage, type: Value, value: prod}]}}]}`,
			want:   want{data: jsonObj(t, `{"db":{"size":"large"},"rank":2,"extra":true}`), selected: []string{"prod-extra", "prod"}, refs: []string{"prod-extra", "prod"}},
		},
		"SelectorMultipleMixedSortTypes": {
			reason: "Sorting by values of different types is an error.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {mode: Multiple, sortByFieldPath: data.rank, matchLabels: [{key: mix, type: Value, value: yes-mixed}]}}]}`,
			want:   want{err: `cannot build the environment: spec.environment.environmentConfigs[0]: cannot sort by selector.sortByFieldPath data.rank: values are both strings and numbers`, class: ErrInvalid},
		},
		"SelectorMultipleSortFieldMissing": {
			reason: "Sorting by a field that a match lacks is an error.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {mode: Multiple, sortByFieldPath: data.rank, matchLabels: [{key: tier, type: Value, value: all}]}}]}`,
			want:   want{err: `cannot build the environment: spec.environment.environmentConfigs[0]: cannot sort by selector.sortByFieldPath data.rank: EnvironmentConfig "base": data.rank: no such field`, class: ErrInvalid},
		},
		"SelectorMultipleMaxMatch": {
			reason: "maxMatch keeps the first matches.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {mode: Multiple, maxMatch: 1, matchLabels: [{key: stage, type: Value, value: prod}]}}]}`,
			want:   want{data: jsonObj(t, `{"db":{"size":"large"},"rank":2}`), selected: []string{"prod"}, refs: []string{"prod"}},
		},
		"SelectorMultipleMinMatch": {
			reason: "Fewer matches than minMatch is unavailable.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {mode: Multiple, minMatch: 3, matchLabels: [{key: stage, type: Value, value: prod}]}}]}`,
			want:   want{err: "cannot build the environment: spec.environment.environmentConfigs[0]: 2 EnvironmentConfigs have the labels {stage=prod}; want at least 3", class: ErrUnavailable},
		},
		"SelectorLabelFromMissingField": {
			reason: "A label read from a missing XR field is an error by default.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {matchLabels: [{key: stage, valueFromFieldPath: spec.nope}]}}]}`,
			want:   want{err: "cannot build the environment: spec.environment.environmentConfigs[0]: selector.matchLabels[0]: cannot read the composite resource's spec.nope: spec.nope: no such field", class: ErrInvalid},
		},
		"SelectorLabelFromMissingFieldOptional": {
			reason: "With fromFieldPathPolicy Optional the label is dropped; a selector without labels matches nothing.",
			cfg:    `{policy: {resolution: Optional}, environmentConfigs: [{type: Selector, selector: {matchLabels: [{key: stage, valueFromFieldPath: spec.nope, fromFieldPathPolicy: Optional}]}}]}`,
			want:   want{data: map[string]any{}},
		},
		"SelectorLabelNotString": {
			reason: "A label value must be a string.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {matchLabels: [{key: stage, valueFromFieldPath: spec.num}]}}]}`,
			want:   want{err: "cannot build the environment: spec.environment.environmentConfigs[0]: selector.matchLabels[0]: the composite resource's spec.num is integer, want a string", class: ErrInvalid},
		},
		"SelectorMissingValue": {
			reason: "A Value label needs a value.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {matchLabels: [{key: stage, type: Value}]}}]}`,
			want:   want{err: "cannot build the environment: spec.environment.environmentConfigs[0]: selector.matchLabels[0].value is required by type Value", class: ErrInvalid},
		},
		"SelectorMissing": {
			reason: "Type Selector needs a selector.",
			cfg:    `{environmentConfigs: [{type: Selector}]}`,
			want:   want{err: "cannot build the environment: spec.environment.environmentConfigs[0]: selector is required by type Selector", class: ErrInvalid},
		},
		"UnknownSourceType": {
			reason: "An unknown source type is invalid.",
			cfg:    `{environmentConfigs: [{type: Guess}]}`,
			want:   want{err: `cannot build the environment: spec.environment.environmentConfigs[0]: unknown type "Guess" (want Reference or Selector)`, class: ErrInvalid},
		},
		"IfNotPresentKeepsRefs": {
			reason: "Under resolve IfNotPresent (the default) the XR's resolved references are kept: a Single selector that now matches two does not fail.",
			cfg:    `{environmentConfigs: [{type: Selector, selector: {mode: Single, matchLabels: [{key: stage, valueFromFieldPath: spec.stage}]}}]}`,
			refs:   []string{"prod"},
			want:   want{data: jsonObj(t, `{"db":{"size":"large"},"rank":2}`), selected: []string{"prod"}, refs: []string{"prod"}},
		},
		"IfNotPresentKeepsRefsInOrder": {
			reason: "Kept references are merged in their recorded order.",
			cfg:    `{policy: {resolve: IfNotPresent}, environmentConfigs: [{type: Selector, selector: {mode: Multiple, matchLabels: [{key: stage, type: Value, value: prod}]}}]}`,
			refs:   []string{"prod", "base"},
			want:   want{data: jsonObj(t, `{"region":"eu","db":{"size":"small","port":3306},"rank":2}`), selected: []string{"prod", "base"}, refs: []string{"prod", "base"}},
		},
		"IfNotPresentKeptRefMissing": {
			reason: "A kept reference that no longer exists is unavailable, naming the XR's field.",
			cfg:    `{environmentConfigs: [{ref: {name: base}}]}`,
			refs:   []string{"gone"},
			want:   want{err: `cannot build the environment: spec.environment.environmentConfigs: the composite resource's spec.environmentConfigRefs[0]: EnvironmentConfig "gone" does not exist`, class: ErrUnavailable},
		},
		"IfNotPresentKeptRefMissingOptional": {
			reason: "With resolution Optional a kept reference that does not exist is skipped.",
			cfg:    `{policy: {resolution: Optional}, environmentConfigs: [{ref: {name: base}}]}`,
			refs:   []string{"gone", "base"},
			want:   want{data: jsonObj(t, `{"region":"eu","db":{"size":"small","port":3306}}`), selected: []string{"base"}, refs: []string{"gone", "base"}},
		},
		"AlwaysSelectsAgain": {
			reason: "Under resolve Always the selectors are evaluated on every render, whatever the XR recorded.",
			cfg:    `{policy: {resolve: Always}, environmentConfigs: [{type: Selector, selector: {mode: Single, matchLabels: [{key: stage, valueFromFieldPath: spec.stage}]}}]}`,
			refs:   []string{"prod"},
			want:   want{err: "cannot build the environment: spec.environment.environmentConfigs[0]: selector in mode Single matches 2 EnvironmentConfigs (prod, prod-extra); want exactly one", class: ErrInvalid},
		},
		"ConfigWithoutData": {
			reason: "A config without data adds nothing but counts as selected.",
			cfg:    `{environmentConfigs: [{ref: {name: empty}}]}`,
			want:   want{data: map[string]any{}, selected: []string{"empty"}, refs: []string{"empty"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var cfg *v1.EnvironmentConfiguration
			if tc.cfg != "" {
				c := fromYAML[v1.EnvironmentConfiguration](t, tc.cfg)
				cfg = &c
			}
			got, err := buildEnvironment(cfg, fieldpath.Pave(jsonObj(t, xr)), configs, tc.refs)
			if diff := cmp.Diff(tc.want.err, errString(err)); diff != "" {
				t.Errorf("%s\n-want error, +got error:\n%s", tc.reason, diff)
			}
			if tc.want.class != nil && !errors.Is(err, tc.want.class) {
				t.Errorf("%s\nwant an error of class %v, got %v", tc.reason, tc.want.class, err)
			}
			if tc.want.err != "" {
				return
			}
			if diff := cmp.Diff(tc.want.data, got.data); diff != "" {
				t.Errorf("%s\n-want data, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.selected, got.selected, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\n-want selected, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.refs, got.refs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\n-want refs, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestBuildEnvironmentDoesNotAliasConfigs(t *testing.T) {
	c := envConfig(t, "base", nil, `{"db":{"size":"small"}}`)
	cfg := fromYAML[v1.EnvironmentConfiguration](t, `{environmentConfigs: [{ref: {name: base}}]}`)
	env, err := buildEnvironment(&cfg, fieldpath.Pave(map[string]any{}), []*unstructured.Unstructured{c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	env.data["db"].(map[string]any)["size"] = "changed"
	if got, _, _ := unstructured.NestedString(c.Object, "data", "db", "size"); got != "small" {
		t.Errorf("the environment aliases its EnvironmentConfig: data.db.size is %q after the environment changed", got)
	}
}
