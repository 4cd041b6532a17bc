package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files of the render tests")

// execute runs loomctl with args and returns its stdout, stderr and error.
func execute(ctx context.Context, args ...string) (string, string, error) {
	root := newRoot()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return stdout.String(), stderr.String(), err
}

const (
	mysqlXR          = "testdata/render/mysql/xr.yaml"
	mysqlComposition = "../../examples/mysql/composition.yaml"
	gkeXR            = "testdata/render/gke/xr.yaml"
	gkeComposition   = "../../examples/gke/composition.yaml"
)

func TestRenderGolden(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		golden string
	}{
		"MySQLNew": {
			reason: "A new claim's XR renders the resource group, server and virtual network rule, none ready yet.",
			args:   []string{mysqlXR, mysqlComposition},
			golden: "testdata/render/mysql/new.golden.yaml",
		},
		"MySQLObserved": {
			reason: "Once the composed resources exist and are ready, the XR is ready and ToComposite patches fill its status.",
			args:   []string{"--observed-resources", "testdata/render/mysql/observed", mysqlXR, mysqlComposition},
			golden: "testdata/render/mysql/observed.golden.yaml",
		},
		"MySQLPartlyObserved": {
			reason: "Resources that do not exist yet hold the XR back and are named in its Ready condition.",
			args:   []string{"-o", "testdata/render/mysql/observed/server.yaml", mysqlXR, mysqlComposition},
			golden: "testdata/render/mysql/partly-observed.golden.yaml",
		},
		"MySQLFullXR": {
			reason: "--include-full-xr prints the whole XR.",
			args:   []string{"-x", mysqlXR, mysqlComposition},
			golden: "testdata/render/mysql/full-xr.golden.yaml",
		},
		"GKENew": {
			reason: "The cluster and three node pools get the claim's external name with their suffixes.",
			args:   []string{gkeXR, gkeComposition},
			golden: "testdata/render/gke/new.golden.yaml",
		},
		"GKEObserved": {
			reason: "Once everything exists and is ready the XR is ready with the cluster's name and endpoint.",
			args:   []string{"-o", "testdata/render/gke/observed", gkeXR, gkeComposition},
			golden: "testdata/render/gke/observed.golden.yaml",
		},
		"Environment": {
			reason: "EnvironmentConfigs from --extra-resources are selected by labels read from the XR.",
			args:   []string{"-e", "testdata/render/env/environmentconfigs.yaml", mysqlXR, "testdata/render/env/composition.yaml"},
			golden: "testdata/render/env/golden.yaml",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, err := execute(t.Context(), append([]string{"render"}, tc.args...)...)
			if err != nil {
				t.Fatalf("%s\nloomctl render %v: %v\nstderr: %s", tc.reason, tc.args, err, stderr)
			}
			if *update {
				if err := os.WriteFile(tc.golden, []byte(stdout), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(tc.golden)
			if err != nil {
				t.Fatalf("cannot read golden file (run go test -update to write it): %v", err)
			}
			if diff := cmp.Diff(string(want), stdout); diff != "" {
				t.Errorf("%s\nloomctl render %v: -want (%s), +got:\n%s", tc.reason, tc.args, tc.golden, diff)
			}
			if stderr != "" {
				t.Errorf("%s\nloomctl render %v: want nothing on stderr, got %q", tc.reason, tc.args, stderr)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		want   string
	}{
		"MalformedFieldPath": {
			reason: "A malformed field path names the template, patch, path and problem.",
			args:   []string{mysqlXR, "testdata/render/bad/malformed-path.yaml"},
			want: `cannot render composite resource XMySQLInstance "my-db-7xk2p" with Composition malformed-path:
cannot apply patch 0 of template "server" (FromCompositeFieldPath spec.parameters..storageGB -> spec.forProvider.fields.storageMB): fromFieldPath: invalid field path "spec.parameters..storageGB": unexpected '.' at position 16`,
		},
		"TypeMismatchAndMissingKey": {
			reason: "Every failing template is reported, each naming the first failing patch and transform.",
			args:   []string{mysqlXR, "testdata/render/bad/type-mismatch.yaml"},
			want: `cannot render composite resource XMySQLInstance "my-db-7xk2p" with Composition type-mismatch:
cannot apply patch 0 of template "resourcegroup" (FromCompositeFieldPath spec.parameters.size -> spec.forProvider.fields.sku): transform 0 (map): key "small" is not in the map
cannot apply patch 1 of template "server" (FromCompositeFieldPath spec.parameters.size -> spec.forProvider.fields.storageMB): transform 0 (math Multiply): input is string, want a number`,
		},
		"UnknownTransform": {
			reason: "An unknown transform type is named.",
			args:   []string{mysqlXR, "testdata/render/bad/unknown-transform.yaml"},
			want: `cannot render composite resource XMySQLInstance "my-db-7xk2p" with Composition unknown-transform:
cannot apply patch 0 of template "server" (FromCompositeFieldPath spec.parameters.size -> spec.forProvider.fields.size): transform 0 (lookup): unknown transform type "lookup" (want map, match, math, string or convert)`,
		},
		"UnknownField": {
			reason: "A field the Composition API does not have is rejected, as the API server would.",
			args:   []string{mysqlXR, "testdata/render/bad/unknown-field.yaml"},
			want:   `cannot read COMPOSITION: testdata/render/bad/unknown-field.yaml#1: invalid Composition: json: unknown field "patchs"`,
		},
		"OtherKind": {
			reason: "A Composition for another kind of XR is refused.",
			args:   []string{mysqlXR, "testdata/render/bad/other-kind.yaml"},
			want:   `cannot render composite resource XMySQLInstance "my-db-7xk2p" with Composition other-kind: cannot render Composition: spec.compositeTypeRef: the Composition is for XPostgreSQLInstance, database.example.org/v1alpha1, not for the composite resource's XMySQLInstance, database.example.org/v1alpha1`,
		},
		"MissingEnvironmentConfig": {
			reason: "A referenced EnvironmentConfig that is not given is named.",
			args:   []string{mysqlXR, "testdata/render/bad/missing-environment.yaml"},
			want:   `cannot render composite resource XMySQLInstance "my-db-7xk2p" with Composition missing-environment: cannot build the environment: spec.environment.environmentConfigs[0]: EnvironmentConfig "mysql-defaults" does not exist`,
		},
		"ObservedWithoutAnnotation": {
			reason: "Observed resources must name their template.",
			args:   []string{"-o", "testdata/render/bad/observed-unannotated.yaml", mysqlXR, mysqlComposition},
			want:   `cannot use observed resource NopResource "stray": it has no crossplane.io/composition-resource-name annotation naming its template`,
		},
		"OtherNamespace": {
			reason: "A namespaced XR's templates that name or patch another namespace are refused, as Loom's renderer refuses them, not moved into the XR's.",
			args:   []string{"testdata/render/bad/namespaced-xr.yaml", "testdata/render/bad/other-namespace.yaml"},
			want: `cannot render composite resource XApp "app" with Composition other-namespace: composed resource "config": namespace "elsewhere" is not the composite resource's namespace "team-a", and a Namespaced composite resource may compose only into its own
composed resource "patched": a patch writes metadata.namespace, and a Namespaced composite resource may compose only into its own namespace`,
		},
		"NotAComposition": {
			reason: "COMPOSITION must hold a Composition.",
			args:   []string{mysqlXR, "../../examples/mysql/definition.yaml"},
			want:   "cannot read COMPOSITION: ../../examples/mysql/definition.yaml#1: want a Composition of apiextensions.crossplane.io/v1, got a CompositeResourceDefinition of apiextensions.crossplane.io/v1",
		},
		"MissingXR": {
			reason: "A missing file is named.",
			args:   []string{"testdata/render/nope.yaml", mysqlComposition},
			want:   "cannot read XR: stat testdata/render/nope.yaml: no such file or directory",
		},
		"TooManyXRs": {
			reason: "XR must hold exactly one object.",
			args:   []string{"testdata/render/env/environmentconfigs.yaml", mysqlComposition},
			want:   "cannot read XR: testdata/render/env/environmentconfigs.yaml: want exactly one composite resource, found 2 objects",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stdout, _, err := execute(t.Context(), append([]string{"render"}, tc.args...)...)
			if err == nil {
				t.Fatalf("%s\nloomctl render %v: want an error, got none", tc.reason, tc.args)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("%s\nloomctl render %v: -want error, +got error:\n%s", tc.reason, tc.args, diff)
			}
			if stdout != "" {
				t.Errorf("%s\nloomctl render %v: want no output on error, got:\n%s", tc.reason, tc.args, stdout)
			}
		})
	}
}

func TestRenderPipelineWithoutHook(t *testing.T) {
	saved := renderPipeline
	t.Cleanup(func() { renderPipeline = saved })
	renderPipeline = nil

	_, _, err := execute(t.Context(), "render", mysqlXR, "testdata/render/bad/pipeline.yaml")
	want := "cannot render Composition pipeline: mode Pipeline needs FUNCTIONS, and this loomctl cannot run composition functions"
	if err == nil || err.Error() != want {
		t.Errorf("loomctl render of a Pipeline Composition without a pipeline renderer: want error %q, got %v", want, err)
	}
}

func TestRenderPipelineHook(t *testing.T) {
	saved := renderPipeline
	t.Cleanup(func() { renderPipeline = saved })

	var got renderInputs
	renderPipeline = func(_ context.Context, in renderInputs) (renderOutputs, error) {
		got = in
		return renderOutputs{}, errors.New("called")
	}
	_, _, err := execute(t.Context(), "render", "-e", "testdata/render/env/environmentconfigs.yaml", mysqlXR, "testdata/render/bad/pipeline.yaml", "testdata/render/bad/observed-unannotated.yaml")
	if err == nil || err.Error() != "called" {
		t.Fatalf("loomctl render of a Pipeline Composition: want the hook's error, got %v", err)
	}
	if got.Composition.GetName() != "pipeline" || got.Composite.GetName() != "my-db-7xk2p" || len(got.Functions) != 1 || len(got.Extra) != 2 {
		t.Errorf("renderPipeline got the wrong inputs: composition %q, XR %q, %d functions, %d extra resources",
			got.Composition.GetName(), got.Composite.GetName(), len(got.Functions), len(got.Extra))
	}
}

// TestExamples checks that the example manifests decode into Loom's API
// types without unknown fields, and that claims, XRDs and Compositions agree.
func TestExamples(t *testing.T) {
	for _, scenario := range []string{"mysql", "gke"} {
		t.Run(scenario, func(t *testing.T) {
			dir := filepath.Join("..", "..", "examples", scenario)
			docs, err := readDocuments(filepath.Join(dir, "definition.yaml"))
			if err != nil || len(docs) != 1 {
				t.Fatalf("cannot read the definition: %v (%d documents)", err, len(docs))
			}
			xrd := &v1.CompositeResourceDefinition{}
			d := json.NewDecoder(bytes.NewReader(docs[0].json))
			d.DisallowUnknownFields()
			if err := d.Decode(xrd); err != nil {
				t.Fatalf("invalid CompositeResourceDefinition: %v", err)
			}
			comp, err := loadComposition(filepath.Join(dir, "composition.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			claims, err := loadObjects(filepath.Join(dir, "claim.yaml"))
			if err != nil || len(claims) != 1 {
				t.Fatalf("cannot read the claim: %v (%d objects)", err, len(claims))
			}

			version := ""
			for _, v := range xrd.Spec.Versions {
				if v.Referenceable {
					version = v.Name
				}
			}
			gv := xrd.Spec.Group + "/" + version
			if diff := cmp.Diff(v1.TypeReference{APIVersion: gv, Kind: xrd.Spec.Names.Kind}, comp.Spec.CompositeTypeRef); diff != "" {
				t.Errorf("the Composition is not for the XRD's composite resource: -want, +got:\n%s", diff)
			}
			if xrd.Spec.ClaimNames == nil {
				t.Fatal("the XRD offers no claim")
			}
			if diff := cmp.Diff([]string{gv, xrd.Spec.ClaimNames.Kind}, []string{claims[0].GetAPIVersion(), claims[0].GetKind()}); diff != "" {
				t.Errorf("the claim is not of the XRD's claim kind: -want, +got:\n%s", diff)
			}
			if xrd.Spec.DefaultCompositionRef == nil || xrd.Spec.DefaultCompositionRef.Name != comp.GetName() {
				t.Errorf("the XRD's default Composition is not the example's %q", comp.GetName())
			}
		})
	}
}

func TestSetReadyCondition(t *testing.T) {
	cases := map[string]struct {
		reason  string
		unready []string
		want    string
	}{
		"Ready":  {reason: "Nothing unready: no message.", want: ""},
		"Two":    {reason: "As crossplane render: two names joined by a comma, sorted.", unready: []string{"b", "a"}, want: "Unready resources: a, b"},
		"Three":  {reason: "As crossplane render: three names end with \", and\".", unready: []string{"c", "a", "b"}, want: "Unready resources: a, b, and c"},
		"Beyond": {reason: "As crossplane render: names past the third are counted.", unready: []string{"e", "d", "c", "b", "a"}, want: "Unready resources: a, b, c, and 2 more"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xr := &unstructured.Unstructured{Object: map[string]any{}}
			setReadyCondition(xr, tc.unready)
			conds, _, _ := unstructured.NestedSlice(xr.Object, "status", "conditions")
			got := ""
			if len(conds) == 1 {
				got, _ = conds[0].(map[string]any)["message"].(string)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nsetReadyCondition(): -want message, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
