package composite

import (
	"context"
	"fmt"
	"slices"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
	loomv1alpha1 "github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
	"github.com/loomxr/loom/pkg/compose"
	"github.com/loomxr/loom/pkg/fieldpath"
	"github.com/loomxr/loom/pkg/fn"
	kitkube "github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/watchreq"
	"github.com/loomxr/loom/pkg/xcrd"
)

// EnvironmentConfigGVK is the kind Compositions select environments from, at
// the version the renderer reads.
var EnvironmentConfigGVK = schema.GroupVersionKind{Group: v1.Group, Version: "v1beta1", Kind: "EnvironmentConfig"}

// rendered is what a render produced, whatever the mode.
type rendered struct {
	// resources are the composed resources, in template order (Resources)
	// or by name (Pipeline).
	resources []composed
	// status holds the XR status fields the render writes, by top-level
	// field name.
	status map[string]any
	// environmentRefs, when not nil, are the EnvironmentConfig references
	// the XR must record in spec.environmentConfigRefs (mode Resources).
	environmentRefs []any
	// writeBack is the merge patch of the XR's spec and metadata that the
	// render's patches wrote (mode Resources; functions write only the
	// status, as in Crossplane).
	writeBack map[string]any
	// conditions are further XR conditions (set by functions).
	conditions []common.Condition
	// claimConditionTypes are the condition types to copy to the claim.
	claimConditionTypes []string
	// ready overrides the XR's readiness when not nil (a function's verdict).
	ready *bool
	// errs are failures of single resources that did not stop the render.
	errs []error
	// watches are what the watcher must watch for the XR, and watched the
	// resources that matched (for status.watchedResourceRefs).
	watches []watchreq.Request
	watched []loomv1alpha1.WatchedResourceRef
	// results of function steps, for Events.
	results []fn.Result
	// requeueAfter is when to render again (the pipeline's TTL).
	requeueAfter time.Duration
	// pipeline: the render ran a function pipeline; connectionDetails are
	// what it returned for the XR (secret values: they go to the secrets
	// service and nowhere else).
	pipeline          bool
	connectionDetails map[string][]byte
	// failed: the render as a whole failed, there is nothing to apply.
	failed bool
	// paused: the XR's reconciliation is paused.
	paused bool
}

// composed is one composed resource of a render.
type composed struct {
	// name is its composition resource name.
	name string
	// desired is what to apply; nil means leave the observed resource
	// (if any) as it is: its template failed or was skipped.
	desired *unstructured.Unstructured
	// observed is the resource as it exists, nil if it does not.
	observed *unstructured.Unstructured
	ready    bool
	// why it is not ready, or why its template failed or was skipped.
	message string
	// err is why its template failed, if it did.
	err error
	// applyErr is why applying it failed, if it did.
	applyErr error
	// namespace is the namespace the template or function asked for before
	// a namespaced XR's own was imposed ("" if it asked for none); a
	// different one is refused (see checkScope).
	namespace string
	// readiness tells whether an object of this resource is ready, and
	// why not; the renderer asks again after applying it, so that the
	// status it writes describes the object as the cluster holds it.
	readiness func(obj map[string]any) (bool, string)
}

// renderResources renders a Composition in mode Resources with patch and
// transform.
func (r *Reconciler) renderResources(ctx context.Context, st *state, spec *v1.CompositionSpec, observed map[string]*unstructured.Unstructured) (*rendered, error) {
	out := &rendered{}
	recorded := recordedEnvironmentRefs(st, spec.Environment)
	refs := recorded
	if spec.Environment.ResolveAlways() {
		refs = nil
	}
	envs, err := r.environment(ctx, st, spec.Environment, refs, out)
	if err != nil {
		return out, err
	}
	res, err := compose.Render(compose.Request{Composite: st.xr, Composition: spec, Observed: observed, EnvironmentConfigs: envs, EnvironmentConfigRefs: refs})
	if err != nil {
		return out, err
	}
	if st.xrd.GetScope().Legacy() && spec.Environment != nil && !slices.Equal(recorded, res.EnvironmentConfigRefs) {
		out.environmentRefs = make([]any, 0, len(res.EnvironmentConfigRefs))
		for _, n := range res.EnvironmentConfigRefs {
			out.environmentRefs = append(out.environmentRefs, map[string]any{
				"apiVersion": EnvironmentConfigGVK.GroupVersion().String(), "kind": EnvironmentConfigGVK.Kind, "name": n,
			})
		}
	}
	for i, rr := range res.Resources {
		c := composed{name: rr.Name, desired: rr.Desired, observed: observed[rr.Name], ready: rr.Ready, message: rr.Reason, err: rr.Err}
		if rr.Err != nil {
			c.message = rr.Err.Error()
		}
		c.namespace = compose.TemplateNamespace(spec, i)
		checks := spec.Resources[i].ReadinessChecks
		c.readiness = func(o map[string]any) (bool, string) {
			ok, why, err := compose.IsReady(o, checks)
			if err != nil {
				return false, err.Error()
			}
			return ok, why
		}
		out.resources = append(out.resources, c)
	}
	out.errs = append(out.errs, res.Errors...)
	out.status = r.compositeStatus(st, res.Composite)
	out.writeBack = writeBack(st.xr, res.Composite)
	return out, nil
}

// compositeStatus returns the XR status fields a patch-and-transform render
// writes: each top-level status field whose desired value (the observed XR
// with the patches that write to it applied) differs from the observed one,
// and each the renderer wrote before, so that what patches wrote stays
// owned and in place. Machinery fields are never among them.
func (r *Reconciler) compositeStatus(st *state, desired *unstructured.Unstructured) map[string]any {
	want, _, _ := unstructured.NestedMap(desired.Object, "status")
	have, _, _ := unstructured.NestedMap(st.xr.Object, "status")
	owned := ownedStatusFields(st.xr)
	out := map[string]any{}
	for k, v := range want {
		if machineryStatus[k] {
			continue
		}
		if owned[k] || !equalJSON(have[k], v) {
			out[k] = v
		}
	}
	return out
}

// machineryStatus are the status fields owned by the composition machinery
// (the renderer's conditions and summary, the secrets service's
// connectionDetails, the binder's copies), never by patches or functions.
var machineryStatus = map[string]bool{ //nolint:gochecknoglobals // Treated as a constant.
	"conditions": true, "connectionDetails": true, "claimConditionTypes": true,
	"loom": true, "watchedResourceRefs": true, "crossplane": true,
}

// recordedEnvironmentRefs returns the names of the EnvironmentConfigs the XR
// recorded in spec.environmentConfigRefs, which it keeps under the resolve
// policy IfNotPresent; nil when there are none, the Composition selects
// none, or the XR's kind lacks the field (only LegacyCluster XRs have it).
func recordedEnvironmentRefs(st *state, env *v1.EnvironmentConfiguration) []string {
	if env == nil || len(env.EnvironmentConfigs) == 0 || !st.xrd.GetScope().Legacy() {
		return nil
	}
	list, _, _ := unstructured.NestedSlice(st.xr.Object, st.path(xcrd.FieldEnvironmentConfigRefs)...)
	var names []string
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			if n, _ := m["name"].(string); n != "" {
				names = append(names, n)
			}
		}
	}
	return names
}

// environment reads the EnvironmentConfigs a Composition's spec.environment
// may select, and adds the watches that re-render the XR when they change:
// by name for references, by the resolved labels for selectors. When the XR
// keeps the EnvironmentConfigs it resolved before (refs), it reads and
// watches those by name.
func (r *Reconciler) environment(ctx context.Context, st *state, env *v1.EnvironmentConfiguration, refs []string, out *rendered) ([]*unstructured.Unstructured, error) {
	if env == nil || len(env.EnvironmentConfigs) == 0 {
		return nil, nil
	}
	if len(refs) > 0 {
		var configs []*unstructured.Unstructured
		for _, name := range refs {
			out.watches = append(out.watches, watchreq.Request{APIVersion: EnvironmentConfigGVK.GroupVersion().String(), Kind: EnvironmentConfigGVK.Kind, Name: name})
			u, err := r.client.Get(ctx, EnvironmentConfigGVK, "", name)
			if kerrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("cannot get EnvironmentConfig %q: %w", name, err)
			}
			configs = append(configs, u)
		}
		return configs, nil
	}
	var configs []*unstructured.Unstructured
	listed := false
	xr := fieldpath.Pave(st.xr.Object)
	for _, src := range env.EnvironmentConfigs {
		w := watchreq.Request{APIVersion: EnvironmentConfigGVK.GroupVersion().String(), Kind: EnvironmentConfigGVK.Kind}
		switch src.GetType() {
		case v1.EnvironmentSourceTypeReference:
			if src.Ref == nil || src.Ref.Name == "" {
				continue
			}
			w.Name = src.Ref.Name
			out.watches = append(out.watches, w)
			if listed {
				continue
			}
			u, err := r.client.Get(ctx, EnvironmentConfigGVK, "", src.Ref.Name)
			if kerrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("cannot get EnvironmentConfig %q: %w", src.Ref.Name, err)
			}
			configs = append(configs, u)
		case v1.EnvironmentSourceTypeSelector:
			if src.Selector == nil {
				continue
			}
			for _, m := range src.Selector.MatchLabels {
				var v string
				switch m.GetType() {
				case v1.EnvironmentSourceSelectorLabelMatcherTypeValue:
					if m.Value != nil {
						v = *m.Value
					}
				case v1.EnvironmentSourceSelectorLabelMatcherTypeFromCompositeFieldPath:
					if m.ValueFromFieldPath != nil {
						v, _ = xr.GetString(*m.ValueFromFieldPath)
					}
				}
				if v == "" {
					// Unresolved: watch wider rather than miss a change.
					continue
				}
				if w.MatchLabels == nil {
					w.MatchLabels = map[string]string{}
				}
				w.MatchLabels[m.Key] = v
			}
			if w.Validate() != nil {
				w.MatchLabels = nil
			}
			out.watches = append(out.watches, w)
			if listed {
				continue
			}
			// The watcher watches every EnvironmentConfig: with the
			// object mirror, the list is a scan of it, not a LIST.
			items, err := r.client.List(kitkube.WholeKind(ctx), EnvironmentConfigGVK, "", nil)
			if err != nil {
				return nil, fmt.Errorf("cannot list EnvironmentConfigs: %w", err)
			}
			listed = true
			configs = configs[:0]
			for i := range items {
				configs = append(configs, &items[i])
			}
		}
	}
	return configs, nil
}
