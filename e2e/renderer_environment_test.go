//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/e2e/framework"
)

// The environment test has an XR kind of its own, so that its Composition
// is the only one for that kind.
var envXRGVK = schema.GroupVersionKind{Group: "envrender.e2e.loom.dev", Version: "v1alpha1", Kind: "XEnvNop"}

// envRBAC gives Loom's services their rights on the test's XR kind, as
// rendererRBAC does for the renderer test's.
var envRBAC = strings.NewReplacer(
	"renderer.e2e.loom.dev", "envrender.e2e.loom.dev",
	"xrendernops", "xenvnops",
	"renderer-e2e", "envrender-e2e",
	"loom:renderer:e2e", "loom:renderer:envrender-e2e",
).Replace(rendererRBAC)

const envXRD = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xenvnops.envrender.e2e.loom.dev
spec:
  group: envrender.e2e.loom.dev
  names: {kind: XEnvNop, plural: xenvnops}
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
            properties:
              parameters:
                type: object
                properties:
                  size: {type: string}
`

// envComposition selects exactly one EnvironmentConfig by label (mode
// Single) under the resolve policy IfNotPresent, and patches its region and
// the XR's size into a NopResource.
const envComposition = `
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xenvnops
spec:
  compositeTypeRef: {apiVersion: envrender.e2e.loom.dev/v1alpha1, kind: XEnvNop}
  environment:
    policy: {resolve: IfNotPresent}
    environmentConfigs:
    - type: Selector
      selector:
        mode: Single
        matchLabels:
        - {key: envrender-e2e, type: Value, value: "true"}
  resources:
  - name: nop
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider:
          conditionAfter:
          - {time: 1s, conditionType: Ready, conditionStatus: "True"}
          fields: {region: none, size: none}
    patches:
    - type: FromEnvironmentFieldPath
      fromFieldPath: region
      toFieldPath: spec.forProvider.fields.region
    - fromFieldPath: spec.parameters.size
      toFieldPath: spec.forProvider.fields.size
`

func envConfig(name, region string) string {
	return fmt.Sprintf(`
apiVersion: apiextensions.crossplane.io/v1beta1
kind: EnvironmentConfig
metadata:
  name: %s
  labels: {envrender-e2e: "true"}
data:
  region: %s
`, name, region)
}

// TestRendererEnvironmentIfNotPresent checks Crossplane v1.20's resolve
// policy IfNotPresent: an XR keeps the EnvironmentConfigs it resolved (its
// spec.environmentConfigRefs) and does not select again, so a second
// EnvironmentConfig that its Single-mode selector would also match neither
// changes its environment nor fails it.
func TestRendererEnvironmentIfNotPresent(t *testing.T) {
	env := framework.StartStack(t)
	ctx := t.Context()
	framework.ApplyYAML(t, envRBAC)
	framework.ApplyYAML(t, envXRD, envComposition, envConfig("envrender-a", "west"))

	ecs := env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1beta1", Resource: "environmentconfigs"})
	xrs := env.Dynamic.Resource(envXRGVK.GroupVersion().WithResource("xenvnops"))
	nops := env.Dynamic.Resource(rendererNop.GroupVersion().WithResource("nopresources"))
	t.Cleanup(func() {
		_ = ecs.Delete(ctx, "envrender-a", metav1.DeleteOptions{})
		_ = ecs.Delete(ctx, "envrender-b", metav1.DeleteOptions{})
	})

	xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"parameters": map[string]any{"size": "small"}}}}
	xr.SetGroupVersionKind(envXRGVK)
	xr.SetName("envrender")
	if _, err := xrs.Create(ctx, xr, metav1.CreateOptions{}); err != nil {
		t.Fatalf("cannot create XR envrender: %v", err)
	}
	t.Cleanup(func() { _ = xrs.Delete(ctx, "envrender", metav1.DeleteOptions{}) })

	// check returns an error unless the XR is Synced and Ready, resolved
	// exactly envrender-a, and its NopResource has region west and size.
	check := func(size string) error {
		got, err := xrs.Get(ctx, "envrender", metav1.GetOptions{})
		if err != nil {
			return err
		}
		refs, _, _ := unstructured.NestedSlice(got.Object, "spec", "environmentConfigRefs")
		var names []string
		for _, r := range refs {
			m, _ := r.(map[string]any)
			names = append(names, fmt.Sprint(m["name"]))
		}
		errs := []error{
			hasCondition(got, "Synced", "True", "ReconcileSuccess"),
			hasCondition(got, "Ready", "True", "Available"),
		}
		if strings.Join(names, ",") != "envrender-a" {
			errs = append(errs, fmt.Errorf("spec.environmentConfigRefs names %v, want [envrender-a]", names))
		}
		rrefs, _, _ := unstructured.NestedSlice(got.Object, "spec", "resourceRefs")
		if len(rrefs) != 1 {
			return errors.Join(append(errs, fmt.Errorf("spec.resourceRefs is %v, want one NopResource", rrefs))...)
		}
		m, _ := rrefs[0].(map[string]any)
		nop, err := nops.Get(ctx, fmt.Sprint(m["name"]), metav1.GetOptions{})
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		errs = append(errs,
			expectString(nop, "west", "spec", "forProvider", "fields", "region"),
			expectString(nop, size, "spec", "forProvider", "fields", "size"))
		return errors.Join(errs...)
	}
	framework.Eventually(t, time.Minute, func() error { return check("small") })

	// A second EnvironmentConfig with the same label: under Always the
	// Single-mode selector would now match two and fail the XR. Changing
	// the XR's spec makes it render again; the environment stays
	// envrender-a's.
	framework.ApplyYAML(t, envConfig("envrender-b", "east"))
	if _, err := xrs.Patch(ctx, "envrender", types.MergePatchType, []byte(`{"spec":{"parameters":{"size":"large"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("cannot patch XR envrender: %v", err)
	}
	framework.Eventually(t, time.Minute, func() error { return check("large") })
}
