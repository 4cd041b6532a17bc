package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kjson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/compose"
	xpcondition "github.com/loomxr/loom/pkg/condition"
)

func init() { register(newRenderCmd) }

// renderInputs are the decoded inputs of `loomctl render`, handed to the
// renderer of the Composition's mode.
type renderInputs struct {
	// Composite is the composite resource to render.
	Composite *unstructured.Unstructured
	// Composition to render it with.
	Composition *v1.Composition
	// Functions are the objects of the FUNCTIONS argument, if given.
	Functions []*unstructured.Unstructured
	// Observed are the composed resources given with --observed-resources.
	Observed []*unstructured.Unstructured
	// Extra are the objects given with --extra-resources (EnvironmentConfigs
	// and any other objects).
	Extra []*unstructured.Unstructured
}

// renderOutputs are what the renderer of a mode produced.
type renderOutputs struct {
	// Composite is the desired composite resource. Unless --include-full-xr
	// is set only its apiVersion, kind, name and status are printed.
	Composite *unstructured.Unstructured
	// Resources are the desired composed resources. They are printed sorted
	// by their crossplane.io/composition-resource-name annotation.
	Resources []*unstructured.Unstructured
	// Results are extra documents printed last, in order, for example the
	// results of composition functions.
	Results []*unstructured.Unstructured
}

// renderPipeline renders a Composition in mode Pipeline. It is set by the file
// that implements composition functions; until then Pipeline Compositions
// cannot be rendered.
var renderPipeline func(ctx context.Context, in renderInputs) (renderOutputs, error) //nolint:gochecknoglobals // A hook set from init.

// renderOptions are the flags of `loomctl render`.
type renderOptions struct {
	observed      []string
	extra         []string
	includeFullXR bool
}

func newRenderCmd() *cobra.Command {
	o := &renderOptions{}
	c := &cobra.Command{
		Use:   "render XR COMPOSITION [FUNCTIONS]",
		Short: "Render a composite resource through a Composition, offline",
		Long: `Render prints the resources a composite resource (XR) composes through a
Composition, without a cluster, using the same engine as Loom's renderer.

XR is a YAML file with the composite resource; COMPOSITION a YAML file with the
Composition; FUNCTIONS (mode Pipeline only) a YAML file or folder with the
Functions it runs. The output is a YAML stream: the XR (apiVersion, kind, name
and status only, unless --include-full-xr), then the composed resources sorted
by their crossplane.io/composition-resource-name annotation.

Observed resources (--observed-resources) stand for composed resources that
already exist: they decide readiness and feed ToCompositeFieldPath patches and
connection details. Extra resources (--extra-resources) provide the
EnvironmentConfigs a Composition selects. Both take a YAML file or a folder of
YAML files and may be repeated.

Invalid input exits with status 1 and an error naming the template, the field
path and the cause.`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			var fns string
			if len(args) == 3 {
				fns = args[2]
			}
			return runRender(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], args[1], fns, o)
		},
	}
	f := c.Flags()
	f.StringArrayVarP(&o.observed, "observed-resources", "o", nil, "a YAML file or folder of composed resources that already exist (repeatable)")
	f.StringArrayVarP(&o.extra, "extra-resources", "e", nil, "a YAML file or folder of extra resources, such as EnvironmentConfigs (repeatable)")
	f.BoolVarP(&o.includeFullXR, "include-full-xr", "x", false, "print the whole composite resource, not only its name and status")
	return c
}

// runRender reads the inputs, renders them with the renderer of the
// Composition's mode and prints the result.
func runRender(ctx context.Context, stdout, stderr io.Writer, xrPath, compPath, fnPath string, o *renderOptions) error {
	in, err := loadRenderInputs(xrPath, compPath, fnPath, o)
	if err != nil {
		return err
	}

	var out renderOutputs
	switch mode := in.Composition.Spec.GetMode(); mode {
	case v1.CompositionModeResources:
		out, err = renderResources(in, stderr)
	case v1.CompositionModePipeline:
		if renderPipeline == nil {
			return errors.New("cannot render Composition " + in.Composition.GetName() + ": mode Pipeline needs FUNCTIONS, and this loomctl cannot run composition functions")
		}
		out, err = renderPipeline(ctx, in)
	default:
		return fmt.Errorf("cannot render Composition %s: spec.mode: unknown mode %q (want Resources or Pipeline)", in.Composition.GetName(), mode)
	}
	if err != nil {
		return err
	}
	return printRender(stdout, out, o.includeFullXR)
}

// loadRenderInputs reads and decodes the files of a render.
func loadRenderInputs(xrPath, compPath, fnPath string, o *renderOptions) (renderInputs, error) {
	var in renderInputs

	xrs, err := loadObjects(xrPath)
	if err != nil {
		return in, fmt.Errorf("cannot read XR: %w", err)
	}
	if len(xrs) != 1 {
		return in, fmt.Errorf("cannot read XR: %s: want exactly one composite resource, found %d objects", xrPath, len(xrs))
	}
	in.Composite = xrs[0]

	if in.Composition, err = loadComposition(compPath); err != nil {
		return in, fmt.Errorf("cannot read COMPOSITION: %w", err)
	}

	if fnPath != "" {
		if in.Functions, err = loadObjects(fnPath); err != nil {
			return in, fmt.Errorf("cannot read FUNCTIONS: %w", err)
		}
	}
	for _, p := range o.observed {
		objs, err := loadObjects(p)
		if err != nil {
			return in, fmt.Errorf("cannot read --observed-resources: %w", err)
		}
		in.Observed = append(in.Observed, objs...)
	}
	for _, p := range o.extra {
		objs, err := loadObjects(p)
		if err != nil {
			return in, fmt.Errorf("cannot read --extra-resources: %w", err)
		}
		in.Extra = append(in.Extra, objs...)
	}
	return in, nil
}

// loadComposition reads a file holding exactly one Composition, rejecting
// fields the Composition API does not have.
func loadComposition(path string) (*v1.Composition, error) {
	docs, err := readDocuments(path)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%s: want exactly one Composition, found %d objects", path, len(docs))
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(docs[0].json, &tm); err != nil {
		return nil, fmt.Errorf("%s: %w", docs[0].name, err)
	}
	if tm.APIVersion != v1.SchemeGroupVersion.String() || tm.Kind != "Composition" {
		return nil, fmt.Errorf("%s: want a Composition of %s, got a %s of %s", docs[0].name, v1.SchemeGroupVersion, tm.Kind, tm.APIVersion)
	}
	d := json.NewDecoder(bytes.NewReader(docs[0].json))
	d.DisallowUnknownFields()
	c := &v1.Composition{}
	if err := d.Decode(c); err != nil {
		return nil, fmt.Errorf("%s: invalid Composition: %w", docs[0].name, err)
	}
	return c, nil
}

// A document is one YAML document converted to JSON, and where it came from.
type document struct {
	name string // file, or file#n for the n-th document of a stream.
	json []byte
}

// readDocuments reads the YAML documents of a file, or of every .yaml, .yml
// and .json file of a folder (in name order), skipping empty documents.
func readDocuments(path string) ([]document, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		files = files[:0]
		for _, e := range entries {
			switch strings.ToLower(filepath.Ext(e.Name())) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() {
					files = append(files, filepath.Join(path, e.Name()))
				}
			}
		}
		sort.Strings(files)
	}

	var docs []document
	for _, file := range files {
		f, err := os.Open(file) //nolint:gosec // Reading the files the user names is the point.
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(f))
		for n := 1; ; n++ {
			raw, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			j, err := yaml.YAMLToJSON(raw)
			if err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("%s: document %d: %w", file, n, err)
			}
			if t := bytes.TrimSpace(j); len(t) == 0 || bytes.Equal(t, []byte("null")) {
				continue
			}
			docs = append(docs, document{name: fmt.Sprintf("%s#%d", file, n), json: j})
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// loadObjects reads the objects of a file or folder, with integers decoded as
// int64 the way Kubernetes decodes them. Every object must have an apiVersion
// and a kind.
func loadObjects(path string) ([]*unstructured.Unstructured, error) {
	docs, err := readDocuments(path)
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(docs))
	for _, d := range docs {
		obj := map[string]any{}
		if err := kjson.Unmarshal(d.json, &obj); err != nil {
			return nil, fmt.Errorf("%s: want an object: %w", d.name, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			return nil, fmt.Errorf("%s: apiVersion and kind are required", d.name)
		}
		out = append(out, u)
	}
	return out, nil
}

// renderResources renders a Composition in mode Resources with the
// patch-and-transform engine that Loom's renderer uses.
func renderResources(in renderInputs, stderr io.Writer) (renderOutputs, error) {
	observed := make(map[string]*unstructured.Unstructured, len(in.Observed))
	for _, o := range in.Observed {
		name := o.GetAnnotations()[v1.AnnotationCompositionResourceName]
		if name == "" {
			return renderOutputs{}, fmt.Errorf("cannot use observed resource %s %q: it has no %s annotation naming its template", o.GetKind(), o.GetName(), v1.AnnotationCompositionResourceName)
		}
		if _, dup := observed[name]; dup {
			return renderOutputs{}, fmt.Errorf("cannot use observed resource %s %q: another observed resource is already from template %q", o.GetKind(), o.GetName(), name)
		}
		observed[name] = o
	}
	var configs []*unstructured.Unstructured
	for _, e := range in.Extra {
		if e.GetKind() == "EnvironmentConfig" && e.GroupVersionKind().Group == v1.Group {
			configs = append(configs, e)
		}
	}

	res, err := compose.Render(compose.Request{
		Composite:          in.Composite,
		Composition:        &in.Composition.Spec,
		Observed:           observed,
		EnvironmentConfigs: configs,
	})
	if err != nil {
		return renderOutputs{}, fmt.Errorf("cannot render composite resource %s %q with Composition %s: %w", in.Composite.GetKind(), in.Composite.GetName(), in.Composition.GetName(), err)
	}
	for _, w := range res.Warnings {
		_, _ = fmt.Fprintln(stderr, "warning:", w)
	}
	// A namespaced XR's template that asks for another namespace is refused,
	// as Loom's renderer refuses it, rather than moved into the XR's.
	var scope []error
	for i := range in.Composition.Spec.Resources {
		if err := compose.CheckNamespace(in.Composite, compose.TemplateName(&in.Composition.Spec.Resources[i], i), compose.TemplateNamespace(&in.Composition.Spec, i)); err != nil {
			scope = append(scope, err)
		}
	}
	if len(scope) > 0 {
		return renderOutputs{}, fmt.Errorf("cannot render composite resource %s %q with Composition %s: %w", in.Composite.GetKind(), in.Composite.GetName(), in.Composition.GetName(), errors.Join(scope...))
	}
	if len(res.Errors) > 0 {
		msgs := make([]string, len(res.Errors))
		for i, e := range res.Errors {
			msgs[i] = e.Error()
		}
		return renderOutputs{}, fmt.Errorf("cannot render composite resource %s %q with Composition %s:\n%s", in.Composite.GetKind(), in.Composite.GetName(), in.Composition.GetName(), strings.Join(msgs, "\n"))
	}

	out := renderOutputs{Composite: res.Composite}
	var unready []string
	for _, r := range res.Resources {
		if r.Desired != nil {
			out.Resources = append(out.Resources, r.Desired)
		}
		if !r.Ready {
			unready = append(unready, r.Name)
		}
	}
	setReadyCondition(out.Composite, unready)
	return out, nil
}

// renderTransitionTime is the fixed lastTransitionTime of the conditions
// render synthesizes, so that its output is reproducible (as in Crossplane's
// render).
const renderTransitionTime = "2024-01-01T00:00:00Z"

// setReadyCondition sets the composite resource's Ready condition the way
// Loom's renderer does: Available when every composed resource is ready,
// otherwise Creating, naming the first three unready resources.
func setReadyCondition(xr *unstructured.Unstructured, unready []string) {
	c := map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": renderTransitionTime}
	if len(unready) > 0 {
		sort.Strings(unready)
		msg := "Unready resources: " + xpcondition.FirstNAndSomeMore(3, unready)
		c = map[string]any{"type": "Ready", "status": "False", "reason": "Creating", "message": msg, "lastTransitionTime": renderTransitionTime}
	}
	conds, _, _ := unstructured.NestedSlice(xr.Object, "status", "conditions")
	kept := make([]any, 0, len(conds)+1)
	for _, e := range conds {
		if m, ok := e.(map[string]any); ok && m["type"] == "Ready" {
			continue
		}
		kept = append(kept, e)
	}
	_ = unstructured.SetNestedSlice(xr.Object, append(kept, c), "status", "conditions")
}

// printRender prints the outputs of a render as a YAML stream.
func printRender(w io.Writer, out renderOutputs, fullXR bool) error {
	xr := out.Composite
	if !fullXR && xr != nil {
		trimmed := &unstructured.Unstructured{Object: map[string]any{}}
		trimmed.SetAPIVersion(xr.GetAPIVersion())
		trimmed.SetKind(xr.GetKind())
		trimmed.SetName(xr.GetName())
		if ns := xr.GetNamespace(); ns != "" {
			trimmed.SetNamespace(ns)
		}
		if s, ok := xr.Object["status"]; ok {
			trimmed.Object["status"] = s
		}
		xr = trimmed
	}

	resources := append([]*unstructured.Unstructured(nil), out.Resources...)
	sort.SliceStable(resources, func(i, j int) bool {
		return resources[i].GetAnnotations()[v1.AnnotationCompositionResourceName] < resources[j].GetAnnotations()[v1.AnnotationCompositionResourceName]
	})

	docs := make([]*unstructured.Unstructured, 0, 1+len(resources)+len(out.Results))
	if xr != nil {
		docs = append(docs, xr)
	}
	docs = append(append(docs, resources...), out.Results...)
	for _, d := range docs {
		b, err := yaml.Marshal(d.Object)
		if err != nil {
			return fmt.Errorf("cannot print %s %q: %w", d.GetKind(), d.GetName(), err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
			return err
		}
	}
	return nil
}
