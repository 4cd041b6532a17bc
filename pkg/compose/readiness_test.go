package compose

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

func TestIsReady(t *testing.T) {
	const ready = `{"status":{"conditions":[{"type":"Synced","status":"True"},{"type":"Ready","status":"True","reason":"Available"}],"atProvider":{"state":"Online","replicas":3,"enabled":true,"disabled":false,"id":"x"}}}`
	const creating = `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Creating","message":"waiting for the API"}]}}`
	type want struct {
		ready  bool
		reason string
		err    string
	}
	cases := map[string]struct {
		reason   string
		observed string
		checks   string
		want     want
	}{
		"NotObserved": {
			reason: "A resource that does not exist is not ready.",
			checks: `[{type: None}]`,
			want:   want{reason: ReasonNotCreated},
		},
		"DefaultReady": {
			reason:   "Without checks the Ready condition must be True.",
			observed: ready, checks: `[]`,
			want: want{ready: true},
		},
		"DefaultNotReady": {
			reason:   "Without checks a False Ready condition is not ready, with its reason and message.",
			observed: creating, checks: `[]`,
			want: want{reason: "condition Ready is False, want True (Creating: waiting for the API)"},
		},
		"DefaultNoConditions": {
			reason:   "Without conditions the resource is not ready.",
			observed: `{}`, checks: `[]`,
			want: want{reason: "condition Ready is Unknown (not set), want True"},
		},
		"MatchConditionAbsentIsUnknown": {
			reason:   "Like Crossplane, an absent condition has status Unknown, so a check for Unknown passes.",
			observed: `{}`, checks: `[{type: MatchCondition, matchCondition: {type: Synced, status: Unknown}}]`,
			want: want{ready: true},
		},
		"MatchConditionUnknown": {
			reason:   "A condition whose status is Unknown matches a check for Unknown.",
			observed: `{"status":{"conditions":[{"type":"Ready","status":"Unknown"}]}}`, checks: `[{type: MatchCondition, matchCondition: {type: Ready, status: Unknown}}]`,
			want: want{ready: true},
		},
		"MatchConditionUnknownNotTrue": {
			reason:   "An Unknown condition does not pass a check for True.",
			observed: `{"status":{"conditions":[{"type":"Ready","status":"Unknown"}]}}`, checks: `[]`,
			want: want{reason: "condition Ready is Unknown, want True"},
		},
		"None": {
			reason:   "None is always ready.",
			observed: creating, checks: `[{type: None}]`,
			want: want{ready: true},
		},
		"MatchConditionCustom": {
			reason:   "MatchCondition matches any condition type and status.",
			observed: ready, checks: `[{type: MatchCondition, matchCondition: {type: Synced, status: "True"}}]`,
			want: want{ready: true},
		},
		"MatchConditionMissing": {
			reason:   "Like Crossplane, MatchCondition without matchCondition is invalid: nothing defaults it.",
			observed: creating, checks: `[{type: MatchCondition}]`,
			want: want{err: "readinessChecks[0] (MatchCondition): matchCondition: is required for type MatchCondition"},
		},
		"MatchConditionEmptyType": {
			reason:   "Like Crossplane's validation, matchCondition.type may not be empty.",
			observed: creating, checks: `[{type: MatchCondition, matchCondition: {status: "True"}}]`,
			want: want{err: "readinessChecks[0] (MatchCondition): matchCondition.type: is required for type MatchCondition"},
		},
		"MatchConditionEmptyStatus": {
			reason:   "Like Crossplane's validation, matchCondition.status may not be empty.",
			observed: creating, checks: `[{type: MatchCondition, matchCondition: {type: Ready}}]`,
			want: want{err: "readinessChecks[0] (MatchCondition): matchCondition.status: is required for type MatchCondition"},
		},
		"InvalidNotObserved": {
			reason: "An invalid check is refused even before the resource exists.",
			checks: `[{type: MatchString, fieldPath: a}]`,
			want:   want{err: "readinessChecks[0] (MatchString): matchString: is required for type MatchString"},
		},
		"NonEmpty": {
			reason:   "NonEmpty passes if the field exists.",
			observed: ready, checks: `[{type: NonEmpty, fieldPath: status.atProvider.id}]`,
			want: want{ready: true},
		},
		"NonEmptyMissing": {
			reason:   "NonEmpty fails if the field does not exist.",
			observed: ready, checks: `[{type: NonEmpty, fieldPath: status.atProvider.endpoint}]`,
			want: want{reason: "status.atProvider.endpoint is not set"},
		},
		"MatchString": {
			reason:   "MatchString passes on equal strings.",
			observed: ready, checks: `[{type: MatchString, fieldPath: status.atProvider.state, matchString: Online}]`,
			want: want{ready: true},
		},
		"MatchStringDiffers": {
			reason:   "MatchString fails on another string, saying what it found.",
			observed: ready, checks: `[{type: MatchString, fieldPath: status.atProvider.state, matchString: Ready}]`,
			want: want{reason: `status.atProvider.state is "Online", want "Ready"`},
		},
		"MatchStringWrongType": {
			reason:   "Like Crossplane, MatchString on a field that is not a string is an error, not unready.",
			observed: ready, checks: `[{type: MatchString, fieldPath: status.atProvider.replicas, matchString: "3"}]`,
			want: want{err: `readinessChecks[0] (MatchString): status.atProvider.replicas is integer, not a string`},
		},
		"MatchInteger": {
			reason:   "MatchInteger passes on equal integers.",
			observed: ready, checks: `[{type: MatchInteger, fieldPath: status.atProvider.replicas, matchInteger: 3}]`,
			want: want{ready: true},
		},
		"MatchIntegerDiffers": {
			reason:   "MatchInteger fails on another integer.",
			observed: ready, checks: `[{type: MatchInteger, fieldPath: status.atProvider.replicas, matchInteger: 5}]`,
			want: want{reason: "status.atProvider.replicas is 3, want 5"},
		},
		"MatchIntegerWrongType": {
			reason:   "Like Crossplane, MatchInteger on a field that is not an integer is an error, not unready.",
			observed: ready, checks: `[{type: MatchInteger, fieldPath: status.atProvider.state, matchInteger: 5}]`,
			want: want{err: "readinessChecks[0] (MatchInteger): status.atProvider.state is string, not an integer"},
		},
		"MatchTrue": {
			reason:   "MatchTrue passes on true.",
			observed: ready, checks: `[{type: MatchTrue, fieldPath: status.atProvider.enabled}]`,
			want: want{ready: true},
		},
		"MatchTrueFalse": {
			reason:   "MatchTrue fails on false.",
			observed: ready, checks: `[{type: MatchTrue, fieldPath: status.atProvider.disabled}]`,
			want: want{reason: "status.atProvider.disabled is false, want true"},
		},
		"MatchTrueMissing": {
			reason:   "MatchTrue fails on a missing field.",
			observed: ready, checks: `[{type: MatchTrue, fieldPath: status.atProvider.nope}]`,
			want: want{reason: "status.atProvider.nope is not set"},
		},
		"MatchFalse": {
			reason:   "MatchFalse passes on false.",
			observed: ready, checks: `[{type: MatchFalse, fieldPath: status.atProvider.disabled}]`,
			want: want{ready: true},
		},
		"MatchFalseWrongType": {
			reason:   "Like Crossplane, MatchFalse on a field that is not a boolean is an error, not unready.",
			observed: ready, checks: `[{type: MatchFalse, fieldPath: status.atProvider.state}]`,
			want: want{err: "readinessChecks[0] (MatchFalse): status.atProvider.state is string, not a boolean"},
		},
		"AllMustPass": {
			reason:   "Every check must pass; the first failing one is named.",
			observed: ready, checks: `[{type: None}, {type: MatchString, fieldPath: status.atProvider.state, matchString: Offline}]`,
			want: want{reason: `readiness check 1: status.atProvider.state is "Online", want "Offline"`},
		},
		"MissingFieldPath": {
			reason:   "Field checks need fieldPath.",
			observed: ready, checks: `[{type: NonEmpty}]`,
			want: want{err: "readinessChecks[0] (NonEmpty): fieldPath: is required for type NonEmpty"},
		},
		"BadFieldPath": {
			reason:   "A malformed fieldPath is an error.",
			observed: ready, checks: `[{type: None}, {type: NonEmpty, fieldPath: "status..x"}]`,
			want: want{err: `readinessChecks[1] (NonEmpty): fieldPath: invalid field path "status..x": unexpected '.' at position 7`},
		},
		"MissingMatchString": {
			reason:   "MatchString needs matchString.",
			observed: ready, checks: `[{type: MatchString, fieldPath: a}]`,
			want: want{err: "readinessChecks[0] (MatchString): matchString: is required for type MatchString"},
		},
		"MissingMatchInteger": {
			reason:   "MatchInteger needs a non-zero matchInteger.",
			observed: ready, checks: `[{type: MatchInteger, fieldPath: a}]`,
			want: want{err: "readinessChecks[0] (MatchInteger): matchInteger: is required for type MatchInteger and may not be 0"},
		},
		"UnknownType": {
			reason:   "An unknown type is an error.",
			observed: ready, checks: `[{type: MatchRegexp, fieldPath: a}]`,
			want: want{err: `readinessChecks[0] (MatchRegexp): type: unknown readiness check type "MatchRegexp" (want NonEmpty, MatchString, MatchInteger, MatchTrue, MatchFalse, MatchCondition or None)`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var obs map[string]any
			if tc.observed != "" {
				obs = jsonObj(t, tc.observed)
			}
			ready, why, err := IsReady(obs, fromYAML[[]v1.ReadinessCheck](t, tc.checks))
			got := want{ready: ready, reason: why, err: errString(err)}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nIsReady(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
