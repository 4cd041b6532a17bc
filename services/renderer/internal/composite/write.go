package composite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"

	"github.com/loomxr/loom/pkg/apply"
	"github.com/loomxr/loom/pkg/compose"
	"github.com/loomxr/loom/services/renderer/internal/event"
	"github.com/loomxr/loom/services/renderer/internal/kube"
)

// patchSpec writes the machinery fields the render decided (selection refs,
// resourceRefs, the default connection Secret reference) and what the
// render's patches wrote to the XR's spec and metadata (sel.writeBack) with
// one merge patch, if there are any, and continues with the patched XR. The
// machinery fields win over patches that write them. The patch carries the
// resourceVersion of the XR read, so that a render of an older version
// (the read path may answer with one) fails with a conflict instead of
// writing what the newer version no longer says.
func (r *Reconciler) patchSpec(ctx context.Context, st *state, sel *selection) error {
	if len(sel.patch) == 0 && len(sel.writeBack) == 0 {
		return nil
	}
	body := map[string]any{}
	if len(sel.writeBack) > 0 {
		mergeInto(body, sel.writeBack)
	}
	if len(sel.patch) > 0 {
		var machinery any = sel.patch
		for i := len(st.machinery) - 1; i >= 0; i-- {
			machinery = map[string]any{st.machinery[i]: machinery}
		}
		mergeInto(body, machinery.(map[string]any)) //nolint:forcetypeassert // Built above.
	}
	mergeInto(body, map[string]any{"metadata": map[string]any{"resourceVersion": st.xr.GetResourceVersion()}})
	u, err := r.client.MergePatch(ctx, st.xr.GroupVersionKind(), st.xr.GetNamespace(), st.xr.GetName(), body)
	if err != nil {
		return fmt.Errorf("cannot update spec of %s %q: %w", st.xr.GetKind(), st.xr.GetName(), err)
	}
	if sel.selectedBy != "" {
		r.rec.Event(u, event.TypeNormal, event.ReasonSelectComposition, "SelectComposition",
			fmt.Sprintf("Selected Composition %q by %s", sel.composition, sel.selectedBy))
	}
	st.xr = u
	sel.patch = map[string]any{}
	sel.writeBack = nil
	return nil
}

// checkScope refuses a render of a Namespaced XR that composes a
// cluster-scoped kind or writes to another namespace, before anything is
// written, the XR's resourceRefs included. A template or function that names
// another namespace is refused rather than silently moved into the XR's:
// the author meant something the XR may not do.
func (r *Reconciler) checkScope(st *state, out *rendered) error {
	if !st.namespaced() {
		return nil
	}
	var errs []error
	for _, c := range out.resources {
		if c.desired == nil {
			continue
		}
		gvk := c.desired.GroupVersionKind()
		ns, err := r.client.Namespaced(gvk)
		if err != nil {
			return fmt.Errorf("cannot look up kind %s of composed resource %q: %w", gvk, c.name, err)
		}
		if !ns {
			errs = append(errs, fmt.Errorf("composed resource %q: %s is cluster scoped, and a Namespaced composite resource may compose only namespaced resources", c.name, gvk.Kind))
			continue
		}
		if err := compose.CheckNamespace(st.xr, c.name, c.namespace); err != nil {
			errs = append(errs, err)
			continue
		}
		if c.desired.GetNamespace() != st.xr.GetNamespace() {
			errs = append(errs, fmt.Errorf("composed resource %q: namespace %q is not the composite resource's namespace %q", c.name, c.desired.GetNamespace(), st.xr.GetNamespace()))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: nothing was composed: %w", errInvalidSpec, errors.Join(errs...))
	}
	return nil
}

// applyResources server-side applies each desired composed resource whose
// applied fields differ from the cluster's, up to maxParallelApplies at
// once: the applies are independent, and one after the other they would
// put a round trip per resource on the way to the XR's readiness. A failure
// of one resource does not stop the others; each is recorded on its entry
// and returned joined, in the order of the resources.
func (r *Reconciler) applyResources(ctx context.Context, st *state, out *rendered) error {
	errs := make([]error, len(out.resources))
	sem := make(chan struct{}, maxParallelApplies)
	var wg sync.WaitGroup
	for i := range out.resources {
		c := &out.resources[i]
		if c.desired == nil {
			continue
		}
		intent := sanitize(c.desired)
		change, err := apply.Changes(c.observed, intent, kube.FieldManager, "")
		if err != nil {
			errs[i] = err
			break
		}
		if !change {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = r.applyResource(ctx, st, c, intent)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// maxParallelApplies bounds the applies of one render in flight at once.
const maxParallelApplies = 8

// applyResource takes ownership of c's fields from Crossplane if need be
// and applies intent, recording the outcome on c.
func (r *Reconciler) applyResource(ctx context.Context, st *state, c *composed, intent *unstructured.Unstructured) error {
	if err := r.takeOwnership(ctx, st, c); err != nil {
		c.applyErr = err
		return err
	}
	got, err := st.composer.Apply(ctx, intent)
	if err != nil {
		c.applyErr = err
		verb := "update"
		if c.observed == nil {
			verb = "create"
		}
		return writeError(st, verb, c.name, c.desired, err)
	}
	if c.observed == nil {
		r.log.Debug("Created composed resource", "xr", st.xr.GetName(), "resource", c.name, "kind", got.GetKind(), "name", got.GetName())
	}
	c.observed = got
	if c.readiness != nil && c.err == nil {
		c.ready, c.message = c.readiness(got.Object)
	}
	return nil
}

// crossplaneManagers reports whether manager is one of the field managers
// Crossplane v1 writes composed resources with: "crossplane" (the
// patch-and-transform composer updates them, as the crossplane binary) and
// apiextensions.crossplane.io/composed/<hash> (the function composer
// applies them).
func crossplaneManager(manager string) bool {
	return manager == "crossplane" || strings.HasPrefix(manager, "apiextensions.crossplane.io/composed")
}

// takeOwnership hands the fields Crossplane's field managers own on c's
// observed resource (one Crossplane composed before Loom took over) to the
// renderer's field manager, once, before the renderer's first write to it,
// and says so in an event on the XR. Without it, a field Crossplane set and
// the Composition no longer sets would stay forever, owned by a manager
// that is gone. An unchanged resource is never written, so never taken
// over. The patch carries the resourceVersion read.
func (r *Reconciler) takeOwnership(ctx context.Context, st *state, c *composed) error {
	o := c.observed
	if o == nil {
		return nil
	}
	managers := sets.New[string]()
	for _, e := range o.GetManagedFields() {
		if crossplaneManager(e.Manager) {
			managers.Insert(e.Manager)
		}
	}
	if managers.Len() == 0 {
		return nil
	}
	up := o.DeepCopy()
	// csaupgrade merges only Update entries into the renderer's Apply
	// entry; the function composer's entries are Apply entries of another
	// manager, which it treats the same way once marked as updates.
	mf := up.GetManagedFields()
	for i := range mf {
		if managers.Has(mf[i].Manager) && mf[i].Subresource == "" {
			mf[i].Operation = metav1.ManagedFieldsOperationUpdate
		}
	}
	up.SetManagedFields(mf)
	if err := csaupgrade.UpgradeManagedFields(up, managers, kube.FieldManager); err != nil {
		return fmt.Errorf("cannot compute the field ownership of composed resource %s %q: %w", o.GetKind(), o.GetName(), err)
	}
	upgraded, _, _ := unstructured.NestedFieldNoCopy(up.Object, "metadata", "managedFields")
	patch := map[string]any{"metadata": map[string]any{"resourceVersion": o.GetResourceVersion(), "managedFields": upgraded}}
	got, err := st.composer.MergePatch(ctx, o.GroupVersionKind(), o.GetNamespace(), o.GetName(), patch)
	if err != nil {
		return fmt.Errorf("cannot take ownership of the fields of composed resource %s %q from %s: %w", o.GetKind(), o.GetName(), strings.Join(sets.List(managers), ", "), err)
	}
	c.observed = got
	r.rec.Event(st.xr, event.TypeNormal, event.ReasonTakeOwnership, "TakeFieldOwnership",
		fmt.Sprintf("Took ownership of the fields of composed resource %s %q (template %q) from Crossplane's field managers %s", o.GetKind(), o.GetName(), c.name, strings.Join(sets.List(managers), ", ")))
	return nil
}

// sanitize returns the intent of applying desired: without status (the
// status subresource is not applied through the main resource) and without
// the metadata the API server sets.
func sanitize(desired *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: make(map[string]any, len(desired.Object))}
	for k, v := range desired.Object {
		if k != "status" {
			out.Object[k] = v
		}
	}
	if md, ok := desired.Object["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			switch k {
			case "resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds":
			default:
				m[k] = v
			}
		}
		out.Object["metadata"] = m
	}
	return out
}

// doomed returns the observed composed resources the render no longer
// wants and this XR controls: garbageCollect deletes them. They stay in the
// XR's resourceRefs until they are gone, so that a failed delete is retried.
// Nothing is doomed after a render that failed as a whole.
func doomed(st *state, out *rendered, observed map[string]*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	if out.failed {
		return nil
	}
	keep := make(map[string]bool, len(out.resources))
	for _, c := range out.resources {
		keep[c.name] = true
	}
	d := map[string]*unstructured.Unstructured{}
	for name, o := range observed {
		if keep[name] {
			continue
		}
		if c := metav1.GetControllerOf(o); c == nil || c.UID != st.xr.GetUID() {
			continue
		}
		d[name] = o
	}
	return d
}

// garbageCollect deletes the doomed composed resources that are not being
// deleted yet.
func (r *Reconciler) garbageCollect(ctx context.Context, st *state, doomed map[string]*unstructured.Unstructured) error {
	var errs []error
	for name, o := range doomed {
		if o.GetDeletionTimestamp() != nil {
			continue
		}
		if err := st.composer.Delete(ctx, o.GroupVersionKind(), o.GetNamespace(), o.GetName(), o.GetUID()); err != nil {
			errs = append(errs, writeError(st, "delete", name, o, err))
			continue
		}
		r.rec.Event(st.xr, event.TypeNormal, event.ReasonDeleteResources, "Delete",
			fmt.Sprintf("Deleted composed resource %q (%s %s): it left the Composition", name, o.GetKind(), o.GetName()))
	}
	return errors.Join(errs...)
}
