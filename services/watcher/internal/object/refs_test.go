package object

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
			want:   References{Source: true, Pending: true},
		},
		"Reference": {
			reason: "So has one holding a reference.",
			rules:  []string{waiting},
			obj:    nop("{networkRef: {name: net}}", ready),
			want:   References{Source: true, Pending: true, Target: true},
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
			want:   References{Source: true, Pending: true},
		},
		"ResolvedAlwaysBySelector": {
			reason: "So does a selector whose own policy says Always.",
			rules:  []string{waiting},
			obj:    nop("{networkSelector: {matchControllerRef: true, policy: {resolve: Always}}, networkRef: {name: net}, network: projects/n}", ""),
			want:   References{Source: true, Pending: true},
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
			if got := ReferencesOf(rules, parse(t, tc.obj)); got != tc.want {
				t.Errorf("%s\nReferencesOf() = %+v, want %+v", tc.reason, got, tc.want)
			}
		})
	}
	t.Run("NotUnstructured", func(t *testing.T) {
		if got := ReferencesOf([]any{"rule"}, parse(t, nop("{}", ""))); got != (References{Source: true, Pending: true, Target: true}) {
			t.Errorf("a rule the watcher cannot read must make every object everything to the rules, got %+v", got)
		}
	})
	t.Run("NoRules", func(t *testing.T) {
		if got := ReferencesOf(nil, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}); got != (References{}) {
			t.Errorf("with no rules an object is nothing to them, got %+v", got)
		}
	})
}
