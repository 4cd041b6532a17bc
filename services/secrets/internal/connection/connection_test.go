package connection

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// spec decodes a CompositionSpec from YAML, failing t if it cannot.
func spec(t *testing.T, y string) *v1.CompositionSpec {
	t.Helper()
	s := &v1.CompositionSpec{}
	if err := yaml.Unmarshal([]byte(y), s); err != nil {
		t.Fatalf("cannot decode Composition spec: %v", err)
	}
	return s
}

func obj(t *testing.T, y string) map[string]any {
	t.Helper()
	o := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &o); err != nil {
		t.Fatalf("cannot decode object: %v", err)
	}
	return o
}

func ptr[T any](v T) *T { return &v }

// mysql is the seeds' MySQL Composition, connection details only.
const mysql = `
compositeTypeRef: {apiVersion: database.example.org/v1alpha1, kind: XMySQLInstance}
resources:
- name: resourcegroup
  base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
- name: server
  base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
  connectionDetails:
  - name: password
    fromConnectionSecretKey: attribute.administrator_login_password
  - name: username
    type: FromValue
    value: myadmin
  - name: port
    type: FromValue
    value: "3306"
- name: vnetrule
  base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
  connectionDetails:
  - name: endpoint
    fromFieldPath: status.atProvider.fields.endpoint
`

// pipeline is a Composition in mode Pipeline.
const pipeline = `
compositeTypeRef: {apiVersion: a/v1, kind: X}
mode: Pipeline
pipeline:
- step: s
  functionRef: {name: f}
`

func TestPlanFor(t *testing.T) {
	type want struct {
		plan Plan
		err  bool
	}
	cases := map[string]struct {
		reason string
		spec   string
		want   want
	}{
		"Resources": {
			reason: "Templates keep their order and names; unnamed ones are named by index; the prefix annotation is read from the base.",
			spec: `
compositeTypeRef: {apiVersion: a/v1, kind: X}
resources:
- name: a
  base: {apiVersion: v1, kind: ConfigMap, metadata: {annotations: {loom.dev/connection-secret-prefix: "a-"}}}
- base: {apiVersion: v1, kind: ConfigMap}
  connectionDetails: [{fromConnectionSecretKey: user}]
`,
			want: want{plan: Plan{Templates: []Template{
				{Name: "a", Prefix: "a-"},
				{Name: "1", Details: []v1.ConnectionDetail{{FromConnectionSecretKey: ptr("user")}}},
			}}},
		},
		"ResourcesAggregate": {
			reason: "A Composition that lists no connection details aggregates.",
			spec: `
compositeTypeRef: {apiVersion: a/v1, kind: X}
resources:
- name: a
  base: {apiVersion: v1, kind: ConfigMap}
`,
			want: want{plan: Plan{Templates: []Template{{Name: "a"}}, Aggregate: true}},
		},
		"Pipeline": {
			reason: "A pipeline's connection details are those its functions return; its steps' inputs, function-patch-and-transform's included, play no part.",
			spec: `
compositeTypeRef: {apiVersion: a/v1, kind: X}
mode: Pipeline
pipeline:
- step: pt
  functionRef: {name: function-patch-and-transform}
  input:
    apiVersion: pt.fn.crossplane.io/v1beta1
    kind: Resources
    resources:
    - name: db
      base: {apiVersion: v1, kind: ConfigMap}
      connectionDetails:
      - {name: password, type: FromConnectionSecretKey, fromConnectionSecretKey: pw}
- step: templating
  functionRef: {name: function-go-templating}
  input: {apiVersion: gotemplating.fn.crossplane.io/v1beta1, kind: GoTemplate}
`,
			want: want{plan: Plan{Pipeline: true}},
		},
		"InvalidBase": {
			reason: "A base whose metadata cannot be decoded is an error.",
			spec:   "",
			want:   want{err: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var s *v1.CompositionSpec
			if tc.spec == "" {
				s = &v1.CompositionSpec{Resources: []v1.ComposedTemplate{{Name: ptr("a"), Base: runtime.RawExtension{Raw: []byte(`{"metadata":{"annotations":"no"}}`)}}}}
			} else {
				s = spec(t, tc.spec)
			}
			got, err := PlanFor(s)
			if (err != nil) != tc.want.err {
				t.Fatalf("\n%s\nPlanFor(...): error %v, want error %t", tc.reason, err, tc.want.err)
			}
			if diff := cmp.Diff(tc.want.plan, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nPlanFor(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCompute(t *testing.T) {
	server := func(t *testing.T) Observed {
		return Observed{
			Name:         "server",
			Object:       obj(t, `{spec: {writeConnectionSecretToRef: {name: s, namespace: crossplane-system}}}`),
			HasSecretRef: true,
			Secret:       map[string][]byte{"attribute.administrator_login_password": []byte("s3cr3t"), "other": []byte("x")},
		}
	}
	vnet := func(t *testing.T) Observed {
		return Observed{Name: "vnetrule", Object: obj(t, `{status: {atProvider: {fields: {endpoint: "db.example.org:3306"}}}}`)}
	}
	rg := func(t *testing.T) Observed { return Observed{Name: "resourcegroup", Object: obj(t, `{}`)} }

	type want struct {
		res Result
		err error
	}
	cases := map[string]struct {
		reason    string
		spec      string
		resources func(t *testing.T) []Observed
		keys      []string
		// returned and hasReturned are what a pipeline's functions
		// returned, and whether the renderer handed it over.
		returned    map[string][]byte
		hasReturned bool
		want        want
	}{
		"MySQL": {
			reason: "A renamed secret key, a FromValue and a FromFieldPath detail from two composed resources; the XRD's keys filter port out.",
			spec:   mysql,
			resources: func(t *testing.T) []Observed {
				return []Observed{rg(t), server(t), vnet(t)}
			},
			keys: []string{"username", "password", "endpoint"},
			want: want{res: Result{
				Data: map[string][]byte{
					"username": []byte("myadmin"),
					"password": []byte("s3cr3t"),
					"endpoint": []byte("db.example.org:3306"),
				},
				Filtered: []string{"port"},
				Complete: true,
			}},
		},
		"MySQLNoKeys": {
			reason: "Without connectionSecretKeys every detail is published.",
			spec:   mysql,
			resources: func(t *testing.T) []Observed {
				return []Observed{rg(t), server(t), vnet(t)}
			},
			want: want{res: Result{
				Data: map[string][]byte{
					"username": []byte("myadmin"),
					"password": []byte("s3cr3t"),
					"endpoint": []byte("db.example.org:3306"),
					"port":     []byte("3306"),
				},
				Complete: true,
			}},
		},
		"MissingKey": {
			reason: "A key the XRD declares and no connection detail writes is missing; the others are published.",
			spec:   mysql,
			resources: func(t *testing.T) []Observed {
				return []Observed{rg(t), server(t), vnet(t)}
			},
			keys: []string{"username", "password", "endpoint", "ca.crt", "database"},
			want: want{res: Result{
				Data: map[string][]byte{
					"username": []byte("myadmin"),
					"password": []byte("s3cr3t"),
					"endpoint": []byte("db.example.org:3306"),
				},
				Missing:  []string{"ca.crt", "database"},
				Filtered: []string{"port"},
				Complete: true,
			}},
		},
		"NotYetObserved": {
			reason: "Keys of resources that do not exist yet, or whose Secret does not exist yet, are absent and their templates pending.",
			spec:   mysql,
			resources: func(t *testing.T) []Observed {
				s := server(t)
				s.Secret = nil
				return []Observed{rg(t), s}
			},
			keys: []string{"username", "password", "endpoint"},
			want: want{res: Result{
				Data:     map[string][]byte{"username": []byte("myadmin")},
				Absent:   []string{"endpoint", "password"},
				Filtered: []string{"port"},
				Pending:  []string{"server", "vnetrule"},
			}},
		},
		"SecretKeyMissing": {
			reason: "A key the composed resource's Secret does not hold is absent, silently.",
			spec:   mysql,
			resources: func(t *testing.T) []Observed {
				s := server(t)
				s.Secret = map[string][]byte{"other": []byte("x")}
				return []Observed{s, vnet(t)}
			},
			want: want{res: Result{
				Data: map[string][]byte{
					"username": []byte("myadmin"),
					"endpoint": []byte("db.example.org:3306"),
					"port":     []byte("3306"),
				},
				Absent: []string{"password"},
			}},
		},
		"LaterDetailWins": {
			reason: "Two details of the same name: the later (in template order) wins, without a conflict.",
			spec: `
compositeTypeRef: {apiVersion: a/v1, kind: X}
resources:
- name: a
  base: {apiVersion: v1, kind: ConfigMap}
  connectionDetails: [{name: k, value: first}]
- name: b
  base: {apiVersion: v1, kind: ConfigMap}
  connectionDetails: [{name: k, value: second}]
`,
			resources: func(t *testing.T) []Observed {
				return []Observed{{Name: "b", Object: obj(t, `{}`)}, {Name: "a", Object: obj(t, `{}`)}}
			},
			want: want{res: Result{Data: map[string][]byte{"k": []byte("second")}, Complete: true}},
		},
		"Aggregate": {
			reason: "Without connection details the Secrets are merged in template order: the later template wins a conflict; a prefix on a template (or, without a template, on the resource) renames its keys; resources without a template come last, by name.",
			spec: `
compositeTypeRef: {apiVersion: a/v1, kind: X}
resources:
- name: b
  base: {apiVersion: v1, kind: ConfigMap}
- name: a
  base: {apiVersion: v1, kind: ConfigMap}
- name: c
  base: {apiVersion: v1, kind: ConfigMap, metadata: {annotations: {loom.dev/connection-secret-prefix: "c."}}}
`,
			resources: func(t *testing.T) []Observed {
				return []Observed{
					{Name: "a", Object: obj(t, `{}`), HasSecretRef: true, Secret: map[string][]byte{"user": []byte("a-user"), "password": []byte("a-pw")}},
					{Name: "c", Object: obj(t, `{}`), HasSecretRef: true, Secret: map[string][]byte{"user": []byte("c-user")}},
					{Name: "z-fn", Object: obj(t, `{}`), HasSecretRef: true, Prefix: "z.", Secret: map[string][]byte{"token": []byte("z")}},
					{Name: "y-fn", Object: obj(t, `{}`), HasSecretRef: true, Secret: map[string][]byte{"password": []byte("y-pw")}},
					{Name: "b", Object: obj(t, `{}`), HasSecretRef: true, Secret: map[string][]byte{"user": []byte("b-user"), "password": []byte("b-pw")}},
				}
			},
			want: want{res: Result{
				Data: map[string][]byte{
					"user":     []byte("a-user"),
					"password": []byte("y-pw"),
					"c.user":   []byte("c-user"),
					"z.token":  []byte("z"),
				},
				Conflicts: []Conflict{
					{Key: "password", Templates: []string{"b", "a", "y-fn"}},
					{Key: "user", Templates: []string{"b", "a"}},
				},
				Complete: true,
			}},
		},
		"AggregateFiltered": {
			reason: "The XRD's keys filter aggregated keys; conflicts on filtered keys are not reported; keys the Secrets do not hold are absent but never missing.",
			spec: `
compositeTypeRef: {apiVersion: a/v1, kind: X}
resources:
- name: a
  base: {apiVersion: v1, kind: ConfigMap}
- name: b
  base: {apiVersion: v1, kind: ConfigMap}
`,
			resources: func(t *testing.T) []Observed {
				return []Observed{
					{Name: "a", Object: obj(t, `{}`), HasSecretRef: true, Secret: map[string][]byte{"user": []byte("a"), "password": []byte("a")}},
					{Name: "b", Object: obj(t, `{}`), HasSecretRef: true, Secret: map[string][]byte{"password": []byte("b")}},
				}
			},
			keys: []string{"user", "endpoint"},
			want: want{res: Result{
				Data:     map[string][]byte{"user": []byte("a")},
				Absent:   []string{"endpoint"},
				Filtered: []string{"password"},
			}},
		},
		"AggregatePending": {
			reason: "An aggregating Composition without declared keys is complete only when every resource and every Secret they name exists.",
			spec: `
compositeTypeRef: {apiVersion: a/v1, kind: X}
resources:
- name: a
  base: {apiVersion: v1, kind: ConfigMap}
- name: b
  base: {apiVersion: v1, kind: ConfigMap}
- name: c
  base: {apiVersion: v1, kind: ConfigMap}
`,
			resources: func(t *testing.T) []Observed {
				return []Observed{
					{Name: "a", Object: obj(t, `{}`), HasSecretRef: true, Secret: map[string][]byte{"user": []byte("a")}},
					{Name: "b", Object: obj(t, `{}`), HasSecretRef: true},
				}
			},
			want: want{res: Result{
				Data:    map[string][]byte{"user": []byte("a")},
				Pending: []string{"b", "c"},
			}},
		},
		"Empty": {
			reason: "Nothing to publish gives nil data.",
			spec: `
compositeTypeRef: {apiVersion: a/v1, kind: X}
resources:
- name: a
  base: {apiVersion: v1, kind: ConfigMap}
`,
			resources: func(t *testing.T) []Observed { return []Observed{{Name: "a", Object: obj(t, `{}`)}} },
			want:      want{res: Result{Complete: true}},
		},
		"Pipeline": {
			reason: "A pipeline publishes what its functions returned, filtered by the XRD's keys; composed resources' Secrets play no part.",
			spec:   pipeline,
			resources: func(t *testing.T) []Observed {
				return []Observed{server(t)}
			},
			keys:        []string{"password", "endpoint"},
			returned:    map[string][]byte{"password": []byte("fn-pw"), "endpoint": []byte("db:5432"), "debug": []byte("x")},
			hasReturned: true,
			want: want{res: Result{
				Data:     map[string][]byte{"password": []byte("fn-pw"), "endpoint": []byte("db:5432")},
				Filtered: []string{"debug"},
				Complete: true,
			}},
		},
		"PipelineAbsentKey": {
			reason:      "A declared key the functions did not return is absent, not missing: functions cannot be known before they run.",
			spec:        pipeline,
			resources:   func(t *testing.T) []Observed { return nil },
			keys:        []string{"password", "endpoint"},
			returned:    map[string][]byte{"password": []byte("fn-pw")},
			hasReturned: true,
			want: want{res: Result{
				Data:   map[string][]byte{"password": []byte("fn-pw")},
				Absent: []string{"endpoint"},
			}},
		},
		"PipelineNothingReturned": {
			reason:      "A pipeline whose functions returned nothing publishes an empty Secret, once the renderer said so.",
			spec:        pipeline,
			resources:   func(t *testing.T) []Observed { return nil },
			hasReturned: true,
			want:        want{res: Result{Complete: true}},
		},
		"PipelineNotHandedOver": {
			reason:    "Before the renderer handed the pipeline's details over, nothing is complete.",
			spec:      pipeline,
			resources: func(t *testing.T) []Observed { return nil },
			want:      want{res: Result{}},
		},
		"InvalidDetail": {
			reason: "A connection detail that is not valid fails, naming its template and index.",
			spec: `
compositeTypeRef: {apiVersion: a/v1, kind: X}
resources:
- name: a
  base: {apiVersion: v1, kind: ConfigMap}
  connectionDetails: [{name: ok, value: v}, {type: FromFieldPath, fromFieldPath: spec.x}]
`,
			resources: func(t *testing.T) []Observed { return []Observed{{Name: "a", Object: obj(t, `{}`)}} },
			want:      want{err: ErrInvalid},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := PlanFor(spec(t, tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Compute(Input{Plan: p, Resources: tc.resources(t), Keys: tc.keys, Returned: tc.returned, HasReturned: tc.hasReturned})
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("\n%s\nCompute(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.res, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nCompute(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestComputeInvalidMessage(t *testing.T) {
	p := Plan{Templates: []Template{{Name: "db", Details: []v1.ConnectionDetail{{Name: ptr("x")}}}}}
	_, err := Compute(Input{Plan: p, Resources: []Observed{{Name: "db", Object: map[string]any{}}}})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Compute(...): error %v, want ErrInvalid", err)
	}
	want := `invalid connection details: template "db": connectionDetails[0]: one of fromConnectionSecretKey, fromFieldPath and value is required`
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("Compute(...): -want message, +got message:\n%s", diff)
	}
}

func TestConflictString(t *testing.T) {
	c := Conflict{Key: "password", Templates: []string{"a", "b", "c"}}
	want := `connection secret key "password" is held by the connection Secrets of "a", "b", "c"; "c" wins (template order)`
	if diff := cmp.Diff(want, c.String()); diff != "" {
		t.Errorf("String(): -want, +got:\n%s", diff)
	}
}

func TestProvides(t *testing.T) {
	p, err := PlanFor(spec(t, mysql))
	if err != nil {
		t.Fatal(err)
	}
	keys, known := p.Provides()
	if diff := cmp.Diff([]string{"endpoint", "password", "port", "username"}, keys); diff != "" || !known {
		t.Errorf("Provides(): known %t, -want, +got:\n%s", known, diff)
	}
}
