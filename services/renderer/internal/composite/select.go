package composite

import (
	"context"
	"errors"
	"fmt"
	"slices"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/composition"
	kitkube "github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/xcrd"
	"github.com/loomxr/loom/services/renderer/internal/revision"
)

// selection is what the renderer decided about an XR's Composition and
// revision, and the machinery fields that decision changes.
type selection struct {
	composition string
	revision    *v1.CompositionRevision
	// patch holds the machinery fields to write, keyed by field name
	// (relative to the XR's machinery path).
	patch map[string]any
	// writeBack is the merge patch of what the render's patches wrote to
	// the XR's spec and metadata (see writeBack); nil when nothing.
	writeBack map[string]any
	// selectedBy says how the renderer chose the Composition just now,
	// when it chose among several (for an Event).
	selectedBy string
}

// Selection errors. They are unavailable input: a new Composition or
// revision requeues the XRs that wait for one.
var (
	errNoCompatible = errors.New("no compatible Compositions found")
	errNoRevision   = errors.New("no CompositionRevision found")
)

// selectComposition decides the XR's Composition in the upstream order:
// the XRD's enforcedCompositionRef always wins; an XR that names a
// Composition keeps it; one without a ref or a selector gets the XRD's
// defaultCompositionRef; otherwise a Composition is chosen among those whose
// compositeTypeRef is the XR's kind and whose labels match the XR's
// compositionSelector (all, without one).
//
// Crossplane picks one of several matching Compositions at random. Loom picks
// deterministically by the XR's UID (composition.Choose). A claim's XR
// usually arrives with its compositionRef already set: the binder chose it
// when it bound the claim, with the claim's UID.
func (r *Reconciler) selectComposition(ctx context.Context, st *state, sel *selection) error {
	cur := st.getString(xcrd.FieldCompositionRef, "name")
	if ref := st.xrd.Spec.EnforcedCompositionRef; ref != nil {
		sel.composition = ref.Name
		if cur != ref.Name {
			sel.patch[xcrd.FieldCompositionRef] = map[string]any{"name": ref.Name}
		}
		return nil
	}
	if cur != "" {
		sel.composition = cur
		return nil
	}
	matchLabels, hasSelector, _ := unstructured.NestedStringMap(st.xr.Object, st.path(xcrd.FieldCompositionSelector, "matchLabels")...)
	if ref := st.xrd.Spec.DefaultCompositionRef; ref != nil && !hasSelector {
		sel.composition = ref.Name
		sel.patch[xcrd.FieldCompositionRef] = map[string]any{"name": ref.Name}
		return nil
	}
	// The watcher watches every Composition: with the object mirror, the
	// list is a scan of it, not a LIST.
	items, err := r.client.List(kitkube.WholeKind(ctx), revision.CompositionGVK, "", labels.SelectorFromSet(matchLabels))
	if err != nil {
		return fmt.Errorf("cannot list Compositions: %w", err)
	}
	names := composition.Compatible(items, st.xr.GetAPIVersion(), st.xr.GetKind())
	if len(names) == 0 {
		if hasSelector {
			return fmt.Errorf("%w for compositionSelector %s", errNoCompatible, labels.SelectorFromSet(matchLabels))
		}
		return errNoCompatible
	}
	sel.composition = composition.Choose(st.xr.GetUID(), names)
	sel.patch[xcrd.FieldCompositionRef] = map[string]any{"name": sel.composition}
	if len(names) > 1 {
		// A real choice: say which. With one candidate, or a ref from the
		// definition, compositionRef says all there is to say, and an Event
		// would be one more API write per XR.
		sel.selectedBy = fmt.Sprintf("label selection among %d compatible Compositions", len(names))
	}
	return nil
}

// selectRevision decides the XR's CompositionRevision. Under the Manual
// update policy an XR keeps the revision it references once it has one.
// Otherwise (Automatic, the default) it moves to the revision with the
// highest number among the Composition's revisions that match its
// compositionRevisionSelector (or the XRD's defaultCompositionRevisionSelector,
// which is then written to the XR). The revisions come from the cache
// unless it lacks the revision the render was asked for (want), or the
// revision the XR references, or any revision at all.
func (r *Reconciler) selectRevision(ctx context.Context, st *state, sel *selection, want string) error {
	policy := st.getString(xcrd.FieldCompositionUpdatePolicy)
	if policy == "" && st.xrd.Spec.DefaultCompositionUpdatePolicy != nil {
		policy = string(*st.xrd.Spec.DefaultCompositionUpdatePolicy)
	}
	cur := st.getString(xcrd.FieldCompositionRevisionRef, "name")

	if policy == string(v1.UpdateManual) && cur != "" {
		rev, err := r.revisions.Get(ctx, cur, false)
		if kerrors.IsNotFound(err) {
			return fmt.Errorf("%w: compositionRevisionRef names CompositionRevision %q, which does not exist", errNoRevision, cur)
		}
		if err != nil {
			return err
		}
		if rev.GetLabels()[v1.LabelCompositionName] == sel.composition {
			sel.revision = rev
			return nil
		}
		// The XR moved to another Composition: take its latest revision.
	}

	var rs labels.Selector
	if ml, ok, _ := unstructured.NestedStringMap(st.xr.Object, st.path(xcrd.FieldCompositionRevisionSelector, "matchLabels")...); ok {
		rs = labels.SelectorFromSet(ml)
	} else if d := st.xrd.Spec.DefaultCompositionRevisionSelector; d != nil {
		s, err := metav1.LabelSelectorAsSelector(d)
		if err != nil {
			return fmt.Errorf("%w: the definition's defaultCompositionRevisionSelector: %w", errInvalidSpec, err)
		}
		rs = s
		ml := map[string]any{}
		for k, v := range d.MatchLabels {
			ml[k] = v
		}
		sel.patch[xcrd.FieldCompositionRevisionSelector] = map[string]any{"matchLabels": ml}
	}

	revs, err := r.revisions.List(ctx, sel.composition, false)
	if err != nil {
		return err
	}
	has := func(name string) bool {
		return name == "" || slices.ContainsFunc(revs, func(r *v1.CompositionRevision) bool { return r.GetName() == name })
	}
	latest := composition.Latest(revs, rs)
	if latest == nil || !has(cur) || !has(want) {
		// The cache may predate the revision: read afresh once.
		if revs, err = r.revisions.List(ctx, sel.composition, true); err != nil {
			return err
		}
		latest = composition.Latest(revs, rs)
	}
	if latest == nil {
		if rs != nil {
			return fmt.Errorf("%w for Composition %q matching compositionRevisionSelector %s", errNoRevision, sel.composition, rs)
		}
		return fmt.Errorf("%w for Composition %q (does it exist?)", errNoRevision, sel.composition)
	}
	sel.revision = latest
	if cur != latest.GetName() {
		sel.patch[xcrd.FieldCompositionRevisionRef] = map[string]any{"name": latest.GetName()}
	}
	return nil
}

// checkCompatible returns an error if the revision is for another kind of XR.
func checkCompatible(xr *unstructured.Unstructured, rev *v1.CompositionRevision) error {
	ref := rev.Spec.CompositeTypeRef
	if ref.APIVersion == xr.GetAPIVersion() && ref.Kind == xr.GetKind() {
		return nil
	}
	return fmt.Errorf("%w: referenced composition is not compatible with this composite resource: Composition %q (CompositionRevision %q) is for %s, %s, not %s, %s",
		errInvalidSpec, rev.GetLabels()[v1.LabelCompositionName], rev.GetName(), ref.Kind, ref.APIVersion, xr.GetKind(), xr.GetAPIVersion())
}
