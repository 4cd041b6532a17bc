package compose

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

func TestExtractConnectionDetails(t *testing.T) {
	const observed = `{"spec":{"writeConnectionSecretToRef":{"namespace":"crossplane-system","name":"srv-conn"},"forProvider":{"fields":{"login":"admin","port":3306,"tags":{"a":"b"}}}}}`
	type want struct {
		cds []ConnectionDetail
		err string
	}
	cases := map[string]struct {
		reason   string
		observed string
		details  string
		want     want
	}{
		"NotObserved": {
			reason:  "Nothing is extracted from a resource that does not exist.",
			details: `[{name: x, value: y}]`,
		},
		"FromConnectionSecretKeyRenamed": {
			reason:   "A secret key is described with the composed resource's secret; the name renames it.",
			observed: observed, details: `[{name: password, fromConnectionSecretKey: attribute.password}]`,
			want: want{cds: []ConnectionDetail{{Template: "t", Name: "password", Type: v1.ConnectionDetailTypeFromConnectionSecretKey, FromConnectionSecretKey: "attribute.password", SecretRef: &SecretRef{Namespace: "crossplane-system", Name: "srv-conn"}}}},
		},
		"FromConnectionSecretKeyDefaultName": {
			reason:   "Without a name the key keeps its name.",
			observed: `{}`, details: `[{type: FromConnectionSecretKey, fromConnectionSecretKey: username}]`,
			want: want{cds: []ConnectionDetail{{Template: "t", Name: "username", Type: v1.ConnectionDetailTypeFromConnectionSecretKey, FromConnectionSecretKey: "username"}}},
		},
		"FromFieldPathString": {
			reason:   "A string field is used as is.",
			observed: observed, details: `[{name: username, fromFieldPath: spec.forProvider.fields.login}]`,
			want: want{cds: []ConnectionDetail{{Template: "t", Name: "username", Type: v1.ConnectionDetailTypeFromFieldPath, Value: "admin"}}},
		},
		"FromFieldPathJSON": {
			reason:   "Other fields are JSON encoded.",
			observed: observed, details: `[{name: port, type: FromFieldPath, fromFieldPath: spec.forProvider.fields.port}, {name: tags, fromFieldPath: spec.forProvider.fields.tags}]`,
			want: want{cds: []ConnectionDetail{
				{Template: "t", Name: "port", Type: v1.ConnectionDetailTypeFromFieldPath, Value: "3306"},
				{Template: "t", Name: "tags", Type: v1.ConnectionDetailTypeFromFieldPath, Value: `{"a":"b"}`},
			}},
		},
		"FromFieldPathMissing": {
			reason:   "A missing field is skipped.",
			observed: observed, details: `[{name: endpoint, fromFieldPath: status.atProvider.endpoint}]`,
			want: want{cds: []ConnectionDetail{}},
		},
		"FromValue": {
			reason:   "A value is used as is; value takes precedence when the type is inferred.",
			observed: observed, details: `[{name: endpoint, value: "mysql.example.org", fromFieldPath: spec.x}]`,
			want: want{cds: []ConnectionDetail{{Template: "t", Name: "endpoint", Type: v1.ConnectionDetailTypeFromValue, Value: "mysql.example.org"}}},
		},
		"FromFieldPathNoName": {
			reason:   "FromFieldPath needs a name.",
			observed: observed, details: `[{fromFieldPath: spec.x}]`,
			want: want{err: "connectionDetails[0]: name is required by type FromFieldPath"},
		},
		"FromValueNoName": {
			reason:   "FromValue needs a name.",
			observed: observed, details: `[{name: a, value: b}, {value: b}]`,
			want: want{err: "connectionDetails[1]: name is required by type FromValue"},
		},
		"FromValueNoValue": {
			reason:   "FromValue needs a value.",
			observed: observed, details: `[{name: a, type: FromValue}]`,
			want: want{err: "connectionDetails[0]: value is required by type FromValue"},
		},
		"FromFieldPathNoPath": {
			reason:   "FromFieldPath needs fromFieldPath.",
			observed: observed, details: `[{name: a, type: FromFieldPath}]`,
			want: want{err: "connectionDetails[0]: fromFieldPath is required by type FromFieldPath"},
		},
		"FromFieldPathBadPath": {
			reason:   "A malformed fromFieldPath is an error.",
			observed: observed, details: `[{name: a, fromFieldPath: "spec[x"}]`,
			want: want{err: `connectionDetails[0]: fromFieldPath: invalid field path "spec[x": unterminated '[' at position 4`},
		},
		"FromSecretKeyNoKey": {
			reason:   "FromConnectionSecretKey needs the key.",
			observed: observed, details: `[{name: a, type: FromConnectionSecretKey}]`,
			want: want{err: "connectionDetails[0]: fromConnectionSecretKey is required by type FromConnectionSecretKey"},
		},
		"NothingSet": {
			reason:   "A detail needs a source.",
			observed: observed, details: `[{name: a}]`,
			want: want{err: "connectionDetails[0]: one of fromConnectionSecretKey, fromFieldPath and value is required"},
		},
		"UnknownType": {
			reason:   "An unknown type is an error.",
			observed: observed, details: `[{name: a, type: FromVault}]`,
			want: want{err: `connectionDetails[0]: unknown type "FromVault" (want FromConnectionSecretKey, FromFieldPath or FromValue)`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var obs map[string]any
			if tc.observed != "" {
				obs = jsonObj(t, tc.observed)
			}
			got, err := ExtractConnectionDetails("t", obs, fromYAML[[]v1.ConnectionDetail](t, tc.details))
			if diff := cmp.Diff(tc.want.err, errString(err)); diff != "" {
				t.Errorf("%s\n-want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.cds, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
