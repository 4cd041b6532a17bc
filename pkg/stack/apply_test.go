package stack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestDecodeManifests(t *testing.T) {
	type want struct {
		names []string
		err   bool
	}
	cases := map[string]struct {
		reason string
		in     string
		want   want
	}{
		"MultiDocument": {
			reason: "YAML documents are decoded in order; empty ones are skipped.",
			in:     "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
			want:   want{names: []string{"Namespace/a", "ConfigMap/b"}},
		},
		"JSON": {
			reason: "JSON objects decode too.",
			in:     `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`,
			want:   want{names: []string{"Secret/s"}},
		},
		"Empty": {
			reason: "An empty stream holds no objects.",
			in:     "",
			want:   want{},
		},
		"MissingKind": {
			reason: "An object without kind is an error.",
			in:     "apiVersion: v1\nmetadata:\n  name: a\n",
			want:   want{err: true},
		},
		"Malformed": {
			reason: "Malformed YAML is an error.",
			in:     "apiVersion: v1\nkind: [\n",
			want:   want{err: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := DecodeManifests([]byte(tc.in))
			got := want{err: err != nil}
			for _, o := range objs {
				got.names = append(got.names, o.GetKind()+"/"+o.GetName())
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nDecodeManifests(...): -want, +got:\n%s\nerr: %v", tc.reason, diff, err)
			}
		})
	}
}

func FuzzDecodeManifests(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Secret"}`))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		objs, err := DecodeManifests(b)
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.GetAPIVersion() == "" || o.GetKind() == "" {
				t.Errorf("decoded an object without apiVersion or kind: %v", o.Object)
			}
		}
	})
}

func TestReadManifests(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n")
	write("a/x.yml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ax\n")
	write("README.md", "not a manifest")
	objs, err := ReadManifests(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetName())
	}
	if diff := cmp.Diff([]string{"ax", "b"}, got); diff != "" {
		t.Errorf("ReadManifests: files are read recursively in lexical order, others skipped: -want, +got:\n%s", diff)
	}
	if _, err := ReadManifests(filepath.Join(dir, "missing")); err == nil {
		t.Error("ReadManifests(missing): want error, got nil")
	}
}

func TestXRDCRDNames(t *testing.T) {
	cases := map[string]struct {
		reason string
		spec   map[string]any
		want   []string
	}{
		"WithClaim": {
			reason: "An XRD with claimNames defines the XR's and the claim's CRD.",
			spec: map[string]any{"group": "example.org",
				"names":      map[string]any{"plural": "xmysqlinstances"},
				"claimNames": map[string]any{"plural": "mysqlinstances"}},
			want: []string{"xmysqlinstances.example.org", "mysqlinstances.example.org"},
		},
		"WithoutClaim": {
			reason: "An XRD without claimNames defines only the XR's CRD.",
			spec:   map[string]any{"group": "example.org", "names": map[string]any{"plural": "xnets"}},
			want:   []string{"xnets.example.org"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xrd := &unstructured.Unstructured{Object: map[string]any{"spec": tc.spec}}
			if diff := cmp.Diff(tc.want, xrdCRDNames(xrd)); diff != "" {
				t.Errorf("%s\nxrdCRDNames: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCRDIsClaim(t *testing.T) {
	resourceRef := map[string]any{"openAPIV3Schema": map[string]any{"properties": map[string]any{
		"spec": map[string]any{"properties": map[string]any{"resourceRef": map[string]any{"type": "object"}}}}}}
	cases := map[string]struct {
		reason string
		spec   map[string]any
		want   bool
	}{
		"ClaimCategory": {
			reason: "A namespaced CRD in category claim defines claims.",
			spec:   map[string]any{"scope": "Namespaced", "names": map[string]any{"categories": []any{"crossplane", "claim"}}},
			want:   true,
		},
		"ResourceRef": {
			reason: "A namespaced CRD with spec.resourceRef defines claims.",
			spec:   map[string]any{"scope": "Namespaced", "versions": []any{map[string]any{"name": "v1", "schema": resourceRef}}},
			want:   true,
		},
		"ClusterScoped": {
			reason: "Claims are namespaced; a composite is not a claim.",
			spec:   map[string]any{"scope": "Cluster", "names": map[string]any{"categories": []any{"claim"}}},
			want:   false,
		},
		"Plain": {
			reason: "Any other CRD does not define claims.",
			spec:   map[string]any{"scope": "Namespaced", "names": map[string]any{"categories": []any{"all"}}},
			want:   false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			crd := &unstructured.Unstructured{Object: map[string]any{"spec": tc.spec}}
			if got := crdIsClaim(crd); got != tc.want {
				t.Errorf("%s\ncrdIsClaim: got %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

func TestReadRoles(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   []string
		err    bool
	}{
		"Roles": {
			reason: "ClusterRoles are kept as they are; Roles default to the stack's namespace.",
			in: "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: a\n---\n" +
				"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: b\n---\n" +
				"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: c\n  namespace: other\n",
			want: []string{"ClusterRole /a", "Role loom-system/b", "Role other/c"},
		},
		"NotARole": {
			reason: "Anything else in an RBAC file is an error.",
			in:     "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: a\n",
			err:    true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "svc.yaml")
			if err := os.WriteFile(p, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			roles, err := readRoles(p)
			if (err != nil) != tc.err {
				t.Fatalf("%s\nreadRoles: err %v, want error %v", tc.reason, err, tc.err)
			}
			var got []string
			for _, r := range roles {
				got = append(got, r.GetKind()+" "+r.GetNamespace()+"/"+r.GetName())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nreadRoles: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestBinding(t *testing.T) {
	sa := object("v1", "ServiceAccount", Namespace, "loom-binder")
	cases := map[string]struct {
		reason string
		role   *unstructured.Unstructured
		want   map[string]any
	}{
		"ClusterRole": {
			reason: "A ClusterRole is bound cluster-wide under its own name.",
			role:   object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "loom:binder"),
			want: map[string]any{
				"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
				"metadata": map[string]any{"name": "loom:binder"},
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "loom:binder"},
				"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "loom-binder", "namespace": Namespace}},
			},
		},
		"Role": {
			reason: "A Role is bound in its namespace.",
			role:   object("rbac.authorization.k8s.io/v1", "Role", "ns", "leases"),
			want: map[string]any{
				"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
				"metadata": map[string]any{"name": "leases", "namespace": "ns"},
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leases"},
				"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "loom-binder", "namespace": Namespace}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, binding(tc.role, sa).Object); diff != "" {
				t.Errorf("%s\nbinding: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
