package fn

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPolicy(t *testing.T) {
	env := func(s Selector) Selector {
		s.APIVersion, s.Kind = "apiextensions.crossplane.io/v1beta1", "EnvironmentConfig"
		return s
	}
	kindWide := AllowedResource{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig"}
	byName := AllowedResource{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", NameRegex: "team-[a-z]+"}
	byLabel := AllowedResource{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", LabelRegexes: map[string]string{"env": "prod|dev"}}

	cases := map[string]struct {
		reason  string
		allowed []AllowedResource
		sel     Selector
		want    bool
	}{
		"NoPolicy":            {reason: "nil allowedExtraResources allows everything.", allowed: nil, sel: env(Selector{}), want: true},
		"EmptyPolicy":         {reason: "An empty allowedExtraResources allows nothing.", allowed: []AllowedResource{}, sel: env(Selector{Name: "a"}), want: false},
		"KindWideByName":      {reason: "An entry with no regexes allows a name.", allowed: []AllowedResource{kindWide}, sel: env(Selector{Name: "a"}), want: true},
		"KindWideAll":         {reason: "An entry with no regexes allows all of the kind.", allowed: []AllowedResource{kindWide}, sel: env(Selector{}), want: true},
		"OtherKind":           {reason: "Entries only allow their own kind.", allowed: []AllowedResource{kindWide}, sel: Selector{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}, want: false},
		"OtherVersion":        {reason: "Entries only allow their own apiVersion.", allowed: []AllowedResource{kindWide}, sel: Selector{APIVersion: "apiextensions.crossplane.io/v1alpha1", Kind: "EnvironmentConfig"}, want: false},
		"NameMatches":         {reason: "A name matching nameRegex wholly is allowed.", allowed: []AllowedResource{byName}, sel: env(Selector{Name: "team-a"}), want: true},
		"NameMatchesPartly":   {reason: "nameRegex is anchored at both ends.", allowed: []AllowedResource{byName}, sel: env(Selector{Name: "team-a-2"}), want: false},
		"NameRegexNoLabels":   {reason: "A nameRegex entry does not allow label requests.", allowed: []AllowedResource{byName}, sel: env(Selector{MatchLabels: map[string]string{"env": "prod"}}), want: false},
		"NameRegexNotAll":     {reason: "A nameRegex entry does not allow all of the kind.", allowed: []AllowedResource{byName}, sel: env(Selector{}), want: false},
		"LabelMatches":        {reason: "Labels whose values match labelRegexes are allowed, extra labels too.", allowed: []AllowedResource{byLabel}, sel: env(Selector{MatchLabels: map[string]string{"env": "dev", "team": "x"}}), want: true},
		"LabelValueMismatch":  {reason: "A label value outside its regex is denied.", allowed: []AllowedResource{byLabel}, sel: env(Selector{MatchLabels: map[string]string{"env": "production"}}), want: false},
		"LabelMissing":        {reason: "A request lacking a constrained label is denied.", allowed: []AllowedResource{byLabel}, sel: env(Selector{MatchLabels: map[string]string{"team": "x"}}), want: false},
		"LabelEntryNoName":    {reason: "A labelRegexes entry does not allow name requests.", allowed: []AllowedResource{byLabel}, sel: env(Selector{Name: "a"}), want: false},
		"LabelEntryNoAll":     {reason: "A labelRegexes entry does not allow all of the kind.", allowed: []AllowedResource{byLabel}, sel: env(Selector{}), want: false},
		"AnyEntry":            {reason: "One allowing entry is enough.", allowed: []AllowedResource{byLabel, byName}, sel: env(Selector{Name: "team-b"}), want: true},
		"NamespaceIrrelevant": {reason: "Namespaces are not restricted.", allowed: []AllowedResource{byName}, sel: env(Selector{Name: "team-b", Namespace: "x"}), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := compilePolicy(tc.allowed)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.allows(tc.sel); got != tc.want {
				t.Errorf("%s\nallows(%s): want %t, got %t", tc.reason, tc.sel, tc.want, got)
			}
		})
	}
}

func TestCompilePolicyErrors(t *testing.T) {
	cases := map[string]struct {
		reason  string
		allowed []AllowedResource
		want    string
	}{
		"NoKind":        {reason: "apiVersion and kind are required.", allowed: []AllowedResource{{APIVersion: "v1"}}, want: "entry 0: apiVersion and kind are required"},
		"BadNameRegex":  {reason: "A bad nameRegex is reported with its entry.", allowed: []AllowedResource{{APIVersion: "v1", Kind: "ConfigMap", NameRegex: "("}}, want: "entry 0: nameRegex: error parsing regexp: missing closing ): `^(?:()$`"},
		"BadLabelRegex": {reason: "A bad label regex is reported with its entry and key.", allowed: []AllowedResource{{APIVersion: "v1", Kind: "ConfigMap"}, {APIVersion: "v1", Kind: "Secret", LabelRegexes: map[string]string{"a": "[z-a]"}}}, want: "entry 1: labelRegexes[\"a\"]: error parsing regexp: invalid character class range: `z-a`"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := compilePolicy(tc.allowed)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ncompilePolicy(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSelectorString(t *testing.T) {
	cases := map[string]struct {
		sel  Selector
		want string
	}{
		"Name":   {sel: Selector{APIVersion: "v1", Kind: "ConfigMap", Name: "a", Namespace: "ns"}, want: `v1 ConfigMap named "a" in namespace "ns"`},
		"Labels": {sel: Selector{APIVersion: "v1", Kind: "ConfigMap", MatchLabels: map[string]string{"b": "2", "a": "1"}}, want: `v1 ConfigMap with labels a=1,b=2`},
		"All":    {sel: Selector{APIVersion: "v1", Kind: "ConfigMap"}, want: `v1 ConfigMap (all)`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.sel.String()); diff != "" {
				t.Errorf("String(): -want, +got:\n%s", diff)
			}
		})
	}
}
