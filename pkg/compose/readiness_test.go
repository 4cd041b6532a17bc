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
			want: want{reason: "condition Ready is not set, want True"},
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
		"MatchConditionDefaults": {
			reason:   "MatchCondition without matchCondition means Ready True.",
			observed: creating, checks: `[{type: MatchCondition}]`,
			want: want{reason: "condition Ready is False, want True (Creating: waiting for the API)"},
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
			reason:   "MatchString fails on a non-string.",
			observed: ready, checks: `[{type: MatchString, fieldPath: status.atProvider.replicas, matchString: "3"}]`,
			want: want{reason: `status.atProvider.replicas is integer, want the string "3"`},
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
			reason:   "MatchInteger fails on a non-integer.",
			observed: ready, checks: `[{type: MatchInteger, fieldPath: status.atProvider.state, matchInteger: 5}]`,
			want: want{reason: "status.atProvider.state is string, want the integer 5"},
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
			reason:   "MatchFalse fails on a non-boolean.",
			observed: ready, checks: `[{type: MatchFalse, fieldPath: status.atProvider.state}]`,
			want: want{reason: "status.atProvider.state is string, want false"},
		},
		"AllMustPass": {
			reason:   "Every check must pass; the first failing one is named.",
			observed: ready, checks: `[{type: None}, {type: MatchString, fieldPath: status.atProvider.state, matchString: Offline}]`,
			want: want{reason: `readiness check 1: status.atProvider.state is "Online", want "Offline"`},
		},
		"MissingFieldPath": {
			reason:   "Field checks need fieldPath.",
			observed: ready, checks: `[{type: NonEmpty}]`,
			want: want{err: "readinessChecks[0] (NonEmpty): fieldPath is required"},
		},
		"BadFieldPath": {
			reason:   "A malformed fieldPath is an error.",
			observed: ready, checks: `[{type: None}, {type: NonEmpty, fieldPath: "status..x"}]`,
			want: want{err: `readinessChecks[1] (NonEmpty): fieldPath: invalid field path "status..x": unexpected '.' at position 7`},
		},
		"MissingMatchString": {
			reason:   "MatchString needs matchString.",
			observed: ready, checks: `[{type: MatchString, fieldPath: a}]`,
			want: want{err: "readinessChecks[0] (MatchString): matchString is required"},
		},
		"MissingMatchInteger": {
			reason:   "MatchInteger needs a non-zero matchInteger.",
			observed: ready, checks: `[{type: MatchInteger, fieldPath: a}]`,
			want: want{err: "readinessChecks[0] (MatchInteger): matchInteger is required and may not be 0"},
		},
		"UnknownType": {
			reason:   "An unknown type is an error.",
			observed: ready, checks: `[{type: MatchRegexp, fieldPath: a}]`,
			want: want{err: `readinessChecks[0] (MatchRegexp): unknown readiness check type "MatchRegexp" (want NonEmpty, MatchString, MatchInteger, MatchTrue, MatchFalse, MatchCondition or None)`},
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
