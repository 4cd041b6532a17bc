package composite

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/compose"
	"github.com/loomxr/loom/pkg/fn"
	"github.com/loomxr/loom/pkg/xcrd"
)

// renderPipeline renders a Composition in mode Pipeline by running its
// function pipeline. The watches, results and conditions of the steps that
// ran are returned even when a step fails.
func (r *Reconciler) renderPipeline(ctx context.Context, st *state, spec *v1.CompositionSpec, observed map[string]*unstructured.Unstructured) (*rendered, error) {
	out := &rendered{}
	if r.pipeline == nil {
		return out, fmt.Errorf("%w: this renderer runs no composition functions", errInvalidSpec)
	}
	steps, err := fn.StepsFromPipeline(spec.Pipeline)
	if err != nil {
		return out, fmt.Errorf("%w: %w", errInvalidSpec, err)
	}
	if len(steps) == 0 {
		return out, fmt.Errorf("%w: spec.pipeline: mode Pipeline needs at least one step", errInvalidSpec)
	}
	state, err := r.observedState(ctx, st, observed)
	if err != nil {
		return out, err
	}
	res, runErr := r.pipeline.Run(ctx, steps, state)

	out.results = res.Results
	for _, w := range res.Watches {
		out.watches = append(out.watches, w.Request())
		out.watched = append(out.watched, w.Refs()...)
	}
	conds := map[string]common.Condition{}
	var order []string
	claimTypes := map[string]bool{}
	for _, c := range res.Conditions {
		if _, seen := conds[c.Type]; !seen {
			order = append(order, c.Type)
		}
		status := c.Status
		if status == "" {
			status = corev1.ConditionUnknown
		}
		conds[c.Type] = common.Condition{Type: common.ConditionType(c.Type), Status: status, Reason: common.ConditionReason(c.Reason), Message: c.Message, LastTransitionTime: metav1.Now()}
		if c.Target == fn.TargetCompositeAndClaim {
			claimTypes[c.Type] = true
		}
	}
	for _, t := range order {
		out.conditions = append(out.conditions, conds[t])
	}
	out.claimConditionTypes = slices.Sorted(maps.Keys(claimTypes))
	if runErr != nil {
		return out, runErr
	}
	out.requeueAfter = res.TTL
	out.pipeline = true
	out.connectionDetails = res.Desired.Composite.ConnectionDetails

	for _, name := range slices.Sorted(maps.Keys(res.Desired.Resources)) {
		d := res.Desired.Resources[name]
		obs := observed[name]
		c := composed{name: name, observed: obs}
		u := &unstructured.Unstructured{Object: d.Object}
		c.namespace = u.GetNamespace()
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			c.err = fmt.Errorf("%w: desired composed resource %q has no apiVersion or kind", errInvalidSpec, name)
		} else if err := compose.SetComposedMetadata(st.xr, u, name, obs); err != nil {
			c.err = fmt.Errorf("%w: desired composed resource %q: metadata: %w", errInvalidSpec, name, err)
		}
		if c.err != nil {
			c.message = c.err.Error()
			out.errs = append(out.errs, c.err)
		} else {
			c.desired = u
		}
		verdict := d.Ready
		c.readiness = func(o map[string]any) (bool, string) { return pipelineReady(verdict, o) }
		var o map[string]any
		if obs != nil {
			o = obs.Object
		}
		c.ready, c.message = c.readiness(o)
		if c.err != nil {
			c.message = c.err.Error()
		}
		out.resources = append(out.resources, c)
	}
	switch res.Desired.Composite.Ready {
	case fn.ReadyTrue:
		out.ready = ptrTo(true)
	case fn.ReadyFalse:
		out.ready = ptrTo(false)
	case fn.ReadyUnspecified:
		// Readiness follows the composed resources.
	}
	out.status = map[string]any{}
	if d := res.Desired.Composite.Object; d != nil {
		if s, ok := d["status"].(map[string]any); ok {
			for k, v := range s {
				if !machineryStatus[k] {
					out.status[k] = v
				}
			}
		}
	}
	return out, nil
}

func ptrTo[T any](v T) *T { return &v }

// pipelineReady is whether a composed resource counts as ready: the
// function's verdict when it gave one, otherwise the observed resource's
// Ready condition (a resource that does not exist is not ready).
func pipelineReady(verdict fn.Ready, observed map[string]any) (bool, string) {
	switch verdict {
	case fn.ReadyTrue:
		return true, ""
	case fn.ReadyFalse:
		return false, "the composition function pipeline marked it not ready"
	case fn.ReadyUnspecified:
		// The observed resource decides, below.
	}
	ready, why, err := compose.IsReady(observed, nil)
	if err != nil {
		return false, err.Error()
	}
	return ready, why
}

// observedState is the pipeline's observed state: the XR and the composed
// resources, with their connection details when a SecretReader is set.
func (r *Reconciler) observedState(ctx context.Context, st *state, observed map[string]*unstructured.Unstructured) (fn.State, error) {
	s := fn.State{Composite: fn.Resource{Object: st.xr.Object}, Resources: make(map[string]fn.Resource, len(observed))}
	var err error
	if s.Composite.ConnectionDetails, err = r.connectionDetails(ctx, st.xr, st.path(xcrd.FieldWriteConnectionSecretToRef)...); err != nil {
		return s, err
	}
	for name, o := range observed {
		cd, err := r.connectionDetails(ctx, o, "spec", "writeConnectionSecretToRef")
		if err != nil {
			return s, err
		}
		s.Resources[name] = fn.Resource{Object: o.Object, ConnectionDetails: cd}
	}
	return s, nil
}

// connectionDetails reads the data of the connection Secret that the field
// at path of o names ({name, namespace}), if any.
func (r *Reconciler) connectionDetails(ctx context.Context, o *unstructured.Unstructured, path ...string) (map[string][]byte, error) {
	if r.secrets == nil {
		return nil, nil
	}
	name, _, _ := unstructured.NestedString(o.Object, append(slices.Clone(path), "name")...)
	ns, _, _ := unstructured.NestedString(o.Object, append(slices.Clone(path), "namespace")...)
	if ns == "" {
		ns = o.GetNamespace()
	}
	if name == "" || ns == "" {
		return nil, nil
	}
	data, err := r.secrets.ReadSecret(ctx, ns, name)
	if err != nil {
		return nil, fmt.Errorf("cannot read connection Secret %s/%s of %s %q: %w", ns, name, o.GetKind(), o.GetName(), err)
	}
	return data, nil
}
