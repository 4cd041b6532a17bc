//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/stack"
)

var pipelineXRGVK = schema.GroupVersionKind{Group: "pipeline.e2e.loom.dev", Version: "v1alpha1", Kind: "XPipe"}

const pipelineKinds = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:pipeline-e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [pipeline.e2e.loom.dev]
  resources: [xpipes]
  verbs: [get, list, patch, delete]
- apiGroups: [pipeline.e2e.loom.dev]
  resources: [xpipes/status]
  verbs: [patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:pipeline-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [pipeline.e2e.loom.dev]
  resources: [xpipes]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:pipeline-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [pipeline.e2e.loom.dev]
  resources: [xpipes, xpipes/status]
  verbs: [get, patch]
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xpipes.pipeline.e2e.loom.dev
spec:
  group: pipeline.e2e.loom.dev
  names: {kind: XPipe, plural: xpipes}
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
`

// pipelineComposition runs the two test functions; the cluster and `loomctl
// render` both render it.
const pipelineComposition = `
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xpipes
spec:
  compositeTypeRef: {apiVersion: pipeline.e2e.loom.dev/v1alpha1, kind: XPipe}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: e2e-compose-from-env}
    input:
      apiVersion: testfn.loom.dev/v1alpha1
      kind: Input
      spec:
        labels: {env: pipeline-e2e}
        count: 2
        watch: true
  - step: context
    functionRef: {name: e2e-read-context}
    input:
      apiVersion: testfn.loom.dev/v1alpha1
      kind: Input
      spec: {}
`

func pipelineEnvironment(region string) string {
	return fmt.Sprintf(`
apiVersion: apiextensions.crossplane.io/v1beta1
kind: EnvironmentConfig
metadata:
  name: pipeline-e2e
  labels: {env: pipeline-e2e}
data:
  region: %s
`, region)
}

// writeManifests writes objects (JSON is YAML) or YAML documents into a
// file of dir and returns its path.
func writeManifests(t *testing.T, dir, name string, docs ...any) string {
	t.Helper()
	var b strings.Builder
	for _, d := range docs {
		b.WriteString("---\n")
		switch d := d.(type) {
		case string:
			b.WriteString(d)
		default:
			j, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(j)
		}
		b.WriteString("\n")
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// renderLocally runs `loomctl render` of the cluster's XR xr (with its UID,
// so that composed names derived from it match) through pipelineComposition,
// reaching the functions at the development targets compose and readCtx,
// with the EnvironmentConfig env as extra resource. It returns the composed
// resources it printed by composition resource name.
func renderLocally(t *testing.T, xr *unstructured.Unstructured, compose, readCtx, env string) map[string]*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	functions := fmt.Sprintf(`
apiVersion: loom.dev/v1alpha1
kind: Function
metadata:
  name: e2e-compose-from-env
  annotations: {render.crossplane.io/runtime-development-target: "%s"}
spec: {endpoint: "%s", insecure: true}
---
apiVersion: loom.dev/v1alpha1
kind: Function
metadata:
  name: e2e-read-context
  annotations: {render.crossplane.io/runtime-development-target: "%s"}
spec: {endpoint: "%s", insecure: true}
`, compose, compose, readCtx, readCtx)
	cmd := exec.CommandContext(t.Context(), traceLoomctl(t), "render",
		writeManifests(t, dir, "xr.yaml", xr.Object),
		writeManifests(t, dir, "composition.yaml", pipelineComposition),
		writeManifests(t, dir, "functions.yaml", functions),
		"--extra-resources", writeManifests(t, dir, "extra.yaml", env),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("loomctl render: %v\n%s", err, stderr.String())
	}
	objs, err := stack.DecodeManifests(stdout.Bytes())
	if err != nil {
		t.Fatalf("cannot decode the output of loomctl render: %v\n%s", err, stdout.String())
	}
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if name := o.GetAnnotations()["crossplane.io/composition-resource-name"]; name != "" {
			out[name] = o
		}
	}
	return out
}

// jsonValue is v as encoding/json decodes it (numbers are float64), so that
// values decoded by different decoders compare equal.
func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return err.Error()
	}
	return out
}

// sameComposed compares the composed resources loomctl render printed with
// those the cluster holds, by composition resource name: the same names,
// and every spec field loomctl printed equal to the cluster's (the cluster
// adds the API server's defaults).
func sameComposed(rendered, cluster map[string]*unstructured.Unstructured) error {
	var errs []error
	if diff := cmp.Diff(slices.Sorted(maps.Keys(cluster)), slices.Sorted(maps.Keys(rendered))); diff != "" {
		errs = append(errs, fmt.Errorf("composition resource names: -cluster, +loomctl render:\n%s", diff))
	}
	for name, c := range cluster {
		r, ok := rendered[name]
		if !ok {
			continue
		}
		if r.GetName() != c.GetName() {
			errs = append(errs, fmt.Errorf("composed resource %q: loomctl render names it %q, the cluster %q", name, r.GetName(), c.GetName()))
		}
		rs, _, _ := unstructured.NestedMap(r.Object, "spec")
		cs, _, _ := unstructured.NestedMap(c.Object, "spec")
		if len(rs) == 0 {
			errs = append(errs, fmt.Errorf("composed resource %q: loomctl render printed no spec", name))
		}
		for k, v := range rs {
			if diff := cmp.Diff(jsonValue(cs[k]), jsonValue(v)); diff != "" {
				errs = append(errs, fmt.Errorf("composed resource %q: spec.%s: -cluster, +loomctl render:\n%s", name, k, diff))
			}
		}
	}
	return errors.Join(errs...)
}

// TestRendererPipeline renders an XR through a two-step function pipeline:
// the first step requires EnvironmentConfigs by label and asks Loom to watch
// them, the second reads the first's context. A change of the watched
// EnvironmentConfig re-renders the XR.
func TestRendererPipeline(t *testing.T) {
	env := framework.StartStack(t)
	ctx := t.Context()
	composeBin, readCtxBin := framework.BuildFunction(t, "compose-from-env"), framework.BuildFunction(t, "read-context")

	// The cluster reaches the functions over mutual TLS, with the material
	// in Secrets of loom-system that the Functions name (the renderer may
	// get Secrets).
	pki := framework.NewFunctionPKI(t)
	certs := pki.ServerDir(t)
	compose := framework.ServeFunction(t, composeBin, certs)
	readCtx := framework.ServeFunction(t, readCtxBin, certs)
	framework.CreateFunctionSecrets(t, env, "loom-system", "e2e-function-ca", "e2e-function-client", pki)
	const functionTLS = `{caSecretRef: {namespace: loom-system, name: e2e-function-ca}, clientSecretRef: {namespace: loom-system, name: e2e-function-client}}`
	framework.ApplyYAML(t, fmt.Sprintf(`
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: e2e-compose-from-env}
spec: {endpoint: "%s", tls: %s}
---
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: e2e-read-context}
spec: {endpoint: "%s", tls: %s}
`, compose, functionTLS, readCtx, functionTLS), pipelineEnvironment("eu"), pipelineKinds, pipelineComposition)

	xrs := env.Dynamic.Resource(pipelineXRGVK.GroupVersion().WithResource("xpipes"))
	nops := env.Dynamic.Resource(rendererNop.GroupVersion().WithResource("nopresources"))
	xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	xr.SetGroupVersionKind(pipelineXRGVK)
	xr.SetName("pipe")
	if _, err := xrs.Create(ctx, xr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = xrs.Delete(context.Background(), "pipe", metav1.DeleteOptions{}) })

	composedOf := func(xr *unstructured.Unstructured) (map[string]*unstructured.Unstructured, error) {
		refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "resourceRefs")
		out := map[string]*unstructured.Unstructured{}
		for _, r := range refs {
			name, _ := r.(map[string]any)["name"].(string)
			o, err := nops.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			out[o.GetAnnotations()["crossplane.io/composition-resource-name"]] = o
		}
		return out, nil
	}
	region := func(want string) error {
		got, err := xrs.Get(ctx, "pipe", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cs, err := composedOf(got)
		if err != nil {
			return err
		}
		var names []string
		for n := range cs {
			names = append(names, n)
		}
		slices.Sort(names)
		if fmt.Sprint(names) != "[from-context nop-0 nop-1]" {
			return fmt.Errorf("composed resources %v, want from-context, nop-0 and nop-1", names)
		}
		for _, n := range []string{"nop-0", "nop-1"} {
			if r, _, _ := unstructured.NestedString(cs[n].Object, "spec", "forProvider", "fields", "region"); r != want {
				return fmt.Errorf("%s's region is %q, want %q", n, r, want)
			}
		}
		return nil
	}

	var got *unstructured.Unstructured
	framework.Eventually(t, time.Minute, func() error {
		var err error
		if got, err = xrs.Get(ctx, "pipe", metav1.GetOptions{}); err != nil {
			return err
		}
		return errors.Join(
			region("eu"),
			hasCondition(got, "Synced", "True", "ReconcileSuccess"),
			hasCondition(got, "Ready", "True", "Available"),
		)
	})
	if c := conditionField(got, "EnvironmentFound", "status"); c != "True" {
		t.Errorf("the function's EnvironmentFound condition is %q, want True", c)
	}
	if types, _, _ := unstructured.NestedStringSlice(got.Object, "status", "claimConditionTypes"); !slices.Contains(types, "EnvironmentFound") {
		t.Errorf("claimConditionTypes %v lack EnvironmentFound", types)
	}
	watched, _, _ := unstructured.NestedSlice(got.Object, "status", "watchedResourceRefs")
	if len(watched) != 1 || watched[0].(map[string]any)["name"] != "pipeline-e2e" || watched[0].(map[string]any)["step"] != "compose" {
		t.Errorf("watchedResourceRefs %v, want the EnvironmentConfig pipeline-e2e of step compose", watched)
	}

	// loomctl render of the cluster's XR, against the same functions
	// started locally in development mode (plaintext), prints the
	// composed resources the cluster holds.
	cluster, err := composedOf(got)
	if err != nil {
		t.Fatal(err)
	}
	devCompose, devReadCtx := framework.ServeFunction(t, composeBin, ""), framework.ServeFunction(t, readCtxBin, "")
	if err := sameComposed(renderLocally(t, got, devCompose, devReadCtx, pipelineEnvironment("eu")), cluster); err != nil {
		t.Errorf("loomctl render differs from the cluster:\n%v", err)
	}

	// The watched EnvironmentConfig changes: the XR renders again, well
	// before its pipeline's one-minute TTL would have it render anyway.
	if _, err := env.Stack.ApplyObjects(ctx, mustDecode(t, pipelineEnvironment("us"))...); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error { return region("us") })

	cs, err := composedOf(got)
	if err != nil {
		t.Fatal(err)
	}
	if err := xrs.Delete(ctx, "pipe", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		for n, o := range cs {
			if _, err := nops.Get(ctx, o.GetName(), metav1.GetOptions{}); !kerrors.IsNotFound(err) {
				return fmt.Errorf("composed resource %s still exists (%v)", n, err)
			}
		}
		return nil
	})
}
