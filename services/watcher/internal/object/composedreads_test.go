package object

import "testing"

func TestReadsComposedSpec(t *testing.T) {
	const head = "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: c}\nspec:\n  compositeTypeRef: {apiVersion: example.org/v1, kind: XDatabase}\n"
	cases := map[string]struct {
		reason string
		spec   string // the rest of the spec, indented by two spaces
		want   string
		// reads and skips are templates whose resources a render may and
		// may not read outside status, as ReadsComposedSpec answers from
		// the cached Composition.
		reads, skips []string
	}{
		"Bench": {
			reason: "A ToCompositeFieldPath patch from status and the default readiness check read only status; patches into the composed resource read none of it.",
			spec: `  resources:
  - name: network
    patches:
    - {fromFieldPath: metadata.name, toFieldPath: spec.forProvider.fields.selfLink}
  - name: database
    patches:
    - {type: FromCompositeFieldPath, fromFieldPath: spec.parameters.storageGB, toFieldPath: spec.forProvider.fields.storageMB}
  - name: cache
    patches:
    - {type: ToCompositeFieldPath, fromFieldPath: status.atProvider.fields.tier, toFieldPath: status.tier}
    readinessChecks:
    - {type: MatchCondition, matchCondition: {type: Ready, status: "True"}}
`,
			want:  "",
			reads: []string{""},
			skips: []string{"network", "database", "cache"},
		},
		"Reads": {
			reason: "Patches to the XR or the environment and readiness checks that read outside status name their templates, sorted; so does a PatchSet that does, where included.",
			spec: `  patchSets:
  - name: spec-back
    patches: [{type: ToCompositeFieldPath, fromFieldPath: spec.forProvider.region, toFieldPath: status.region}]
  - name: harmless
    patches: [{type: FromCompositeFieldPath, fromFieldPath: spec.region, toFieldPath: spec.forProvider.region}]
  resources:
  - name: zeta
    patches: [{type: ToCompositeFieldPath, fromFieldPath: spec.forProvider.a, toFieldPath: status.a}]
  - name: env
    patches: [{type: ToEnvironmentFieldPath, fromFieldPath: metadata.labels.x, toFieldPath: x}]
  - name: combined
    patches:
    - type: CombineToComposite
      combine: {variables: [{fromFieldPath: status.a}, {fromFieldPath: spec.b}], strategy: string, string: {fmt: "%s-%s"}}
      toFieldPath: status.ab
  - name: ready
    readinessChecks: [{type: MatchString, fieldPath: spec.forProvider.state, matchString: up}]
  - name: set
    patches: [{type: PatchSet, patchSetName: spec-back}]
  - name: other-set
    patches: [{type: PatchSet, patchSetName: harmless}]
  - name: ready-status
    readinessChecks: [{type: NonEmpty, fieldPath: status.atProvider.id}, {type: None}]
`,
			want:  "combined,env,ready,set,zeta",
			reads: []string{"zeta", "env", "combined", "ready", "set"},
			skips: []string{"other-set", "ready-status"},
		},
		"UnknownPatchSet": {
			reason: "A PatchSet that is not there cannot be judged.",
			spec:   "  resources:\n  - name: a\n    patches: [{type: PatchSet, patchSetName: missing}]\n",
			want:   "a",
			reads:  []string{"a"},
		},
		"Unnamed": {
			reason: "A template without a name that reads its resource could be any composed resource.",
			spec:   "  resources:\n  - patches: [{type: ToCompositeFieldPath, fromFieldPath: spec.a, toFieldPath: status.a}]\n",
			want:   "*",
			reads:  []string{"anything"},
		},
		"Pipeline": {
			reason: "Functions see observed resources whole.",
			spec:   "  mode: Pipeline\n  pipeline: [{step: s, functionRef: {name: f}}]\n",
			want:   "*",
			reads:  []string{"anything"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkTemplates(t, tc.reason, parse(t, head+tc.spec), readsComposedSpec, ReadsComposedSpec, tc.want, tc.reads, tc.skips)
		})
	}
}

func TestReadsComposedStatus(t *testing.T) {
	const head = "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: c}\nspec:\n  compositeTypeRef: {apiVersion: example.org/v1, kind: XDatabase}\n"
	cases := map[string]struct {
		reason string
		spec   string // the rest of the spec, indented by two spaces
		want   string
		// reads and skips are templates whose resources' status a render
		// may and may not read beyond the Ready condition, as
		// ReadsComposedStatus answers from the cached Composition.
		reads, skips []string
	}{
		"Bench": {
			reason: "Patches into the composed resources, the default readiness check and a MatchCondition check of Ready read no status beyond the Ready condition; connection details are the secrets service's.",
			spec: `  resources:
  - name: network
    patches:
    - {fromFieldPath: metadata.name, toFieldPath: spec.forProvider.fields.selfLink}
    connectionDetails:
    - {name: link, type: FromFieldPath, fromFieldPath: status.atProvider.fields.selfLink}
  - name: database
    patches:
    - {type: FromCompositeFieldPath, fromFieldPath: spec.parameters.storageGB, toFieldPath: spec.forProvider.fields.storageMB}
  - name: cache
    readinessChecks:
    - {type: MatchCondition, matchCondition: {type: Ready, status: "True"}}
`,
			want:  "",
			reads: []string{""},
			skips: []string{"network", "database", "cache"},
		},
		"Reads": {
			reason: "Patches to the XR or the environment from status, and readiness checks of status fields or of conditions other than Ready, name their templates, sorted; so does a PatchSet that does, where included.",
			spec: `  patchSets:
  - name: status-back
    patches: [{type: ToCompositeFieldPath, fromFieldPath: status.atProvider.id, toFieldPath: status.id}]
  - name: spec-back
    patches: [{type: ToCompositeFieldPath, fromFieldPath: spec.forProvider.region, toFieldPath: status.region}]
  resources:
  - name: zeta
    patches: [{type: ToCompositeFieldPath, fromFieldPath: status.atProvider.a, toFieldPath: status.a}]
  - name: env
    patches: [{type: ToEnvironmentFieldPath, fromFieldPath: status.x, toFieldPath: x}]
  - name: combined
    patches:
    - type: CombineToComposite
      combine: {variables: [{fromFieldPath: spec.b}, {fromFieldPath: status.a}], strategy: string, string: {fmt: "%s-%s"}}
      toFieldPath: status.ab
  - name: ready-field
    readinessChecks: [{type: NonEmpty, fieldPath: status.atProvider.id}]
  - name: ready-condition
    readinessChecks: [{type: MatchCondition, matchCondition: {type: Healthy, status: "True"}}]
  - name: set
    patches: [{type: PatchSet, patchSetName: status-back}]
  - name: other-set
    patches: [{type: PatchSet, patchSetName: spec-back}]
  - name: spec-only
    patches: [{type: ToCompositeFieldPath, fromFieldPath: spec.forProvider.a, toFieldPath: status.a}]
    readinessChecks: [{type: MatchString, fieldPath: spec.forProvider.state, matchString: up}, {type: None}]
`,
			want:  "combined,env,ready-condition,ready-field,set,zeta",
			reads: []string{"zeta", "env", "combined", "ready-field", "ready-condition", "set"},
			skips: []string{"other-set", "spec-only"},
		},
		"UnknownPatchSet": {
			reason: "A PatchSet that is not there cannot be judged.",
			spec:   "  resources:\n  - name: a\n    patches: [{type: PatchSet, patchSetName: missing}]\n",
			want:   "a",
			reads:  []string{"a"},
		},
		"Unnamed": {
			reason: "A template without a name that reads its resource's status could be any composed resource.",
			spec:   "  resources:\n  - patches: [{type: ToCompositeFieldPath, fromFieldPath: status.a, toFieldPath: status.a}]\n",
			want:   "*",
			reads:  []string{"anything"},
		},
		"Pipeline": {
			reason: "Functions see observed resources whole.",
			spec:   "  mode: Pipeline\n  pipeline: [{step: s, functionRef: {name: f}}]\n",
			want:   "*",
			reads:  []string{"anything"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkTemplates(t, tc.reason, parse(t, head+tc.spec), readsComposedStatus, ReadsComposedStatus, tc.want, tc.reads, tc.skips)
		})
	}
}

func TestReadyRequired(t *testing.T) {
	const head = "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: c}\nspec:\n  compositeTypeRef: {apiVersion: example.org/v1, kind: XDatabase}\n"
	cases := map[string]struct {
		reason string
		spec   string // the rest of the spec, indented by two spaces
		want   string
		// required and not are templates whose resources' readiness does
		// and does not require the Ready condition True, as ReadyRequired
		// answers from the cached Composition.
		required, not []string
	}{
		"Checks": {
			reason: "No checks (the default) and a MatchCondition check of Ready and True among others require it; None, field checks and other conditions do not; nor does a template without a name, which names no resource.",
			spec: `  resources:
  - name: zeta
  - name: explicit
    readinessChecks:
    - {type: NonEmpty, fieldPath: status.atProvider.id}
    - {type: MatchCondition, matchCondition: {type: Ready, status: "True"}}
  - name: none
    readinessChecks: [{type: None}]
  - name: field
    readinessChecks: [{type: MatchString, fieldPath: status.atProvider.state, matchString: up}]
  - name: healthy
    readinessChecks: [{type: MatchCondition, matchCondition: {type: Healthy, status: "True"}}]
  - name: not-ready
    readinessChecks: [{type: MatchCondition, matchCondition: {type: Ready, status: "False"}}]
  - base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
`,
			want:     "explicit,zeta",
			required: []string{"zeta", "explicit"},
			not:      []string{"none", "field", "healthy", "not-ready", "", "unknown"},
		},
		"Pipeline": {
			reason: "Functions judge readiness.",
			spec:   "  mode: Pipeline\n  pipeline: [{step: s, functionRef: {name: f}}]\n",
			want:   "",
			not:    []string{"anything", ""},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkTemplates(t, tc.reason, parse(t, head+tc.spec), readyRequired, ReadyRequired, tc.want, tc.required, tc.not)
		})
	}
}

func TestStatusToSpec(t *testing.T) {
	const head = "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: c}\nspec:\n  compositeTypeRef: {apiVersion: example.org/v1, kind: XDatabase}\n"
	cases := map[string]struct {
		reason string
		spec   string // the rest of the spec, indented by two spaces
		want   string
		// to and not are templates whose resources' status a render may
		// and may not write into the XR's spec or metadata or the
		// environment, as StatusToSpec answers from the cached Composition.
		to, not []string
	}{
		"Patches": {
			reason: "Status read into the XR's spec or metadata or the environment names the template (through a PatchSet too); status read into the XR's status (the toFieldPath defaults to the fromFieldPath), spec read anywhere and readiness checks do not.",
			spec: `  patchSets:
  - name: to-spec
    patches: [{type: ToCompositeFieldPath, fromFieldPath: status.atProvider.id, toFieldPath: spec.id}]
  - name: to-status
    patches: [{type: ToCompositeFieldPath, fromFieldPath: status.atProvider.id, toFieldPath: status.id}]
  resources:
  - name: spec
    patches: [{type: ToCompositeFieldPath, fromFieldPath: status.atProvider.id, toFieldPath: spec.id}]
  - name: labels
    patches:
    - type: CombineToComposite
      combine: {variables: [{fromFieldPath: status.a}], strategy: string, string: {fmt: "%s"}}
      toFieldPath: metadata.labels[x]
  - name: env
    patches: [{type: ToEnvironmentFieldPath, fromFieldPath: status.x, toFieldPath: x}]
  - name: set
    patches: [{type: PatchSet, patchSetName: to-spec}]
  - name: status
    patches:
    - {type: ToCompositeFieldPath, fromFieldPath: status.atProvider.tier, toFieldPath: status.tier}
    - {type: ToCompositeFieldPath, fromFieldPath: status.atProvider.zone}
    - {type: PatchSet, patchSetName: to-status}
    - {type: ToCompositeFieldPath, fromFieldPath: spec.forProvider.region, toFieldPath: spec.region}
    readinessChecks: [{type: NonEmpty, fieldPath: status.atProvider.id}]
`,
			want: "env,labels,set,spec",
			to:   []string{"spec", "labels", "env", "set", ""},
			not:  []string{"status", "other"},
		},
		"Pipeline": {
			reason: "Functions see observed resources whole.",
			spec:   "  mode: Pipeline\n  pipeline: [{step: s, functionRef: {name: f}}]\n",
			want:   "*",
			to:     []string{"anything"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkTemplates(t, tc.reason, parse(t, head+tc.spec), statusToSpec, StatusToSpec, tc.want, tc.to, tc.not)
		})
	}
}
