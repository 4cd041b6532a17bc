package compose

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/json"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/fieldpath"
)

// jsonObj decodes a JSON object with integers as int64; "" is nil.
func jsonObj(t testing.TB, s string) map[string]any {
	t.Helper()
	if s == "" {
		return nil
	}
	out := map[string]any{}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("cannot decode %s: %v", s, err)
	}
	return out
}

func TestApplyPatch(t *testing.T) {
	const xr = `{"metadata":{"name":"my-db","uid":"u1","annotations":{"crossplane.io/external-name":"ext"}},"spec":{"parameters":{"storageGB":20,"size":"small","tags":{"a":"1"},"list":[1,2]}},"status":{}}`
	const cd = `{"metadata":{"name":"cd"},"status":{"atProvider":{"id":"srv-1","fqdn":"srv.example.org"}}}`
	const env = `{"region":"eu","cfg":{"tier":"gold"}}`

	type args struct {
		scope     patchScope
		patch     string
		observed  string // The observed composed resource; "" if it does not exist.
		desiredCD string
		env       string
	}
	type want struct {
		toComposed bool
		outcome    patchOutcome
		err        string
		desiredXR  map[string]any // nil: unchanged from xr.
		desiredCD  map[string]any // nil: unchanged from args.
		env        map[string]any // nil: unchanged from args.
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"FromCompositeFieldPath": {
			reason: "A field of the observed XR is copied to the composed resource, through transforms.",
			args:   args{patch: `{fromFieldPath: spec.parameters.storageGB, toFieldPath: spec.forProvider.storageMB, transforms: [{type: math, math: {multiply: 1024}}]}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"forProvider":{"storageMB":20480}}}`)},
		},
		"DefaultType": {
			reason: "A patch without a type is FromCompositeFieldPath; toFieldPath defaults to fromFieldPath.",
			args:   args{patch: `{fromFieldPath: spec.parameters.size}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"parameters":{"size":"small"}}}`)},
		},
		"BracketedPaths": {
			reason: "Quoted bracket paths read and write annotation keys.",
			args:   args{patch: `{fromFieldPath: "metadata.annotations['crossplane.io/external-name']", toFieldPath: "spec.forProvider.fields[cluster.name]"}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"forProvider":{"fields":{"cluster.name":"ext"}}}}`)},
		},
		"FromCompositeMissingOptional": {
			reason: "A missing source with the default Optional policy skips the patch.",
			args:   args{patch: `{fromFieldPath: spec.parameters.nope, toFieldPath: spec.x}`},
			want:   want{toComposed: true, outcome: patchSourceMissing},
		},
		"FromCompositeMissingRequired": {
			reason: "A missing source with policy Required reports the missing source.",
			args:   args{patch: `{fromFieldPath: spec.parameters.nope, toFieldPath: spec.x, policy: {fromFieldPath: Required}}`},
			want:   want{toComposed: true, outcome: patchSourceMissing},
		},
		"ToCompositeFieldPath": {
			reason: "A field of the observed composed resource is copied to the desired XR.",
			args:   args{patch: `{type: ToCompositeFieldPath, fromFieldPath: status.atProvider.id, toFieldPath: status.serverID}`, observed: cd},
			want: want{desiredXR: func() map[string]any {
				o := jsonObj(t, xr)
				o["status"] = map[string]any{"serverID": "srv-1"}
				return o
			}()},
		},
		"ToCompositeNotObserved": {
			reason: "A patch from a composed resource that does not exist yet is skipped silently.",
			args:   args{patch: `{type: ToCompositeFieldPath, fromFieldPath: status.atProvider.id, toFieldPath: status.serverID, policy: {fromFieldPath: Required}}`},
			want:   want{outcome: patchNoSource},
		},
		"CombineFromComposite": {
			reason: "Variables of the observed XR are formatted into the composed resource.",
			args:   args{patch: `{type: CombineFromComposite, combine: {variables: [{fromFieldPath: metadata.name}, {fromFieldPath: spec.parameters.storageGB}], strategy: string, string: {fmt: "%s-%d"}}, toFieldPath: spec.forProvider.label}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"forProvider":{"label":"my-db-20"}}}`)},
		},
		"CombineMissingVariable": {
			reason: "If any variable is missing the whole combine is missing.",
			args:   args{patch: `{type: CombineFromComposite, combine: {variables: [{fromFieldPath: metadata.name}, {fromFieldPath: spec.nope}], strategy: string, string: {fmt: "%s-%s"}}, toFieldPath: spec.x}`},
			want:   want{toComposed: true, outcome: patchSourceMissing},
		},
		"CombineToComposite": {
			reason: "Variables of the observed composed resource are formatted into the desired XR.",
			args:   args{patch: `{type: CombineToComposite, combine: {variables: [{fromFieldPath: status.atProvider.fqdn}], strategy: string, string: {fmt: "mysql://%s:3306"}}, toFieldPath: status.endpoint}`, observed: cd},
			want: want{desiredXR: func() map[string]any {
				o := jsonObj(t, xr)
				o["status"] = map[string]any{"endpoint": "mysql://srv.example.org:3306"}
				return o
			}()},
		},
		"FromEnvironmentFieldPath": {
			reason: "A field of the environment is copied to the composed resource.",
			args:   args{patch: `{type: FromEnvironmentFieldPath, fromFieldPath: cfg.tier, toFieldPath: spec.forProvider.tier}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"forProvider":{"tier":"gold"}}}`)},
		},
		"ToEnvironmentFieldPath": {
			reason: "A field of the observed composed resource is copied to the environment.",
			args:   args{patch: `{type: ToEnvironmentFieldPath, fromFieldPath: status.atProvider.id, toFieldPath: server.id}`, observed: cd},
			want:   want{env: jsonObj(t, `{"region":"eu","cfg":{"tier":"gold"},"server":{"id":"srv-1"}}`)},
		},
		"CombineFromEnvironment": {
			reason: "Variables of the environment are formatted into the composed resource.",
			args:   args{patch: `{type: CombineFromEnvironment, combine: {variables: [{fromFieldPath: region}, {fromFieldPath: cfg.tier}], strategy: string, string: {fmt: "%s/%s"}}, toFieldPath: spec.forProvider.where}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"forProvider":{"where":"eu/gold"}}}`)},
		},
		"CombineToEnvironment": {
			reason: "Variables of the observed composed resource are formatted into the environment.",
			args:   args{patch: `{type: CombineToEnvironment, combine: {variables: [{fromFieldPath: status.atProvider.id}], strategy: string, string: {fmt: "id=%s"}}, toFieldPath: ids.server}`, observed: cd},
			want:   want{env: jsonObj(t, `{"region":"eu","cfg":{"tier":"gold"},"ids":{"server":"id=srv-1"}}`)},
		},
		"EnvFromComposite": {
			reason: "In environment patches FromCompositeFieldPath writes the environment.",
			args:   args{scope: scopeEnvironment, patch: `{fromFieldPath: spec.parameters.size, toFieldPath: size}`},
			want:   want{env: jsonObj(t, `{"region":"eu","cfg":{"tier":"gold"},"size":"small"}`)},
		},
		"EnvToComposite": {
			reason: "In environment patches ToCompositeFieldPath writes the desired XR.",
			args:   args{scope: scopeEnvironment, patch: `{type: ToCompositeFieldPath, fromFieldPath: region, toFieldPath: status.region}`},
			want: want{desiredXR: func() map[string]any {
				o := jsonObj(t, xr)
				o["status"] = map[string]any{"region": "eu"}
				return o
			}()},
		},
		"EnvCombineFromComposite": {
			reason: "In environment patches CombineFromComposite writes the environment.",
			args:   args{scope: scopeEnvironment, patch: `{type: CombineFromComposite, combine: {variables: [{fromFieldPath: metadata.name}], strategy: string, string: {fmt: "n-%s"}}, toFieldPath: name}`},
			want:   want{env: jsonObj(t, `{"region":"eu","cfg":{"tier":"gold"},"name":"n-my-db"}`)},
		},
		"EnvCombineToComposite": {
			reason: "In environment patches CombineToComposite writes the desired XR.",
			args:   args{scope: scopeEnvironment, patch: `{type: CombineToComposite, combine: {variables: [{fromFieldPath: region}], strategy: string, string: {fmt: "r-%s"}}, toFieldPath: status.r}`},
			want: want{desiredXR: func() map[string]any {
				o := jsonObj(t, xr)
				o["status"] = map[string]any{"r": "r-eu"}
				return o
			}()},
		},
		"EnvFromEnvironment": {
			reason: "In environment patches FromEnvironmentFieldPath writes the desired XR.",
			args:   args{scope: scopeEnvironment, patch: `{type: FromEnvironmentFieldPath, fromFieldPath: cfg.tier, toFieldPath: status.tier}`},
			want: want{desiredXR: func() map[string]any {
				o := jsonObj(t, xr)
				o["status"] = map[string]any{"tier": "gold"}
				return o
			}()},
		},
		"EnvToEnvironment": {
			reason: "In environment patches ToEnvironmentFieldPath writes the environment from the XR.",
			args:   args{scope: scopeEnvironment, patch: `{type: ToEnvironmentFieldPath, fromFieldPath: metadata.name, toFieldPath: xrName}`},
			want:   want{env: jsonObj(t, `{"region":"eu","cfg":{"tier":"gold"},"xrName":"my-db"}`)},
		},
		"EnvCombineFromEnvironmentInvalid": {
			reason: "CombineFromEnvironment is not allowed in environment patches.",
			args:   args{scope: scopeEnvironment, patch: `{type: CombineFromEnvironment, combine: {variables: [{fromFieldPath: region}], strategy: string, string: {fmt: "%s"}}, toFieldPath: x}`},
			want:   want{err: "patch type CombineFromEnvironment is not allowed in spec.environment.patches"},
		},
		"EnvPatchSetInvalid": {
			reason: "PatchSet is not allowed in environment patches.",
			args:   args{scope: scopeEnvironment, patch: `{type: PatchSet, patchSetName: x}`},
			want:   want{err: "patch type PatchSet is not allowed in spec.environment.patches"},
		},
		"EnvUnknownType": {
			reason: "An unknown type is invalid in environment patches too.",
			args:   args{scope: scopeEnvironment, patch: `{type: Sideways, fromFieldPath: a}`},
			want:   want{err: `unknown patch type "Sideways"`},
		},
		"UnknownType": {
			reason: "An unknown patch type is an error listing the valid ones.",
			args:   args{patch: `{type: FromSecret, fromFieldPath: a}`},
			want:   want{err: `unknown patch type "FromSecret" (want FromCompositeFieldPath, ToCompositeFieldPath, CombineFromComposite, CombineToComposite, FromEnvironmentFieldPath, ToEnvironmentFieldPath, CombineFromEnvironment, CombineToEnvironment or PatchSet)`},
		},
		"NestedPatchSet": {
			reason: "A PatchSet patch left after inlining is a PatchSet within a PatchSet.",
			args:   args{patch: `{type: PatchSet, patchSetName: x}`},
			want:   want{err: "a PatchSet may not include another PatchSet"},
		},
		"MissingFromFieldPath": {
			reason: "From and To patches need fromFieldPath.",
			args:   args{patch: `{toFieldPath: spec.x}`},
			want:   want{toComposed: true, err: "fromFieldPath is required by patch type FromCompositeFieldPath"},
		},
		"MalformedFromFieldPath": {
			reason: "A malformed fromFieldPath names the path and the problem.",
			args:   args{patch: `{fromFieldPath: spec..size, toFieldPath: spec.x}`},
			want:   want{toComposed: true, err: `fromFieldPath: invalid field path "spec..size": unexpected '.' at position 5`},
		},
		"MalformedToFieldPath": {
			reason: "A malformed toFieldPath names the path and the problem.",
			args:   args{patch: `{fromFieldPath: spec.parameters.size, toFieldPath: "spec.x["}`},
			want:   want{toComposed: true, err: `toFieldPath: invalid field path "spec.x[": unterminated '[' at position 6`},
		},
		"MalformedWhileNotObserved": {
			reason: "A bad patch fails even while its source does not exist yet.",
			args:   args{patch: `{type: ToCompositeFieldPath, fromFieldPath: "status..id", toFieldPath: status.x}`},
			want:   want{err: `fromFieldPath: invalid field path "status..id": unexpected '.' at position 7`},
		},
		"SourceTypeError": {
			reason: "A source path through a value of the wrong type is an error.",
			args:   args{patch: `{fromFieldPath: spec.parameters.size.value, toFieldPath: spec.x}`},
			want:   want{toComposed: true, err: "cannot read fromFieldPath: spec.parameters.size is not an object"},
		},
		"DestinationTypeError": {
			reason: "A destination path through a value of the wrong type is an error.",
			args:   args{patch: `{fromFieldPath: spec.parameters.size, toFieldPath: spec.forProvider.x}`, desiredCD: `{"spec":{"forProvider":"str"}}`},
			want:   want{toComposed: true, err: "cannot write toFieldPath: spec.forProvider is not an object"},
		},
		"TransformError": {
			reason: "A failing transform names the transform.",
			args:   args{patch: `{fromFieldPath: spec.parameters.size, toFieldPath: spec.x, transforms: [{type: map, map: {large: "100"}}]}`},
			want:   want{toComposed: true, err: `transform 0 (map): key "small" is not in the map`},
		},
		"CombineMissingConfig": {
			reason: "Combine types need combine.",
			args:   args{patch: `{type: CombineFromComposite, toFieldPath: spec.x}`},
			want:   want{toComposed: true, err: "combine is required by patch type CombineFromComposite"},
		},
		"CombineMissingToFieldPath": {
			reason: "Combine types need toFieldPath.",
			args:   args{patch: `{type: CombineFromComposite, combine: {variables: [{fromFieldPath: metadata.name}], strategy: string, string: {fmt: "%s"}}}`},
			want:   want{toComposed: true, err: "toFieldPath is required by patch type CombineFromComposite"},
		},
		"CombineNoVariables": {
			reason: "Combine needs variables.",
			args:   args{patch: `{type: CombineFromComposite, combine: {variables: [], strategy: string, string: {fmt: "%s"}}, toFieldPath: spec.x}`},
			want:   want{toComposed: true, err: "combine.variables must list at least one variable"},
		},
		"CombineUnknownStrategy": {
			reason: "Only the string strategy exists.",
			args:   args{patch: `{type: CombineFromComposite, combine: {variables: [{fromFieldPath: metadata.name}], strategy: template}, toFieldPath: spec.x}`},
			want:   want{toComposed: true, err: `unknown combine strategy "template" (want string)`},
		},
		"CombineMissingString": {
			reason: "The string strategy needs string.fmt.",
			args:   args{patch: `{type: CombineFromComposite, combine: {variables: [{fromFieldPath: metadata.name}], strategy: string}, toFieldPath: spec.x}`},
			want:   want{toComposed: true, err: "combine.string is required by combine strategy string"},
		},
		"CombineBadVariable": {
			reason: "A malformed variable path names the variable.",
			args:   args{patch: `{type: CombineFromComposite, combine: {variables: [{fromFieldPath: "a."}], strategy: string, string: {fmt: "%s"}}, toFieldPath: spec.x}`},
			want:   want{toComposed: true, err: `combine.variables[0].fromFieldPath: invalid field path "a.": unexpected '.' at position 1`},
		},
		"CombineEmptyVariable": {
			reason: "A variable needs a path.",
			args:   args{patch: `{type: CombineFromComposite, combine: {variables: [{fromFieldPath: ""}], strategy: string, string: {fmt: "%s"}}, toFieldPath: spec.x}`},
			want:   want{toComposed: true, err: "combine.variables[0].fromFieldPath is required"},
		},
		"UnknownFromFieldPathPolicy": {
			reason: "An unknown fromFieldPath policy is invalid.",
			args:   args{patch: `{fromFieldPath: spec.parameters.size, policy: {fromFieldPath: Sometimes}}`},
			want:   want{toComposed: true, err: `unknown policy.fromFieldPath "Sometimes" (want Optional or Required)`},
		},
		"MergeObjectsKeep": {
			reason: "mergeOptions.keepMapValues keeps existing keys and adds new ones.",
			args:   args{patch: `{fromFieldPath: spec.parameters.tags, toFieldPath: spec.tags, policy: {mergeOptions: {keepMapValues: true}}}`, desiredCD: `{"spec":{"tags":{"a":"base","b":"2"}}}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"tags":{"a":"base","b":"2"}}}`)},
		},
		"ForceMergeObjects": {
			reason: "mergeOptions without keepMapValues overwrites existing keys and keeps the others.",
			args:   args{patch: `{fromFieldPath: spec.parameters.tags, toFieldPath: spec.tags, policy: {mergeOptions: {}}}`, desiredCD: `{"spec":{"tags":{"a":"base","b":"2"}}}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"tags":{"a":"1","b":"2"}}}`)},
		},
		"Replace": {
			reason: "Without a policy the destination is replaced.",
			args:   args{patch: `{fromFieldPath: spec.parameters.tags, toFieldPath: spec.tags}`, desiredCD: `{"spec":{"tags":{"a":"base","b":"2"}}}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"tags":{"a":"1"}}}`)},
		},
		"AppendSlice": {
			reason: "mergeOptions.appendSlice appends elements not already present.",
			args:   args{patch: `{fromFieldPath: spec.parameters.list, toFieldPath: spec.list, policy: {mergeOptions: {appendSlice: true}}}`, desiredCD: `{"spec":{"list":[0,1]}}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"list":[0,1,2]}}`)},
		},
		"ToFieldPathMergeObjects": {
			reason: "function-patch-and-transform's MergeObjects keeps existing keys.",
			args:   args{patch: `{fromFieldPath: spec.parameters.tags, toFieldPath: spec.tags, policy: {toFieldPath: MergeObjects}}`, desiredCD: `{"spec":{"tags":{"a":"base"}}}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"tags":{"a":"base"}}}`)},
		},
		"ToFieldPathForceMergeObjects": {
			reason: "ForceMergeObjects overwrites existing keys.",
			args:   args{patch: `{fromFieldPath: spec.parameters.tags, toFieldPath: spec.tags, policy: {toFieldPath: ForceMergeObjects}}`, desiredCD: `{"spec":{"tags":{"a":"base","c":"3"}}}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"tags":{"a":"1","c":"3"}}}`)},
		},
		"ToFieldPathMergeObjectsAppendArrays": {
			reason: "MergeObjectsAppendArrays keeps keys and appends nested arrays.",
			args:   args{patch: `{fromFieldPath: spec.parameters, toFieldPath: spec.p, policy: {toFieldPath: MergeObjectsAppendArrays}}`, desiredCD: `{"spec":{"p":{"size":"base","list":[0]}}}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"p":{"size":"base","list":[0,1,2],"storageGB":20,"tags":{"a":"1"}}}}`)},
		},
		"ToFieldPathForceMergeObjectsAppendArrays": {
			reason: "ForceMergeObjectsAppendArrays overwrites keys and appends arrays.",
			args:   args{patch: `{fromFieldPath: spec.parameters, toFieldPath: spec.p, policy: {toFieldPath: ForceMergeObjectsAppendArrays}}`, desiredCD: `{"spec":{"p":{"size":"base","list":[0]}}}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"p":{"size":"small","list":[0,1,2],"storageGB":20,"tags":{"a":"1"}}}}`)},
		},
		"ToFieldPathDeprecatedAppendArray": {
			reason: "The deprecated AppendArray is ForceMergeObjectsAppendArrays.",
			args:   args{patch: `{fromFieldPath: spec.parameters.list, toFieldPath: spec.list, policy: {toFieldPath: AppendArray}}`, desiredCD: `{"spec":{"list":[3]}}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"list":[3,1,2]}}`)},
		},
		"ToFieldPathDeprecatedMergeObject": {
			reason: "The deprecated MergeObject is MergeObjects.",
			args:   args{patch: `{fromFieldPath: spec.parameters.tags, toFieldPath: spec.tags, policy: {toFieldPath: MergeObject}}`, desiredCD: `{"spec":{"tags":{"a":"base"}}}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"tags":{"a":"base"}}}`)},
		},
		"ToFieldPathReplace": {
			reason: "Replace replaces.",
			args:   args{patch: `{fromFieldPath: spec.parameters.tags, toFieldPath: spec.tags, policy: {toFieldPath: Replace}}`, desiredCD: `{"spec":{"tags":{"b":"base"}}}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"tags":{"a":"1"}}}`)},
		},
		"ToFieldPathUnknown": {
			reason: "An unknown toFieldPath policy is invalid.",
			args:   args{patch: `{fromFieldPath: spec.parameters.tags, policy: {toFieldPath: Squash}}`},
			want:   want{toComposed: true, err: `unknown policy.toFieldPath "Squash" (want Replace, MergeObjects, MergeObjectsAppendArrays, ForceMergeObjects or ForceMergeObjectsAppendArrays)`},
		},
		"BothMergePolicies": {
			reason: "mergeOptions and toFieldPath policies are mutually exclusive.",
			args:   args{patch: `{fromFieldPath: spec.parameters.tags, policy: {toFieldPath: MergeObjects, mergeOptions: {keepMapValues: true}}}`},
			want:   want{toComposed: true, err: "policy.mergeOptions and policy.toFieldPath are mutually exclusive"},
		},
		"WildcardToFieldPath": {
			reason: "A wildcard in toFieldPath writes every existing matching field.",
			args:   args{patch: `{fromFieldPath: spec.parameters.size, toFieldPath: "spec.pools[*].size"}`, desiredCD: `{"spec":{"pools":[{"size":"x"},{"size":"y"},{"name":"no-size"}]}}`},
			want:   want{toComposed: true, desiredCD: jsonObj(t, `{"spec":{"pools":[{"size":"small"},{"size":"small"},{"name":"no-size"}]}}`)},
		},
		"WildcardMatchesNothing": {
			reason: "A wildcard that matches nothing is an error.",
			args:   args{patch: `{fromFieldPath: spec.parameters.size, toFieldPath: "spec.pools[*].size"}`},
			want:   want{toComposed: true, err: "toFieldPath spec.pools[*].size matches no existing field"},
		},
		"WildcardOverScalar": {
			reason: "A wildcard over a scalar is an error.",
			args:   args{patch: `{fromFieldPath: spec.parameters.size, toFieldPath: "spec.pools[*]"}`, desiredCD: `{"spec":{"pools":"x"}}`},
			want:   want{toComposed: true, err: "cannot expand toFieldPath: spec.pools is not an array or an object, as the wildcard requires"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := fromYAML[v1.Patch](t, tc.args.patch)
			dcd := tc.args.desiredCD
			if dcd == "" {
				dcd = `{}`
			}
			envIn := tc.args.env
			if envIn == "" {
				envIn = env
			}
			o := objects{
				observedXR: fieldpath.Pave(jsonObj(t, xr)),
				desiredXR:  fieldpath.Pave(jsonObj(t, xr)),
				env:        fieldpath.Pave(jsonObj(t, envIn)),
				desiredCD:  fieldpath.Pave(jsonObj(t, dcd)),
			}
			if tc.args.observed != "" {
				o.observedCD = fieldpath.Pave(jsonObj(t, tc.args.observed))
			}

			toComposed, outcome, err := applyPatch(p, tc.args.scope, o)

			if diff := cmp.Diff(tc.want.err, errString(err)); diff != "" {
				t.Errorf("%s\napplyPatch(): -want error, +got error:\n%s", tc.reason, diff)
			}
			if tc.want.err != "" {
				return
			}
			if diff := cmp.Diff(tc.want.toComposed, toComposed); diff != "" {
				t.Errorf("%s\napplyPatch(): -want toComposed, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.outcome, outcome); diff != "" {
				t.Errorf("%s\napplyPatch(): -want outcome, +got:\n%s", tc.reason, diff)
			}
			wantXR := tc.want.desiredXR
			if wantXR == nil {
				wantXR = jsonObj(t, xr)
			}
			if diff := cmp.Diff(wantXR, o.desiredXR.UnstructuredContent()); diff != "" {
				t.Errorf("%s\napplyPatch(): -want desired XR, +got:\n%s", tc.reason, diff)
			}
			wantCD := tc.want.desiredCD
			if wantCD == nil {
				wantCD = jsonObj(t, dcd)
			}
			if diff := cmp.Diff(wantCD, o.desiredCD.UnstructuredContent()); diff != "" {
				t.Errorf("%s\napplyPatch(): -want desired composed resource, +got:\n%s", tc.reason, diff)
			}
			wantEnv := tc.want.env
			if wantEnv == nil {
				wantEnv = jsonObj(t, envIn)
			}
			if diff := cmp.Diff(wantEnv, o.env.UnstructuredContent()); diff != "" {
				t.Errorf("%s\napplyPatch(): -want environment, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(jsonObj(t, xr), o.observedXR.UnstructuredContent()); diff != "" {
				t.Errorf("%s\napplyPatch() changed the observed XR: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestInlinePatches(t *testing.T) {
	sets := map[string][]v1.Patch{
		"common": fromYAML[[]v1.Patch](t, `[{fromFieldPath: a}, {fromFieldPath: b}]`),
	}
	type want struct {
		refs []patchRef
		err  string
	}
	cases := map[string]struct {
		reason  string
		patches string
		want    want
	}{
		"Inline": {
			reason:  "PatchSet patches are replaced in place by the set's patches, remembering where they came from.",
			patches: `[{fromFieldPath: x}, {type: PatchSet, patchSetName: common}, {fromFieldPath: y}]`,
			want: want{refs: []patchRef{
				{patch: fromYAML[v1.Patch](t, `{fromFieldPath: x}`), index: 0},
				{patch: fromYAML[v1.Patch](t, `{fromFieldPath: a}`), index: 1, patchSet: "common", patchSetIndex: 0},
				{patch: fromYAML[v1.Patch](t, `{fromFieldPath: b}`), index: 1, patchSet: "common", patchSetIndex: 1},
				{patch: fromYAML[v1.Patch](t, `{fromFieldPath: y}`), index: 2},
			}},
		},
		"Undefined": {
			reason:  "An undefined PatchSet is an error naming it.",
			patches: `[{type: PatchSet, patchSetName: nope}]`,
			want:    want{err: `cannot apply patch 0 of template "t" (PatchSet): no PatchSet named "nope" in spec.patchSets`},
		},
		"NoName": {
			reason:  "A PatchSet patch needs patchSetName.",
			patches: `[{fromFieldPath: x}, {type: PatchSet}]`,
			want:    want{err: `cannot apply patch 1 of template "t" (PatchSet): patchSetName is required by patch type PatchSet`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := inlinePatches("t", fromYAML[[]v1.Patch](t, tc.patches), sets)
			if diff := cmp.Diff(tc.want.err, errString(err)); diff != "" {
				t.Errorf("%s\n-want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.refs, got, cmp.AllowUnexported(patchRef{})); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
