package compose

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

func u(t testing.TB, s string) *unstructured.Unstructured {
	t.Helper()
	return &unstructured.Unstructured{Object: jsonObj(t, s)}
}

// The composite resource of the Render tests: a claimed XMySQLInstance with
// an external name.
const testXR = `{
  "apiVersion": "database.example.org/v1alpha1", "kind": "XMySQLInstance",
  "metadata": {"name": "my-db-x7k2p", "uid": "6b1f0b3e-1c1a-4d33-9c7e-0d4c2f1e5a10",
    "labels": {"crossplane.io/composite": "my-db-x7k2p", "crossplane.io/claim-name": "my-db", "crossplane.io/claim-namespace": "default"},
    "annotations": {"crossplane.io/external-name": "shop"}},
  "spec": {"parameters": {"storageGB": 20, "location": "westeurope", "tier": "small"}},
  "status": {}
}`

const testComposition = `
compositeTypeRef: {apiVersion: database.example.org/v1alpha1, kind: XMySQLInstance}
patchSets:
- name: location
  patches:
  - {fromFieldPath: spec.parameters.location, toFieldPath: spec.forProvider.fields.location}
environment:
  environmentConfigs:
  - ref: {name: mysql-defaults}
  patches:
  - {type: FromCompositeFieldPath, fromFieldPath: spec.parameters.tier, toFieldPath: tier}
resources:
- name: server
  base:
    apiVersion: nop.crossplane.io/v1alpha1
    kind: NopResource
    metadata:
      annotations: {crossplane.io/external-name-suffix: "-srv"}
    spec:
      forProvider: {fields: {version: "8.0"}}
  patches:
  - {type: PatchSet, patchSetName: location}
  - {fromFieldPath: spec.parameters.storageGB, toFieldPath: spec.forProvider.fields.storageMB, transforms: [{type: math, math: {multiply: 1024}}]}
  - {type: FromEnvironmentFieldPath, fromFieldPath: "skus[small]", toFieldPath: spec.forProvider.fields.sku}
  - {type: ToCompositeFieldPath, fromFieldPath: metadata.name, toFieldPath: status.serverName}
  connectionDetails:
  - {name: password, fromConnectionSecretKey: attribute.password}
  - {name: username, fromFieldPath: spec.forProvider.fields.login}
  - {name: port, value: "3306"}
  readinessChecks:
  - {type: MatchCondition, matchCondition: {type: Ready, status: "True"}}
- name: rule
  base:
    apiVersion: nop.crossplane.io/v1alpha1
    kind: NopResource
  patches:
  - {type: PatchSet, patchSetName: location}
  - {type: CombineFromComposite, combine: {variables: [{fromFieldPath: metadata.name}, {fromFieldPath: spec.parameters.location}], strategy: string, string: {fmt: "%s-%s"}}, toFieldPath: spec.forProvider.fields.ruleName}
`

func testEnvConfigs(t testing.TB) []*unstructured.Unstructured {
	return []*unstructured.Unstructured{envConfig(t, "mysql-defaults", nil, `{"skus":{"small":"B_Gen5_1","large":"GP_Gen5_8"}}`)}
}

func TestRender(t *testing.T) {
	observedServer := u(t, `{"apiVersion":"nop.crossplane.io/v1alpha1","kind":"NopResource",
		"metadata":{"name":"my-db-x7k2p-legacy","annotations":{"crossplane.io/composition-resource-name":"server"}},
		"spec":{"forProvider":{"fields":{"login":"admin"}},"writeConnectionSecretToRef":{"namespace":"crossplane-system","name":"srv"}},
		"status":{"conditions":[{"type":"Ready","status":"True","reason":"Available"}]}}`)

	res, err := Render(Request{
		Composite:          u(t, testXR),
		Composition:        ptr(fromYAML[v1.CompositionSpec](t, testComposition)),
		Observed:           map[string]*unstructured.Unstructured{"server": observedServer},
		EnvironmentConfigs: testEnvConfigs(t),
	})
	if err != nil {
		t.Fatalf("Render(): %v", err)
	}

	owner := `"ownerReferences":[{"apiVersion":"database.example.org/v1alpha1","kind":"XMySQLInstance","name":"my-db-x7k2p","uid":"6b1f0b3e-1c1a-4d33-9c7e-0d4c2f1e5a10","controller":true,"blockOwnerDeletion":true}]`
	labels := `"labels":{"crossplane.io/composite":"my-db-x7k2p","crossplane.io/claim-name":"my-db","crossplane.io/claim-namespace":"default"}`
	wantServer := jsonObj(t, `{"apiVersion":"nop.crossplane.io/v1alpha1","kind":"NopResource",
		"metadata":{"name":"my-db-x7k2p-legacy",`+labels+`,`+owner+`,
			"annotations":{"crossplane.io/external-name-suffix":"-srv","crossplane.io/external-name":"shop-srv","crossplane.io/composition-resource-name":"server"}},
		"spec":{"forProvider":{"fields":{"version":"8.0","location":"westeurope","storageMB":20480,"sku":"B_Gen5_1"}}}}`)
	wantRule := jsonObj(t, `{"apiVersion":"nop.crossplane.io/v1alpha1","kind":"NopResource",
		"metadata":{"name":"my-db-x7k2p-`+ComposedName("", "6b1f0b3e-1c1a-4d33-9c7e-0d4c2f1e5a10", "rule")[1:]+`",`+labels+`,`+owner+`,
			"annotations":{"crossplane.io/external-name":"shop","crossplane.io/composition-resource-name":"rule"}},
		"spec":{"forProvider":{"fields":{"location":"westeurope","ruleName":"my-db-x7k2p-westeurope"}}}}`)

	if len(res.Resources) != 2 {
		t.Fatalf("Render(): want 2 resources, got %d", len(res.Resources))
	}
	if diff := cmp.Diff(wantServer, res.Resources[0].Desired.Object); diff != "" {
		t.Errorf("Render(): server: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(wantRule, res.Resources[1].Desired.Object); diff != "" {
		t.Errorf("Render(): rule: -want, +got:\n%s", diff)
	}
	gotSummary := []Resource{res.Resources[0], res.Resources[1]}
	wantSummary := []Resource{
		{Name: "server", Observed: true, Ready: true},
		{Name: "rule", Reason: ReasonNotCreated},
	}
	if diff := cmp.Diff(wantSummary, gotSummary, cmpopts.IgnoreFields(Resource{}, "Desired")); diff != "" {
		t.Errorf("Render(): resources: -want, +got:\n%s", diff)
	}
	if res.Ready {
		t.Errorf("Render(): want the XR not ready while rule does not exist")
	}
	if diff := cmp.Diff("my-db-x7k2p-legacy", res.Composite.Object["status"].(map[string]any)["serverName"]); diff != "" {
		t.Errorf("Render(): ToCompositeFieldPath: -want, +got:\n%s", diff)
	}
	wantCDs := []ConnectionDetail{
		{Template: "server", Name: "password", Type: v1.ConnectionDetailTypeFromConnectionSecretKey, FromConnectionSecretKey: "attribute.password", SecretRef: &SecretRef{Namespace: "crossplane-system", Name: "srv"}},
		{Template: "server", Name: "username", Type: v1.ConnectionDetailTypeFromFieldPath, Value: "admin"},
		{Template: "server", Name: "port", Type: v1.ConnectionDetailTypeFromValue, Value: "3306"},
	}
	if diff := cmp.Diff(wantCDs, res.ConnectionDetails); diff != "" {
		t.Errorf("Render(): connection details: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"mysql-defaults"}, res.EnvironmentConfigs); diff != "" {
		t.Errorf("Render(): selected EnvironmentConfigs: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(jsonObj(t, `{"skus":{"small":"B_Gen5_1","large":"GP_Gen5_8"},"tier":"small"}`), res.Environment); diff != "" {
		t.Errorf("Render(): environment: -want, +got:\n%s", diff)
	}
	if len(res.Errors) != 0 || len(res.Warnings) != 0 {
		t.Errorf("Render(): want no errors or warnings, got %v, %v", res.Errors, res.Warnings)
	}
}

func ptr[T any](v T) *T { return &v }

func TestRenderIsPureAndDeterministic(t *testing.T) {
	xr := u(t, testXR)
	comp := fromYAML[v1.CompositionSpec](t, testComposition)
	observed := map[string]*unstructured.Unstructured{"server": u(t, `{"apiVersion":"nop.crossplane.io/v1alpha1","kind":"NopResource","metadata":{"name":"s"},"status":{"x":{"y":1}}}`)}
	configs := testEnvConfigs(t)
	req := Request{Composite: xr, Composition: &comp, Observed: observed, EnvironmentConfigs: configs}

	xrBefore, obsBefore, cfgBefore := xr.DeepCopy(), observed["server"].DeepCopy(), configs[0].DeepCopy()
	first, err := Render(req)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Render(req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("Render() is not deterministic: -first, +second:\n%s", diff)
	}
	for name, pair := range map[string][2]*unstructured.Unstructured{
		"composite":         {xrBefore, xr},
		"observed":          {obsBefore, observed["server"]},
		"EnvironmentConfig": {cfgBefore, configs[0]},
	} {
		if diff := cmp.Diff(pair[0].Object, pair[1].Object); diff != "" {
			t.Errorf("Render() changed its %s input: -before, +after:\n%s", name, diff)
		}
	}
}

func TestRenderTemplateOutcomes(t *testing.T) {
	const base = `{apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}`
	comp := func(resources string) string {
		return "compositeTypeRef: {apiVersion: database.example.org/v1alpha1, kind: XMySQLInstance}\n" +
			"patchSets: [{name: ps, patches: [{fromFieldPath: spec.parameters.location}, {fromFieldPath: spec.parameters.tier, transforms: [{type: math, math: {multiply: 2}}]}]}]\n" +
			"resources: " + resources
	}
	observed := map[string]*unstructured.Unstructured{
		"seen": u(t, `{"apiVersion":"nop.crossplane.io/v1alpha1","kind":"NopResource","metadata":{"name":"seen-1"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`),
	}
	type outcome struct {
		Name    string
		Desired bool
		Skipped string
		Err     string
		Ready   bool
		Reason  string
	}
	type want struct {
		resources []outcome
		warnings  []string
		ready     bool
	}
	cases := map[string]struct {
		reason      string
		composition string
		want        want
	}{
		"TransformErrorIsolated": {
			reason: "A failing patch fails only its template, and the error names the template, patch, field paths and cause.",
			composition: comp(`[
				{name: server, base: ` + base + `, patches: [{fromFieldPath: spec.parameters.location, toFieldPath: spec.a}, {fromFieldPath: spec.parameters.tier, toFieldPath: spec.forProvider.fields.storageMB, transforms: [{type: math, math: {type: Multiply, multiply: 1024}}]}]},
				{name: other, base: ` + base + `}]`),
			want: want{resources: []outcome{
				{Name: "server", Err: `cannot apply patch 1 of template "server" (FromCompositeFieldPath spec.parameters.tier -> spec.forProvider.fields.storageMB): transform 0 (math Multiply): input is string, want a number`, Reason: ReasonNotCreated},
				{Name: "other", Desired: true, Reason: ReasonNotCreated},
			}},
		},
		"PatchSetErrorNamesInnerPatch": {
			reason:      "An error in an included PatchSet names the PatchSet and the patch within it.",
			composition: comp(`[{name: server, base: ` + base + `, patches: [{type: PatchSet, patchSetName: ps}]}]`),
			want: want{resources: []outcome{
				{Name: "server", Err: `cannot apply patch 0 of template "server" (patch 1 of PatchSet "ps": FromCompositeFieldPath spec.parameters.tier -> spec.parameters.tier): transform 0 (math Multiply): input is string, want a number`, Reason: ReasonNotCreated},
			}},
		},
		"UndefinedPatchSet": {
			reason:      "An undefined PatchSet fails the template.",
			composition: comp(`[{name: server, base: ` + base + `, patches: [{type: PatchSet, patchSetName: nope}]}]`),
			want: want{resources: []outcome{
				{Name: "server", Err: `cannot apply patch 0 of template "server" (PatchSet): no PatchSet named "nope" in spec.patchSets`, Reason: ReasonNotCreated},
			}},
		},
		"RequiredHoldsBackNewResource": {
			reason:      "A Required patch whose source is missing holds back a resource that does not exist yet.",
			composition: comp(`[{name: server, base: ` + base + `, patches: [{fromFieldPath: spec.parameters.nope, toFieldPath: spec.x, policy: {fromFieldPath: Required}}]}]`),
			want: want{resources: []outcome{
				{Name: "server", Skipped: "not created: the source of patch 0 (FromCompositeFieldPath spec.parameters.nope) does not exist and its policy.fromFieldPath is Required", Reason: "not created: the source of patch 0 (FromCompositeFieldPath spec.parameters.nope) does not exist and its policy.fromFieldPath is Required"},
			}},
		},
		"RequiredSkipsPatchOnExistingResource": {
			reason:      "A Required patch whose source is missing is skipped with a warning on a resource that exists.",
			composition: comp(`[{name: seen, base: ` + base + `, patches: [{fromFieldPath: spec.parameters.nope, toFieldPath: spec.x, policy: {fromFieldPath: Required}}]}]`),
			want: want{
				resources: []outcome{{Name: "seen", Desired: true, Ready: true}},
				warnings:  []string{`template "seen": skipped patch 0 (FromCompositeFieldPath spec.parameters.nope): the source does not exist and its policy.fromFieldPath is Required`},
				ready:     true,
			},
		},
		"OptionalMissingSource": {
			reason:      "An Optional patch whose source is missing is skipped silently.",
			composition: comp(`[{name: seen, base: ` + base + `, patches: [{fromFieldPath: spec.parameters.nope, toFieldPath: spec.x}]}]`),
			want:        want{resources: []outcome{{Name: "seen", Desired: true, Ready: true}}, ready: true},
		},
		"InvalidBase": {
			reason:      "A base without a kind fails the template.",
			composition: comp(`[{name: server, base: {apiVersion: v1}}]`),
			want: want{resources: []outcome{
				{Name: "server", Err: `cannot render template "server": base: kind is required`, Reason: ReasonNotCreated},
			}},
		},
		"ForeignController": {
			reason:      "A base controlled by something else fails the template.",
			composition: comp(`[{name: server, base: {apiVersion: v1, kind: ConfigMap, metadata: {ownerReferences: [{apiVersion: v1, kind: Pod, name: p, uid: other, controller: true}]}}}]`),
			want: want{resources: []outcome{
				{Name: "server", Err: `cannot render template "server": metadata: ownerReferences: already controlled by Pod "p"`, Reason: ReasonNotCreated},
			}},
		},
		"KindChanged": {
			reason:      "Like Crossplane, a template that renders another kind than the observed resource's is refused (a template mismatch): nothing is desired and the resource is not ready.",
			composition: comp(`[{name: seen, base: {apiVersion: nop.crossplane.io/v1alpha1, kind: OtherResource}}]`),
			want: want{resources: []outcome{
				{Name: "seen", Err: `cannot render template "seen": base.kind: cannot change the kind of composed resource "seen-1" from NopResource to OtherResource (possible composed resource template mismatch)`},
			}},
		},
		"VersionChanged": {
			reason:      "Like Crossplane, a template may change the version (or group) of the observed resource's kind.",
			composition: comp(`[{name: seen, base: {apiVersion: nop.crossplane.io/v1beta1, kind: NopResource}}]`),
			want:        want{resources: []outcome{{Name: "seen", Desired: true, Ready: true}}, ready: true},
		},
		"ReadinessCheckWrongType": {
			reason:      "Like Crossplane, a readiness check on a field of the wrong type is a template error, not a reason, while the resource still renders.",
			composition: comp(`[{name: seen, base: ` + base + `, readinessChecks: [{type: MatchString, fieldPath: status.conditions, matchString: Ready}]}]`),
			want: want{resources: []outcome{
				{Name: "seen", Desired: true, Err: `cannot render template "seen": readinessChecks[0]: status.conditions is array, not a string`},
			}},
		},
		"InvalidConnectionDetail": {
			reason:      "An invalid connection detail is a template error.",
			composition: comp(`[{name: seen, base: ` + base + `, connectionDetails: [{fromFieldPath: spec.x}]}]`),
			want: want{resources: []outcome{
				{Name: "seen", Desired: true, Ready: true, Err: `cannot render template "seen": connectionDetails: connectionDetails[0]: name is required by type FromFieldPath`},
			}, ready: true},
		},
		"ReadyWhenAllReady": {
			reason:      "The XR is ready when every composed resource is.",
			composition: comp(`[{name: seen, base: ` + base + `}]`),
			want:        want{resources: []outcome{{Name: "seen", Desired: true, Ready: true}}, ready: true},
		},
		"UnnamedTemplates": {
			reason:      "Unnamed templates are named by their index.",
			composition: comp(`[{base: ` + base + `}, {base: ` + base + `}]`),
			want: want{resources: []outcome{
				{Name: "0", Desired: true, Reason: ReasonNotCreated},
				{Name: "1", Desired: true, Reason: ReasonNotCreated},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := fromYAML[v1.CompositionSpec](t, tc.composition)
			res, err := Render(Request{Composite: u(t, testXR), Composition: &spec, Observed: observed})
			if err != nil {
				t.Fatalf("%s\nRender(): %v", tc.reason, err)
			}
			got := make([]outcome, len(res.Resources))
			var wantErrs []string
			for i, r := range res.Resources {
				got[i] = outcome{Name: r.Name, Desired: r.Desired != nil, Skipped: r.Skipped, Err: errString(r.Err), Ready: r.Ready, Reason: r.Reason}
				if r.Err != nil {
					wantErrs = append(wantErrs, r.Err.Error())
					if !errors.Is(r.Err, ErrInvalid) {
						t.Errorf("%s\nRender(): want template errors of class ErrInvalid, got %v", tc.reason, r.Err)
					}
				}
			}
			if diff := cmp.Diff(tc.want.resources, got); diff != "" {
				t.Errorf("%s\nRender(): -want, +got:\n%s", tc.reason, diff)
			}
			gotErrs := make([]string, len(res.Errors))
			for i, e := range res.Errors {
				gotErrs[i] = e.Error()
			}
			if diff := cmp.Diff(wantErrs, gotErrs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nRender(): Errors do not match the resources' errors: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.warnings, res.Warnings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nRender(): warnings: -want, +got:\n%s", tc.reason, diff)
			}
			if res.Ready != tc.want.ready {
				t.Errorf("%s\nRender(): want ready %t, got %t", tc.reason, tc.want.ready, res.Ready)
			}
		})
	}
}

func TestRenderFatal(t *testing.T) {
	const head = "compositeTypeRef: {apiVersion: database.example.org/v1alpha1, kind: XMySQLInstance}\n"
	const base = `{apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}`
	cases := map[string]struct {
		reason      string
		composition string
		configs     []*unstructured.Unstructured
		want        string
		class       error
	}{
		"PipelineMode": {
			reason:      "Pipeline Compositions are not rendered by this engine.",
			composition: head + "mode: Pipeline\npipeline: [{step: a, functionRef: {name: f}}]",
			want:        "cannot render Composition: spec.mode: mode Pipeline is not rendered by patch and transform (want Resources)",
			class:       ErrInvalid,
		},
		"OtherKind": {
			reason:      "A Composition for another kind of XR is refused.",
			composition: "compositeTypeRef: {apiVersion: database.example.org/v1alpha1, kind: XPostgreSQLInstance}\nresources: []",
			want:        "cannot render Composition: spec.compositeTypeRef: the Composition is for XPostgreSQLInstance, database.example.org/v1alpha1, not for the composite resource's XMySQLInstance, database.example.org/v1alpha1",
			class:       ErrInvalid,
		},
		"DuplicateNames": {
			reason:      "Template names must be unique.",
			composition: head + "resources: [{name: a, base: " + base + "}, {name: a, base: " + base + "}]",
			want:        `cannot render Composition: spec.resources[1].name: duplicate name "a" (also spec.resources[0])`,
			class:       ErrInvalid,
		},
		"PartlyNamed": {
			reason:      "Either all or no templates are named.",
			composition: head + "resources: [{name: a, base: " + base + "}, {base: " + base + "}]",
			want:        "cannot render Composition: spec.resources[1].name: is required: either all or no templates must be named",
			class:       ErrInvalid,
		},
		"NestedPatchSet": {
			reason:      "A PatchSet may not include another.",
			composition: head + "patchSets: [{name: a, patches: [{type: PatchSet, patchSetName: b}]}]\nresources: []",
			want:        "cannot render Composition: spec.patchSets[0].patches[0]: a PatchSet may not include another PatchSet",
			class:       ErrInvalid,
		},
		"InvalidReadinessCheck": {
			reason:      "Like Crossplane's Composition validation, an invalid readiness check refuses the Composition, whether or not the resource exists.",
			composition: head + "resources: [{name: a, base: " + base + "}, {name: b, base: " + base + ", readinessChecks: [{type: None}, {type: MatchString, fieldPath: status.x}]}]",
			want:        "cannot render Composition: spec.resources[1].readinessChecks[1].matchString: is required for type MatchString",
			class:       ErrInvalid,
		},
		"UnknownReadinessCheckType": {
			reason:      "A readiness check of an unknown type refuses the Composition.",
			composition: head + "resources: [{name: a, base: " + base + ", readinessChecks: [{type: MatchRegexp, fieldPath: status.x}]}]",
			want:        `cannot render Composition: spec.resources[0].readinessChecks[0].type: unknown readiness check type "MatchRegexp" (want NonEmpty, MatchString, MatchInteger, MatchTrue, MatchFalse, MatchCondition or None)`,
			class:       ErrInvalid,
		},
		"MatchConditionWithoutCondition": {
			reason:      "Like Crossplane, MatchCondition without matchCondition refuses the Composition.",
			composition: head + "resources: [{name: a, base: " + base + ", readinessChecks: [{type: MatchCondition}]}]",
			want:        "cannot render Composition: spec.resources[0].readinessChecks[0].matchCondition: is required for type MatchCondition",
			class:       ErrInvalid,
		},
		"MissingEnvironmentConfig": {
			reason:      "A missing EnvironmentConfig fails the render as unavailable.",
			composition: head + "environment: {environmentConfigs: [{ref: {name: nope}}]}\nresources: []",
			want:        `cannot build the environment: spec.environment.environmentConfigs[0]: EnvironmentConfig "nope" does not exist`,
			class:       ErrUnavailable,
		},
		"EnvironmentPatchError": {
			reason:      "A failing environment patch fails the render, naming the patch.",
			composition: head + "environment: {patches: [{fromFieldPath: spec.parameters.location, toFieldPath: loc, transforms: [{type: convert, convert: {toType: int64}}]}]}\nresources: []",
			want:        `cannot apply patch 0 of the environment (FromCompositeFieldPath spec.parameters.location -> loc): transform 0 (convert to int64): cannot convert "westeurope" to int64: not a base-10 integer`,
			class:       ErrInvalid,
		},
		"EnvironmentPatchRequired": {
			reason:      "A Required environment patch whose source is missing fails the render.",
			composition: head + "environment: {patches: [{fromFieldPath: spec.nope, toFieldPath: x, policy: {fromFieldPath: Required}}]}\nresources: []",
			want:        `cannot apply patch 0 of the environment (FromCompositeFieldPath spec.nope -> x): the source field does not exist and policy.fromFieldPath is Required`,
			class:       ErrInvalid,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := fromYAML[v1.CompositionSpec](t, tc.composition)
			res, err := Render(Request{Composite: u(t, testXR), Composition: &spec, EnvironmentConfigs: tc.configs})
			if diff := cmp.Diff(tc.want, errString(err)); diff != "" {
				t.Errorf("%s\nRender(): -want error, +got error:\n%s", tc.reason, diff)
			}
			if !errors.Is(err, tc.class) {
				t.Errorf("%s\nRender(): want an error of class %v, got %v", tc.reason, tc.class, err)
			}
			if res != nil {
				t.Errorf("%s\nRender(): want no result with a fatal error", tc.reason)
			}
		})
	}

	if _, err := Render(Request{Composition: &v1.CompositionSpec{}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Render() without a composite: want ErrInvalid, got %v", err)
	}
	if _, err := Render(Request{Composite: u(t, testXR)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Render() without a composition: want ErrInvalid, got %v", err)
	}
}

func TestRenderMetadata(t *testing.T) {
	const uid = "0f8e3c2a-0000-4000-8000-000000000001"
	cases := map[string]struct {
		reason   string
		xr       string
		base     string
		observed string
		want     string // The desired metadata, as JSON.
	}{
		"ClaimRefLabels": {
			reason: "Without claim labels on the XR the claim labels come from spec.claimRef; without a composite label the XR name is the root.",
			xr:     `{"apiVersion":"a.example.org/v1","kind":"XA","metadata":{"name":"xa","uid":"` + uid + `"},"spec":{"claimRef":{"name":"c","namespace":"ns"}}}`,
			base:   `{apiVersion: v1, kind: ConfigMap}`,
			want:   `{"name":"xa-` + ComposedName("", uid, "t")[1:] + `","labels":{"crossplane.io/composite":"xa","crossplane.io/claim-name":"c","crossplane.io/claim-namespace":"ns"},"annotations":{"crossplane.io/composition-resource-name":"t"}}`,
		},
		"GenerateNamePrefix": {
			reason: "A base generateName is the prefix of the deterministic name, and is removed.",
			xr:     `{"apiVersion":"a.example.org/v1","kind":"XA","metadata":{"name":"xa","uid":"` + uid + `"}}`,
			base:   `{apiVersion: v1, kind: ConfigMap, metadata: {generateName: custom-}}`,
			want:   `{"name":"custom-` + ComposedName("", uid, "t")[1:] + `","labels":{"crossplane.io/composite":"xa"},"annotations":{"crossplane.io/composition-resource-name":"t"}}`,
		},
		"ExplicitName": {
			reason: "A base name is kept.",
			xr:     `{"apiVersion":"a.example.org/v1","kind":"XA","metadata":{"name":"xa","uid":"` + uid + `"}}`,
			base:   `{apiVersion: v1, kind: ConfigMap, metadata: {name: fixed, labels: {app: x}}}`,
			want:   `{"name":"fixed","labels":{"app":"x","crossplane.io/composite":"xa"},"annotations":{"crossplane.io/composition-resource-name":"t"}}`,
		},
		"ObservedNameAndNamespace": {
			reason:   "An existing resource keeps its name and namespace.",
			xr:       `{"apiVersion":"a.example.org/v1","kind":"XA","metadata":{"name":"xa","uid":"` + uid + `"}}`,
			base:     `{apiVersion: v1, kind: ConfigMap, metadata: {namespace: a}}`,
			observed: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"old-name","namespace":"b"}}`,
			want:     `{"name":"old-name","namespace":"b","labels":{"crossplane.io/composite":"xa"},"annotations":{"crossplane.io/composition-resource-name":"t"}}`,
		},
		"NamespacedXR": {
			reason: "Resources of a namespaced XR live in its namespace.",
			xr:     `{"apiVersion":"a.example.org/v1","kind":"XA","metadata":{"name":"xa","namespace":"team","uid":"` + uid + `"}}`,
			base:   `{apiVersion: v1, kind: ConfigMap, metadata: {namespace: elsewhere}}`,
			want:   `{"name":"xa-` + ComposedName("", uid, "t")[1:] + `","namespace":"team","labels":{"crossplane.io/composite":"xa"},"annotations":{"crossplane.io/composition-resource-name":"t"}}`,
		},
		"ExternalNamePrefixSuffix": {
			reason: "The XR's external name propagates with the base's prefix and suffix.",
			xr:     `{"apiVersion":"a.example.org/v1","kind":"XA","metadata":{"name":"xa","uid":"` + uid + `","annotations":{"crossplane.io/external-name":"prod"}}}`,
			base:   `{apiVersion: v1, kind: ConfigMap, metadata: {name: fixed-n, annotations: {crossplane.io/external-name-prefix: "eu-", crossplane.io/external-name-suffix: "-pool-1"}}}`,
			want:   `{"name":"fixed-n","labels":{"crossplane.io/composite":"xa"},"annotations":{"crossplane.io/external-name-prefix":"eu-","crossplane.io/external-name-suffix":"-pool-1","crossplane.io/external-name":"eu-prod-pool-1","crossplane.io/composition-resource-name":"t"}}`,
		},
		"ExternalNameExplicit": {
			reason: "A base that sets an external name keeps it.",
			xr:     `{"apiVersion":"a.example.org/v1","kind":"XA","metadata":{"name":"xa","uid":"` + uid + `","annotations":{"crossplane.io/external-name":"prod"}}}`,
			base:   `{apiVersion: v1, kind: ConfigMap, metadata: {name: fixed-n, annotations: {crossplane.io/external-name: mine}}}`,
			want:   `{"name":"fixed-n","labels":{"crossplane.io/composite":"xa"},"annotations":{"crossplane.io/external-name":"mine","crossplane.io/composition-resource-name":"t"}}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xr := u(t, tc.xr)
			spec := v1.CompositionSpec{
				CompositeTypeRef: v1.TypeReference{APIVersion: "a.example.org/v1", Kind: "XA"},
				Resources:        []v1.ComposedTemplate{{Name: ptr("t"), Base: fromYAML[v1.ComposedTemplate](t, "base: "+tc.base).Base}},
			}
			req := Request{Composite: xr, Composition: &spec}
			if tc.observed != "" {
				req.Observed = map[string]*unstructured.Unstructured{"t": u(t, tc.observed)}
			}
			res, err := Render(req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Resources[0].Err != nil {
				t.Fatal(res.Resources[0].Err)
			}
			got := res.Resources[0].Desired.Object["metadata"].(map[string]any)
			refs := got["ownerReferences"]
			delete(got, "ownerReferences")
			if diff := cmp.Diff(jsonObj(t, tc.want), got); diff != "" {
				t.Errorf("%s\nmetadata: -want, +got:\n%s", tc.reason, diff)
			}
			wantRefs := []any{map[string]any{"apiVersion": "a.example.org/v1", "kind": "XA", "name": "xa", "uid": uid, "controller": true, "blockOwnerDeletion": true}}
			if diff := cmp.Diff(wantRefs, refs); diff != "" {
				t.Errorf("%s\nownerReferences: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestComposedName(t *testing.T) {
	const uid = "6b1f0b3e-1c1a-4d33-9c7e-0d4c2f1e5a10"
	hash := ComposedName("", uid, "server")[1:]
	cases := map[string]struct {
		reason string
		prefix string
		want   string
	}{
		"Short":      {reason: "A short prefix is kept.", prefix: "my-db-", want: "my-db-" + hash},
		"AddsDash":   {reason: "A dash is added if missing.", prefix: "my-db", want: "my-db-" + hash},
		"Truncated":  {reason: "A long prefix is truncated to keep 63 characters.", prefix: strings.Repeat("a", 70) + "-", want: strings.Repeat("a", 50) + "-" + hash},
		"NoTrailing": {reason: "Truncation does not leave a dash or dot before the separator.", prefix: strings.Repeat("a", 48) + ".-" + strings.Repeat("b", 20), want: strings.Repeat("a", 48) + "-" + hash},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ComposedName(tc.prefix, uid, "server")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
			if len(got) > 63 {
				t.Errorf("%s\nname %q is longer than 63 characters", tc.reason, got)
			}
		})
	}
	if len(hash) != 12 {
		t.Errorf("want a 12 character hash, got %q", hash)
	}
	if ComposedName("p-", uid, "server") == ComposedName("p-", uid, "rule") {
		t.Errorf("different templates must get different names")
	}
	if ComposedName("p-", uid, "server") == ComposedName("p-", "other-uid", "server") {
		t.Errorf("different composite resources must get different names")
	}
}

func BenchmarkRender(b *testing.B) {
	spec := fromYAML[v1.CompositionSpec](b, testComposition)
	req := Request{
		Composite:   u(b, testXR),
		Composition: &spec,
		Observed: map[string]*unstructured.Unstructured{"server": u(b, `{"apiVersion":"nop.crossplane.io/v1alpha1","kind":"NopResource",
			"metadata":{"name":"s","annotations":{"crossplane.io/composition-resource-name":"server"}},
			"status":{"conditions":[{"type":"Ready","status":"True"}]}}`)},
		EnvironmentConfigs: testEnvConfigs(b),
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(req); err != nil {
			b.Fatal(err)
		}
	}
}
