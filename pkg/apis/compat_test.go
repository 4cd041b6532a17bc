// Package apis_test proves that Loom's API types and the CRDs generated from
// them (deploy/helm/loom/crds) accept what Crossplane v1.20 accepts: real
// Crossplane manifests decode strictly into the Go types, fit the CRDs without
// a field pruned or an error, and the CRDs load and match Crossplane's own.
package apis_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	apiextensionsv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	apiextensionsv1alpha1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1alpha1"
	apiextensionsv1beta1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1beta1"
	loomv1alpha1 "github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
	"github.com/loomxr/loom/pkg/xcrd/crdvalidation"
)

const (
	crdDir      = "../../deploy/helm/loom/crds"
	manifestDir = "testdata/crossplane"
	upstreamDir = "testdata/upstream"
)

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		apiextensionsv1.AddToScheme, apiextensionsv1beta1.AddToScheme, apiextensionsv1alpha1.AddToScheme, loomv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// A manifest is one YAML document of a testdata file.
type manifest struct {
	name string // file and document index, for messages
	raw  []byte // the document as JSON
	obj  map[string]any
	gvk  schema.GroupVersionKind
}

func readManifests(t *testing.T, dir string) []manifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no manifests in %s", dir)
	}
	var out []manifest
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: cannot read document %d: %v", f, i, err)
			}
			raw, err := yaml.YAMLToJSONStrict(doc)
			if err != nil {
				t.Fatalf("%s: document %d is not valid YAML: %v", f, i, err)
			}
			if string(bytes.TrimSpace(raw)) == "null" {
				continue // a comment-only document
			}
			obj := map[string]any{}
			if err := json.Unmarshal(raw, &obj); err != nil {
				t.Fatal(err)
			}
			av, _ := obj["apiVersion"].(string)
			k, _ := obj["kind"].(string)
			out = append(out, manifest{
				name: filepath.Base(f) + "#" + strconv.Itoa(i),
				raw:  raw,
				obj:  obj,
				gvk:  schema.FromAPIVersionAndKind(av, k),
			})
		}
	}
	return out
}

func readCRDs(t *testing.T, dir string) map[string]*extv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crds := map[string]*extv1.CustomResourceDefinition{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &extv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			t.Fatalf("%s: not a CustomResourceDefinition: %v", f, err)
		}
		crds[crd.Spec.Group+"/"+crd.Spec.Names.Kind] = crd
	}
	return crds
}

func TestCrossplaneManifestsDecodeStrictly(t *testing.T) {
	s := scheme(t)
	for _, m := range readManifests(t, manifestDir) {
		t.Run(m.name, func(t *testing.T) {
			obj, err := s.New(m.gvk)
			if err != nil {
				t.Fatalf("%s: Loom has no Go type for %s: %v", m.name, m.gvk, err)
			}
			// Strict: an unknown or duplicate field is an error.
			if err := yaml.UnmarshalStrict(m.raw, obj); err != nil {
				t.Fatalf("%s does not decode strictly into %T: %v", m.name, obj, err)
			}
			// And nothing is lost on the way back out.
			b, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]any{}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			// Decoding adds an empty metadata.creationTimestamp and status.
			delete(got["metadata"].(map[string]any), "creationTimestamp")
			if st, ok := got["status"].(map[string]any); ok && len(st) == 0 || got["status"] == nil {
				delete(got, "status")
			}
			if diff := cmp.Diff(m.obj, got); diff != "" {
				t.Errorf("%s: round trip through %T changes the manifest: -want, +got:\n%s", m.name, obj, diff)
			}
		})
	}
}

func TestCrossplaneManifestsFitCRDs(t *testing.T) {
	crds := readCRDs(t, crdDir)
	for _, m := range readManifests(t, manifestDir) {
		t.Run(m.name, func(t *testing.T) {
			crd, ok := crds[m.gvk.Group+"/"+m.gvk.Kind]
			if !ok {
				t.Fatalf("%s: no CRD in %s serves %s", m.name, crdDir, m.gvk.GroupKind())
			}
			v, err := crdvalidation.NewValidator(crd, m.gvk.Version)
			if err != nil {
				t.Fatal(err)
			}
			r := v.Validate(t.Context(), m.obj, nil)
			if len(r.Pruned) > 0 {
				t.Errorf("%s: the CRD does not know these fields (the API server would drop them): %v", m.name, r.Pruned)
			}
			if len(r.Errs) > 0 {
				t.Errorf("%s: the API server would reject it: %v", m.name, r.Errs)
			}
		})
	}
}

func TestGeneratedCRDsLoad(t *testing.T) {
	crds := readCRDs(t, crdDir)
	want := []string{
		"apiextensions.crossplane.io/CompositeResourceDefinition",
		"apiextensions.crossplane.io/Composition",
		"apiextensions.crossplane.io/CompositionRevision",
		"apiextensions.crossplane.io/EnvironmentConfig",
		"apiextensions.crossplane.io/Usage",
		"loom.dev/Function",
		"loom.dev/ReferenceRule",
	}
	for _, k := range want {
		if _, ok := crds[k]; !ok {
			t.Errorf("%s has no CRD for %s", crdDir, k)
		}
	}
	for k, crd := range crds {
		t.Run(k, func(t *testing.T) {
			if want := crd.Spec.Names.Plural + "." + crd.Spec.Group; crd.Name != want {
				t.Errorf("CRD name: want %q, got %q", want, crd.Name)
			}
			errs, err := crdvalidation.CRD(t.Context(), crd)
			if err != nil {
				t.Fatal(err)
			}
			if len(errs) > 0 {
				t.Errorf("the API server would reject CRD %s: %v", crd.Name, errs)
			}
		})
	}
}

// TestCRDsMatchUpstream compares Loom's CRDs with Crossplane's: same names,
// scope, versions, printer columns and subresources, and a schema that accepts
// everything Crossplane's accepts with the same meaning. Loom's additions are
// listed explicitly, so that an accidental one fails the test.
func TestCRDsMatchUpstream(t *testing.T) {
	ours := readCRDs(t, crdDir)
	cases := map[string]struct {
		reason    string
		additions []string
	}{
		"apiextensions.crossplane.io/CompositeResourceDefinition": {
			reason: "The XRD CRD is Crossplane v1.20's plus scope (as Crossplane v2 serves v1), serviceAccountRef and version subresources.",
			additions: []string{
				"spec.scope",
				"spec.serviceAccountRef", "spec.serviceAccountRef.name", "spec.serviceAccountRef.namespace",
				"spec.versions[].subresources", "spec.versions[].subresources.scale",
				"spec.versions[].subresources.scale.labelSelectorPath", "spec.versions[].subresources.scale.specReplicasPath",
				"spec.versions[].subresources.scale.statusReplicasPath",
			},
		},
		"apiextensions.crossplane.io/EnvironmentConfig": {
			reason: "The EnvironmentConfig CRD is Crossplane v1.20's.",
		},
		"apiextensions.crossplane.io/Usage": {
			reason: "The Usage CRD is Crossplane v1.20's.",
		},
	}
	upstream := readCRDs(t, upstreamDir)
	for k, tc := range cases {
		t.Run(k, func(t *testing.T) {
			up, ok := upstream[k]
			if !ok {
				t.Fatalf("no upstream CRD for %s in %s", k, upstreamDir)
			}
			our, ok := ours[k]
			if !ok {
				t.Fatalf("no CRD for %s in %s", k, crdDir)
			}
			if diff := cmp.Diff(up.Spec.Names, our.Spec.Names); diff != "" {
				t.Errorf("%s\nnames: -upstream, +ours:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(up.Spec.Scope, our.Spec.Scope); diff != "" {
				t.Errorf("%s\nscope: -upstream, +ours:\n%s", tc.reason, diff)
			}
			var added []string
			for _, uv := range up.Spec.Versions {
				i := slices.IndexFunc(our.Spec.Versions, func(v extv1.CustomResourceDefinitionVersion) bool { return v.Name == uv.Name })
				if i < 0 {
					t.Errorf("%s\nversion %s is missing", tc.reason, uv.Name)
					continue
				}
				ov := our.Spec.Versions[i]
				if ov.Served != uv.Served || ov.Storage != uv.Storage {
					t.Errorf("%s\nversion %s: served/storage: upstream %t/%t, ours %t/%t", tc.reason, uv.Name, uv.Served, uv.Storage, ov.Served, ov.Storage)
				}
				if diff := cmp.Diff(uv.AdditionalPrinterColumns, ov.AdditionalPrinterColumns); diff != "" {
					t.Errorf("%s\nversion %s printer columns: -upstream, +ours:\n%s", tc.reason, uv.Name, diff)
				}
				if diff := cmp.Diff(uv.Subresources, ov.Subresources); diff != "" {
					t.Errorf("%s\nversion %s subresources: -upstream, +ours:\n%s", tc.reason, uv.Name, diff)
				}
				added = append(added, compareSchema(t, uv.Name, "", uv.Schema.OpenAPIV3Schema, ov.Schema.OpenAPIV3Schema)...)
			}
			slices.Sort(added)
			added = slices.Compact(added)
			if diff := cmp.Diff(tc.additions, added, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("%s\nfields Loom adds: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// compareSchema checks that ours accepts what up accepts, with the same
// meaning, and returns the paths of the properties ours adds.
func compareSchema(t *testing.T, version, path string, up, ours *extv1.JSONSchemaProps) []string {
	t.Helper()
	at := version + ":" + strings.TrimPrefix(path, ".")
	if up == nil {
		return nil
	}
	if ours == nil {
		t.Errorf("%s: missing", at)
		return nil
	}
	type facets struct {
		Type, Format          string
		Enum                  []extv1.JSON
		Default               *extv1.JSON
		Required              []string
		MaxLength             *int64
		Nullable              bool
		PreserveUnknownFields *bool
		ListType, MapType     *string
		ListMapKeys           []string
	}
	f := func(s *extv1.JSONSchemaProps) facets {
		return facets{
			Type: s.Type, Format: s.Format, Enum: s.Enum, Default: s.Default, Required: s.Required, MaxLength: s.MaxLength,
			Nullable: s.Nullable, PreserveUnknownFields: s.XPreserveUnknownFields, ListType: s.XListType, MapType: s.XMapType, ListMapKeys: s.XListMapKeys,
		}
	}
	if diff := cmp.Diff(f(up), f(ours), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s: -upstream, +ours:\n%s", at, diff)
	}
	for _, r := range up.XValidations {
		if !slices.ContainsFunc(ours.XValidations, func(o extv1.ValidationRule) bool { return o.Rule == r.Rule }) {
			t.Errorf("%s: upstream rule %q is missing", at, r.Rule)
		}
	}

	var added []string
	for name, p := range up.Properties {
		o, ok := ours.Properties[name]
		if !ok {
			t.Errorf("%s: property %q is missing", at, name)
			continue
		}
		added = append(added, compareSchema(t, version, path+"."+name, &p, &o)...)
	}
	for name, o := range ours.Properties {
		if _, ok := up.Properties[name]; !ok {
			added = append(added, strings.TrimPrefix(path+"."+name, "."))
			added = append(added, descendants(strings.TrimPrefix(path+"."+name, "."), &o)...)
		}
	}
	if up.Items != nil || ours.Items != nil {
		var u, o *extv1.JSONSchemaProps
		if up.Items != nil {
			u = up.Items.Schema
		}
		if ours.Items != nil {
			o = ours.Items.Schema
		}
		added = append(added, compareSchema(t, version, path+"[]", u, o)...)
	}
	if up.AdditionalProperties != nil {
		if ours.AdditionalProperties == nil {
			t.Errorf("%s: additionalProperties missing", at)
		} else {
			added = append(added, compareSchema(t, version, path+"{}", up.AdditionalProperties.Schema, ours.AdditionalProperties.Schema)...)
		}
	}
	return added
}

func descendants(path string, s *extv1.JSONSchemaProps) []string {
	var out []string
	for name, p := range s.Properties {
		out = append(out, path+"."+name)
		out = append(out, descendants(path+"."+name, &p)...)
	}
	if s.Items != nil && s.Items.Schema != nil {
		out = append(out, descendants(path+"[]", s.Items.Schema)...)
	}
	return out
}
