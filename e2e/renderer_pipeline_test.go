//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/e2e/framework"
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
---
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

// startFunction builds a test function of e2e/testfn and serves it in
// plaintext on a free local port until the test ends. It returns the
// address.
func startFunction(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-o", bin, "./testfn/"+name)
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build %s: %v\n%s", name, err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(bin, "--insecure", "--address", addr)
	cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	framework.Eventually(t, 30*time.Second, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	return addr
}

// TestRendererPipeline renders an XR through a two-step function pipeline:
// the first step requires EnvironmentConfigs by label and asks Loom to watch
// them, the second reads the first's context. A change of the watched
// EnvironmentConfig re-renders the XR.
func TestRendererPipeline(t *testing.T) {
	env := framework.StartStack(t)
	ctx := t.Context()
	compose := startFunction(t, "compose-from-env")
	readCtx := startFunction(t, "read-context")
	framework.ApplyYAML(t, fmt.Sprintf(`
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: e2e-compose-from-env}
spec: {endpoint: "%s", insecure: true}
---
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: e2e-read-context}
spec: {endpoint: "%s", insecure: true}
`, compose, readCtx), pipelineEnvironment("eu"), pipelineKinds)

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
