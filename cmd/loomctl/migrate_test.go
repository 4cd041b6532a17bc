package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/stack"
	"github.com/loomxr/loom/pkg/stack/stacktest"
)

// objectsClient serves objects from memory: the seam checkMigration is
// unit-tested at; TestMigrateCheckCluster runs it on a real API server.
type objectsClient struct {
	objs      []*unstructured.Unstructured
	resources map[schema.GroupVersionKind]string
}

func (c *objectsClient) List(_ context.Context, gvk schema.GroupVersionKind) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	for _, o := range c.objs {
		if o.GroupVersionKind() == gvk {
			out = append(out, *o.DeepCopy())
		}
	}
	return out, nil
}

func (c *objectsClient) Resource(gvk schema.GroupVersionKind) (string, bool) {
	r, ok := c.resources[gvk]
	return r, ok
}

const migrateBase = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xnops.example.org}
spec:
  group: example.org
  names: {kind: XNop, plural: xnops}
  claimNames: {kind: Nop, plural: nops}
  versions: [{name: v1, served: true, referenceable: true}]
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: nops}
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XNop}
  mode: Resources
  resources:
  - name: a
    base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
---
apiVersion: example.org/v1
kind: Nop
metadata: {name: one, namespace: team}
spec: {resourceRef: {apiVersion: example.org/v1, kind: XNop, name: one-abcde}}
---
apiVersion: example.org/v1
kind: XNop
metadata: {name: one-abcde}
spec:
  resourceRefs:
  - {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: one-abcde-fghij}
`

const migrateRoles = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: renderer-nop
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- {apiGroups: [nop.crossplane.io], resources: [nopresources], verbs: [get, create, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: watcher-nop
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- {apiGroups: [nop.crossplane.io], resources: ["*"], verbs: [get, list, watch]}
`

const migratePipeline = `
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: fns}
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XNop}
  mode: Pipeline
  pipeline:
  - {step: one, functionRef: {name: function-patch-and-transform}}
  - {step: two, functionRef: {name: function-auto-ready}}
---
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: function-auto-ready}
spec: {endpoint: "auto-ready.fns:9443", insecure: true}
`

func decode(t *testing.T, docs ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range docs {
		objs, err := stack.DecodeManifests([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, objs...)
	}
	return out
}

func TestCheckMigration(t *testing.T) {
	nop := schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}
	served := map[schema.GroupVersionKind]string{nop: "nopresources"}
	type want struct {
		ok     bool
		adopt  map[string]int
		failed map[string][]string
	}
	adopt := map[string]int{"CompositeResourceDefinition": 1, "Composition": 1, "CompositionRevision": 0,
		"claims": 1, "composite resources": 1, "composed resources": 1}
	cases := map[string]struct {
		reason    string
		docs      []string
		resources map[schema.GroupVersionKind]string
		want      want
	}{
		"Ready": {
			reason: "A platform whose composed kinds Loom's services have rights on, with no function, store or running Crossplane, passes.",
			docs:   []string{migrateBase, migrateRoles}, resources: served,
			want: want{ok: true, adopt: adopt},
		},
		"NoRoles": {
			reason: "A composed kind no aggregated ClusterRole covers would break.",
			docs:   []string{migrateBase}, resources: served,
			want: want{adopt: adopt, failed: map[string][]string{"composed-rbac": {
				"NopResource.nop.crossplane.io/v1alpha1 (1): no aggregated ClusterRole grants renderer (get, create, patch, delete); watcher (get, list, watch)"}}},
		},
		"NotServed": {
			reason: "A composed kind the cluster does not serve is reported.",
			docs:   []string{migrateBase, migrateRoles},
			want: want{adopt: adopt, failed: map[string][]string{"composed-rbac": {
				"NopResource.nop.crossplane.io/v1alpha1 (1): the cluster does not serve this kind"}}},
		},
		"FunctionWithoutEndpoint": {
			reason: "A function a Pipeline Composition uses needs a loom.dev Function; one that has it passes.",
			docs:   []string{migrateBase, migrateRoles, migratePipeline}, resources: served,
			want: want{adopt: map[string]int{"CompositeResourceDefinition": 1, "Composition": 2, "CompositionRevision": 0,
				"claims": 1, "composite resources": 1, "composed resources": 1},
				failed: map[string][]string{"functions": {"function-patch-and-transform (used by fns)"}}},
		},
		"SecretStoreAndCrossplane": {
			reason: "An XR that publishes to an external secret store, and Crossplane core still running, would break.",
			docs: []string{migrateBase, migrateRoles, `
apiVersion: example.org/v1
kind: XNop
metadata: {name: two}
spec: {publishConnectionDetailsTo: {name: two}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: crossplane, namespace: crossplane-system}
spec: {replicas: 1}
`}, resources: served,
			want: want{adopt: map[string]int{"CompositeResourceDefinition": 1, "Composition": 1, "CompositionRevision": 0,
				"claims": 1, "composite resources": 2, "composed resources": 1},
				failed: map[string][]string{
					"secret-stores":      {"XNop/two"},
					"crossplane-running": {"Deployment crossplane-system/crossplane (1 replicas)"},
				}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &objectsClient{objs: decode(t, tc.docs...), resources: tc.resources}
			rep, err := checkMigration(t.Context(), c, "crossplane-system")
			if err != nil {
				t.Fatal(err)
			}
			failed := map[string][]string{}
			for _, ck := range rep.Checks {
				if ck.Status == checkFail {
					failed[ck.Name] = ck.Items
				}
				if ck.Count != len(ck.Items) {
					t.Errorf("%s\ncheck %s: count %d, %d items", tc.reason, ck.Name, ck.Count, len(ck.Items))
				}
			}
			got := want{ok: rep.OK, adopt: rep.Adopt, failed: failed}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\ncheckMigration(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestMigrateCheckCluster runs `loomctl migrate check` on a real control
// plane: it fails (non-zero exit, the failing check in its JSON) while a
// Pipeline Composition's function has no loom.dev Function, and passes once
// it has one.
func TestMigrateCheckCluster(t *testing.T) {
	stacktest.K8sBinDir(t)
	ctx := t.Context()
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	s, err := stack.Start(startCtx, stack.Options{StateDir: filepath.Join(t.TempDir(), "stack"), Services: []string{}})
	cancel()
	if err != nil {
		t.Fatalf("cannot start the control plane: %v", err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.Stop(sctx)
	})
	pipeline := strings.Replace(migratePipeline, "function-auto-ready}}", "function-auto-ready}}\n  - {step: three, functionRef: {name: function-missing}}", 1)
	// No XRD: its CRDs would wait for a renderer, and the check needs
	// none to find the Composition's functions.
	if _, err := s.ApplyObjects(ctx, decode(t, pipeline)...); err != nil {
		t.Fatal(err)
	}

	run := func() (*MigrateReport, error) {
		var out bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		root.SetArgs([]string{"migrate", "check", "--kubeconfig", s.AdminKubeconfig(), "--output", "json"})
		err := root.ExecuteContext(ctx)
		rep := &MigrateReport{}
		if jerr := json.Unmarshal(out.Bytes(), rep); jerr != nil {
			t.Fatalf("cannot decode the output of loomctl migrate check (%v): %v\n%s", err, jerr, out.String())
		}
		return rep, err
	}
	rep, err := run()
	if !errors.Is(err, errMigrateBlocked) {
		t.Fatalf("loomctl migrate check with a function lacking an endpoint: error %v, want %v", err, errMigrateBlocked)
	}
	if got := failedChecks(rep); !cmp.Equal(got, []string{"functions"}) {
		t.Fatalf("failed checks %v, want [functions]: %+v", got, rep.Checks)
	}

	if _, err := s.ApplyObjects(ctx, decode(t, `
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: function-missing}
spec: {endpoint: "missing.fns:9443", insecure: true}
---
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: function-patch-and-transform}
spec: {endpoint: "pt.fns:9443", insecure: true}
`)...); err != nil {
		t.Fatal(err)
	}
	rep, err = run()
	if err != nil || !rep.OK {
		t.Fatalf("loomctl migrate check with every function's endpoint: error %v, report %+v", err, rep)
	}
	if rep.Adopt["Composition"] != 1 {
		t.Errorf("adopt %v: want 1 Composition", rep.Adopt)
	}
}

func failedChecks(rep *MigrateReport) []string {
	var out []string
	for _, c := range rep.Checks {
		if c.Status == checkFail {
			out = append(out, c.Name)
		}
	}
	return out
}
