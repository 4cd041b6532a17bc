package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/compose"
	"github.com/loomxr/loom/pkg/fn"
)

func init() { renderPipeline = renderFunctions }

// Annotations of a Function manifest that say where `render` reaches it, as
// in Crossplane's render.
const (
	// annotationRuntime is the runtime that runs the function. loomctl does
	// not run functions, so only Development (the default here) works: the
	// function is already running and listening.
	annotationRuntime = "render.crossplane.io/runtime"
	// annotationDevelopmentTarget is the gRPC target of a Development
	// function.
	annotationDevelopmentTarget = "render.crossplane.io/runtime-development-target"

	runtimeDevelopment       = "Development"
	defaultDevelopmentTarget = "localhost:9443"
)

// renderTimeout bounds a whole pipeline render, as crossplane render's
// default --timeout does; each call is bounded by it too.
const renderTimeout = time.Minute

// renderFunctions renders a Composition in mode Pipeline by calling its
// functions, which must already be running: each Function of FUNCTIONS is
// reached in plaintext at its render.crossplane.io/runtime-development-target
// annotation (default localhost:9443), as Crossplane's render does for
// Development runtimes. Extra resources answer the functions' requirements
// (and Secrets among them their credentials).
func renderFunctions(ctx context.Context, in renderInputs) (renderOutputs, error) {
	xr, comp := in.Composite, in.Composition
	failed := func(err error) (renderOutputs, error) {
		return renderOutputs{}, fmt.Errorf("cannot render composite resource %s %q with Composition %s: %w", xr.GetKind(), xr.GetName(), comp.GetName(), err)
	}
	if ref := comp.Spec.CompositeTypeRef; ref.APIVersion != xr.GetAPIVersion() || ref.Kind != xr.GetKind() {
		return failed(fmt.Errorf("spec.compositeTypeRef: the Composition is for %s, %s, not for the composite resource's %s, %s", ref.Kind, ref.APIVersion, xr.GetKind(), xr.GetAPIVersion()))
	}
	steps, err := fn.StepsFromPipeline(comp.Spec.Pipeline)
	if err != nil {
		return failed(err)
	}
	if len(steps) == 0 {
		return failed(errors.New("spec.pipeline: mode Pipeline needs at least one step"))
	}
	targets, err := developmentTargets(in.Functions)
	if err != nil {
		return failed(err)
	}
	for _, s := range steps {
		if _, ok := targets[s.Function]; !ok {
			return failed(fmt.Errorf("pipeline step %q runs function %q, which FUNCTIONS does not define", s.Name, s.Function))
		}
	}
	observed, err := observedState(xr, in.Observed)
	if err != nil {
		return failed(err)
	}

	client := fn.NewClient(targets, fn.WithDefaultTimeout(renderTimeout))
	defer func() { _ = client.Close() }()
	extra := extraResources(in.Extra)
	exec := fn.NewExecutor(client, fn.WithResourceFetcher(extra), fn.WithCredentialFetcher(extra))
	ctx, cancel := context.WithTimeout(ctx, renderTimeout)
	defer cancel()
	res, err := exec.Run(ctx, steps, observed)
	if err != nil {
		return failed(err)
	}

	// A namespaced XR's function that asks for another namespace is
	// refused, as Loom's renderer refuses it, rather than moved into the
	// XR's.
	var scope []error
	for _, name := range slices.Sorted(maps.Keys(res.Desired.Resources)) {
		u := &unstructured.Unstructured{Object: res.Desired.Resources[name].Object}
		if err := compose.CheckNamespace(xr, name, u.GetNamespace()); err != nil {
			scope = append(scope, err)
		}
	}
	if len(scope) > 0 {
		return failed(errors.Join(scope...))
	}

	out := renderOutputs{Composite: desiredComposite(xr, res)}
	var unready []string
	for _, name := range slices.Sorted(maps.Keys(res.Desired.Resources)) {
		d := res.Desired.Resources[name]
		u := &unstructured.Unstructured{Object: d.Object}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			return failed(fmt.Errorf("desired composed resource %q has no apiVersion or kind", name))
		}
		obs := observedByName(in.Observed, name)
		if err := compose.SetComposedMetadata(xr, u, name, obs); err != nil {
			return failed(fmt.Errorf("desired composed resource %q: metadata: %w", name, err))
		}
		out.Resources = append(out.Resources, u)
		if !composedReady(d.Ready, obs) {
			unready = append(unready, name)
		}
	}
	switch res.Desired.Composite.Ready {
	case fn.ReadyTrue:
		unready = nil
	case fn.ReadyFalse:
		if len(unready) == 0 {
			unready = []string{"(the pipeline marked the composite resource not ready)"}
		}
	case fn.ReadyUnspecified:
		// Readiness follows the composed resources.
	}
	setReadyCondition(out.Composite, unready)
	for _, r := range res.Results {
		out.Results = append(out.Results, resultDocument(r))
	}
	return out, nil
}

// developmentTargets maps each Function of FUNCTIONS (any API group: a
// Crossplane pkg.crossplane.io Function or a loom.dev Function) to the
// address its annotations name.
func developmentTargets(fns []*unstructured.Unstructured) (fn.StaticResolver, error) {
	if len(fns) == 0 {
		return nil, errors.New("mode Pipeline needs FUNCTIONS: a file or folder with the Functions the pipeline runs")
	}
	out := fn.StaticResolver{}
	for _, f := range fns {
		if f.GetKind() != "Function" {
			return nil, fmt.Errorf("FUNCTIONS: %s %q is not a Function", f.GetKind(), f.GetName())
		}
		a := f.GetAnnotations()
		if rt := a[annotationRuntime]; rt != "" && rt != runtimeDevelopment {
			return nil, fmt.Errorf("function %q: runtime %q is not supported: loomctl render does not start functions; run it yourself and annotate it with %s: %s", f.GetName(), rt, annotationRuntime, runtimeDevelopment)
		}
		target := a[annotationDevelopmentTarget]
		if target == "" {
			target = defaultDevelopmentTarget
		}
		// Development functions serve plaintext (--insecure), as they do
		// for crossplane render.
		out[f.GetName()] = fn.Target{Endpoint: target, Insecure: true}
	}
	return out, nil
}

// observedState is the XR and the observed composed resources, keyed by
// their composition resource name.
func observedState(xr *unstructured.Unstructured, observed []*unstructured.Unstructured) (fn.State, error) {
	s := fn.State{Composite: fn.Resource{Object: xr.Object}}
	for _, o := range observed {
		name := o.GetAnnotations()[v1.AnnotationCompositionResourceName]
		if name == "" {
			return s, fmt.Errorf("cannot use observed resource %s %q: it has no %s annotation", o.GetKind(), o.GetName(), v1.AnnotationCompositionResourceName)
		}
		if s.Resources == nil {
			s.Resources = map[string]fn.Resource{}
		}
		if _, dup := s.Resources[name]; dup {
			return s, fmt.Errorf("cannot use observed resource %s %q: another observed resource is already %q", o.GetKind(), o.GetName(), name)
		}
		s.Resources[name] = fn.Resource{Object: o.Object}
	}
	return s, nil
}

func observedByName(observed []*unstructured.Unstructured, name string) *unstructured.Unstructured {
	for _, o := range observed {
		if o.GetAnnotations()[v1.AnnotationCompositionResourceName] == name {
			return o
		}
	}
	return nil
}

// composedReady is whether a desired composed resource counts as ready: the
// function's verdict when it gave one, otherwise the observed resource's
// Ready condition (a resource that does not exist yet is not ready).
func composedReady(r fn.Ready, observed *unstructured.Unstructured) bool {
	switch r {
	case fn.ReadyTrue:
		return true
	case fn.ReadyFalse:
		return false
	case fn.ReadyUnspecified:
		// The observed resource decides, below.
	}
	if observed == nil {
		return false
	}
	ready, _, err := compose.IsReady(observed.Object, nil)
	return err == nil && ready
}

// desiredComposite is the XR as the cluster would show it after the render:
// the desired status the pipeline returned merged over the observed status,
// with the conditions the functions set.
func desiredComposite(xr *unstructured.Unstructured, res fn.Outcome) *unstructured.Unstructured {
	out := xr.DeepCopy()
	if d := res.Desired.Composite.Object; d != nil {
		if ds, ok := d["status"].(map[string]any); ok {
			st, _ := out.Object["status"].(map[string]any)
			out.Object["status"] = mergeObjects(st, runtime.DeepCopyJSON(ds))
		}
	}
	var conds []any
	if existing, ok, _ := unstructured.NestedSlice(out.Object, "status", "conditions"); ok {
		conds = existing
	}
	for _, c := range res.Conditions {
		m := map[string]any{"type": c.Type, "status": string(c.Status), "reason": c.Reason, "lastTransitionTime": renderTransitionTime}
		if c.Message != "" {
			m["message"] = c.Message
		}
		conds = slices.DeleteFunc(conds, func(e any) bool {
			em, _ := e.(map[string]any)
			return em["type"] == c.Type
		})
		conds = append(conds, m)
	}
	if len(conds) > 0 {
		_ = unstructured.SetNestedSlice(out.Object, conds, "status", "conditions")
	}
	return out
}

// mergeObjects merges src into dst, recursively for objects; src wins.
func mergeObjects(dst, src map[string]any) map[string]any {
	if dst == nil {
		return src
	}
	for k, v := range src {
		dm, dok := dst[k].(map[string]any)
		sm, sok := v.(map[string]any)
		if dok && sok {
			dst[k] = mergeObjects(dm, sm)
			continue
		}
		dst[k] = v
	}
	return dst
}

// resultDocument is a function result as crossplane render prints it.
func resultDocument(r fn.Result) *unstructured.Unstructured {
	sev := map[fn.Severity]string{fn.SeverityFatal: "SEVERITY_FATAL", fn.SeverityWarning: "SEVERITY_WARNING", fn.SeverityNormal: "SEVERITY_NORMAL"}[r.Severity]
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "render.crossplane.io/v1beta1",
		"kind":       "Result",
		"step":       r.Step,
		"severity":   sev,
		"reason":     r.Reason,
		"message":    r.Message,
	}}
}

// extraResources answers requirements from the objects of
// --extra-resources, and credentials from the Secrets among them.
type extraResources []*unstructured.Unstructured

// FetchResources returns the objects s selects.
func (e extraResources) FetchResources(_ context.Context, s fn.Selector) ([]map[string]any, error) {
	var out []map[string]any
	for _, o := range e {
		if o.GetAPIVersion() != s.APIVersion || o.GetKind() != s.Kind {
			continue
		}
		if (s.Namespace != "" && o.GetNamespace() != s.Namespace) || (s.Name != "" && o.GetName() != s.Name) {
			continue
		}
		labels := o.GetLabels()
		match := true
		for k, v := range s.MatchLabels {
			if got, ok := labels[k]; !ok || got != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, runtime.DeepCopyJSON(o.Object))
		}
	}
	return out, nil
}

// FetchCredential returns the data of a Secret among the extra resources.
func (e extraResources) FetchCredential(_ context.Context, ref fn.SecretRef) (map[string][]byte, error) {
	for _, o := range e {
		if o.GroupVersionKind() != (schema.GroupVersionKind{Version: "v1", Kind: "Secret"}) || o.GetNamespace() != ref.Namespace || o.GetName() != ref.Name {
			continue
		}
		s := &corev1.Secret{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, s); err != nil {
			return nil, fmt.Errorf("cannot decode Secret %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		data := maps.Clone(s.Data)
		if data == nil {
			data = map[string][]byte{}
		}
		for k, v := range s.StringData {
			data[k] = []byte(v)
		}
		return data, nil
	}
	return nil, fmt.Errorf("no Secret %s/%s among the --extra-resources", ref.Namespace, ref.Name)
}
