package object

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestReferencesOf(t *testing.T) {
	// The rule as the informer caches it (Transform(ShapeRule)): the
	// fields ReferencesOf reads survive the trim.
	trim := func(t *testing.T, y string) any {
		t.Helper()
		out, err := Transform(ShapeRule)(parse(t, y))
		if err != nil {
			t.Fatalf("Transform(): %v", err)
		}
		return out
	}
	waiting := `
apiVersion: loom.dev/v1alpha1
kind: ReferenceRule
metadata: {name: nops}
spec:
  for: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
  references:
  - valueField: spec.forProvider.fields.network
    referenceField: spec.forProvider.fields.networkRef
    selectorField: spec.forProvider.fields.networkSelector
    target: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    fromFieldPath: status.atProvider.fields.selfLink
    waitFor: {conditionType: Ready}
`
	immediate := `
apiVersion: loom.dev/v1alpha1
kind: ReferenceRule
metadata: {name: buckets}
spec:
  for: {apiVersion: s3.example.org/v1, kind: Bucket}
  references:
  - valueField: spec.forProvider.roleArn
    referenceField: spec.forProvider.roleRef
    target: {apiVersion: iam.example.org/v1, kind: Role}
    fromFieldPath: metadata.name
`
	nop := func(fields, status string) string {
		return "apiVersion: nop.crossplane.io/v1alpha1\nkind: NopResource\nmetadata: {name: n}\nspec: {forProvider: {fields: " + fields + "}}\n" + status
	}
	nopGK := schema.GroupKind{Group: "nop.crossplane.io", Kind: "NopResource"}
	const ready = "status: {conditions: [{type: Ready, status: \"True\"}]}"
	const unready = "status: {conditions: [{type: Ready, status: \"False\"}], atProvider: {fields: {selfLink: x}}}"
	always := strings.Replace(waiting, "waitFor: {conditionType: Ready}", "waitFor: {conditionType: Ready}\n    policy: {resolve: Always}", 1)
	cases := map[string]struct {
		reason string
		rules  []string
		obj    string
		want   References
	}{
		"TargetNotReady": {
			reason: "A target without status (just created) cannot resolve a reference that waits for Ready.",
			rules:  []string{waiting, immediate},
			obj:    nop("{}", ""),
		},
		"TargetReadyFalse": {
			reason: "A target whose Ready condition is False cannot either, whatever value it holds.",
			rules:  []string{waiting},
			obj:    nop("{}", unready),
		},
		"TargetReady": {
			reason: "A target that shows Ready may resolve a reference.",
			rules:  []string{waiting},
			obj:    nop("{}", ready),
			want:   References{Target: true},
		},
		"Selector": {
			reason: "A resource of the rule's kind holding a selector and no value has a reference to resolve, Ready or not.",
			rules:  []string{waiting},
			obj:    nop("{networkSelector: {matchControllerRef: true}}", ""),
			want:   References{Source: true, Pending: true, Wants: []Want{{GK: nopGK, BySelector: true}}},
		},
		"SelectorByLabels": {
			reason: "A selector wants the targets that carry its matchLabels.",
			rules:  []string{waiting},
			obj:    nop("{networkSelector: {matchControllerRef: true, matchLabels: {role: network}}}", ""),
			want:   References{Source: true, Pending: true, Wants: []Want{{GK: nopGK, BySelector: true, Labels: map[string]string{"role": "network"}}}},
		},
		"SelectorLabelNotAString": {
			reason: "A matchLabels value that is not a string cannot be judged: any target is wanted.",
			rules:  []string{waiting},
			obj:    nop("{networkSelector: {matchLabels: {role: 3}}}", ""),
			want:   References{Source: true, Pending: true},
		},
		"ListReference": {
			reason: "A list of references wants every target it names.",
			rules:  []string{waiting},
			obj:    nop("{networkRef: [{name: a}, {name: b}]}", ""),
			want:   References{Source: true, Pending: true, Wants: []Want{{GK: nopGK, ByName: true, Names: []string{"a", "b"}}}},
		},
		"ReferenceShapeFrom": {
			reason: "A reference of shape From names its target under from.",
			rules:  []string{strings.Replace(waiting, "    target:", "    referenceShape: From\n    target:", 1)},
			obj:    nop("{networkRef: {from: {name: net}}}", ""),
			want:   References{Source: true, Pending: true, Wants: []Want{{GK: nopGK, ByName: true, Names: []string{"net"}}}},
		},
		"ReferenceWithoutName": {
			reason: "A reference that names nothing cannot be judged: any target is wanted.",
			rules:  []string{waiting},
			obj:    nop("{networkRef: {uid: x}}", ""),
			want:   References{Source: true, Pending: true},
		},
		"Reference": {
			reason: "So has one holding a reference.",
			rules:  []string{waiting},
			obj:    nop("{networkRef: {name: net}}", ready),
			want:   References{Source: true, Pending: true, Target: true, Wants: []Want{{GK: nopGK, ByName: true, Names: []string{"net"}}}},
		},
		"Resolved": {
			reason: "A reference whose value is there resolved (policy IfNotPresent, the default).",
			rules:  []string{waiting},
			obj:    nop("{networkRef: {name: net}, network: projects/n}", ""),
			want:   References{Source: true},
		},
		"ResolvedAlwaysByRule": {
			reason: "A rule whose reference resolves Always keeps it pending.",
			rules:  []string{always},
			obj:    nop("{networkRef: {name: net}, network: projects/n}", ""),
			want:   References{Source: true, Pending: true, Wants: []Want{{GK: nopGK, ByName: true, Names: []string{"net"}}}},
		},
		"ResolvedAlwaysBySelector": {
			reason: "So does a selector whose own policy says Always.",
			rules:  []string{waiting},
			obj:    nop("{networkSelector: {matchControllerRef: true, policy: {resolve: Always}}, networkRef: {name: net}, network: projects/n}", ""),
			want:   References{Source: true, Pending: true, Wants: []Want{{GK: nopGK, ByName: true, Names: []string{"net"}, BySelector: true}}},
		},
		"NullSelector": {
			reason: "A null selector holds nothing to resolve.",
			rules:  []string{waiting},
			obj:    nop("{networkSelector: null}", ""),
		},
		"UnparsablePath": {
			reason: "A field path that cannot be read on the object cannot be judged: a pending source.",
			rules:  []string{waiting},
			obj:    "apiVersion: nop.crossplane.io/v1alpha1\nkind: NopResource\nmetadata: {name: n}\nspec: {forProvider: {fields: [a]}}\n",
			want:   References{Source: true, Pending: true},
		},
		"TargetWithoutWaitFor": {
			reason: "A target of a reference without waitFor may hold its value at once.",
			rules:  []string{waiting, immediate},
			obj:    "apiVersion: iam.example.org/v1\nkind: Role\nmetadata: {name: r}\n",
			want:   References{Target: true},
		},
		"UnnamedKind": {
			reason: "A kind no rule names is nothing to them (the route does not ask: the binder hears of no such kind).",
			rules:  []string{waiting, immediate},
			obj:    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rules := make([]any, 0, len(tc.rules))
			for _, r := range tc.rules {
				rules = append(rules, trim(t, r))
			}
			if got := ReferencesOf(rules, parse(t, tc.obj)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s\nReferencesOf() = %+v, want %+v", tc.reason, got, tc.want)
			}
		})
	}
	t.Run("NotUnstructured", func(t *testing.T) {
		if got := ReferencesOf([]any{"rule"}, parse(t, nop("{}", ""))); !reflect.DeepEqual(got, References{Source: true, Pending: true, Target: true}) {
			t.Errorf("a rule the watcher cannot read must make every object everything to the rules, got %+v", got)
		}
	})
	t.Run("NoRules", func(t *testing.T) {
		if got := ReferencesOf(nil, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}); !reflect.DeepEqual(got, References{}) {
			t.Errorf("with no rules an object is nothing to them, got %+v", got)
		}
	})
}

func TestWantTakes(t *testing.T) {
	nops := schema.GroupKind{Group: "nop.crossplane.io", Kind: "NopResource"}
	roles := schema.GroupKind{Group: "iam.example.org", Kind: "Role"}
	network := map[string]string{"role": "network", "tier": "a"}
	cases := map[string]struct {
		want   Want
		gk     schema.GroupKind
		name   string
		labels map[string]string
		takes  bool
	}{
		"AnyOfKind":           {want: Want{GK: nops}, gk: nops, name: "x", takes: true},
		"OtherKind":           {want: Want{GK: nops}, gk: roles, name: "x"},
		"Named":               {want: Want{GK: nops, ByName: true, Names: []string{"a", "net"}}, gk: nops, name: "net", takes: true},
		"NotNamed":            {want: Want{GK: nops, ByName: true, Names: []string{"a"}}, gk: nops, name: "net", labels: network},
		"Labels":              {want: Want{GK: nops, BySelector: true, Labels: map[string]string{"role": "network"}}, gk: nops, name: "net", labels: network, takes: true},
		"LabelMissing":        {want: Want{GK: nops, BySelector: true, Labels: map[string]string{"role": "network"}}, gk: nops, name: "cache"},
		"LabelOtherValue":     {want: Want{GK: nops, BySelector: true, Labels: map[string]string{"role": "network"}}, gk: nops, name: "db", labels: map[string]string{"role": "database"}},
		"SelectorNoLabels":    {want: Want{GK: nops, BySelector: true}, gk: nops, name: "cache", takes: true},
		"NameOrLabels":        {want: Want{GK: nops, ByName: true, Names: []string{"a"}, BySelector: true, Labels: map[string]string{"role": "network"}}, gk: nops, name: "net", labels: network, takes: true},
		"NameOrLabelsNeither": {want: Want{GK: nops, ByName: true, Names: []string{"a"}, BySelector: true, Labels: map[string]string{"role": "network"}}, gk: nops, name: "b"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.want.Takes(tc.gk, tc.name, tc.labels); got != tc.takes {
				t.Errorf("%+v.Takes(%v, %q, %v) = %t, want %t", tc.want, tc.gk, tc.name, tc.labels, got, tc.takes)
			}
		})
	}
}
