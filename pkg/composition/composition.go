// Package composition decides which Composition and which CompositionRevision
// a composite resource (XR) uses, the way the renderer decides it. The
// binder asks the same questions when it binds a claim, so that the claim's
// binding already names them and nothing has to flow back from the XR
// afterwards; both answer from one implementation.
package composition

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/rendezvous"
)

// The kinds selection reads.
var (
	CompositionGVK = v1.SchemeGroupVersion.WithKind("Composition")         //nolint:gochecknoglobals // Treated as a constant.
	RevisionGVK    = v1.SchemeGroupVersion.WithKind("CompositionRevision") //nolint:gochecknoglobals // Treated as a constant.
)

// Compatible returns the names of the Compositions among items that are
// for composite resources of apiVersion and kind (spec.compositeTypeRef)
// and not being deleted.
func Compatible(items []unstructured.Unstructured, apiVersion, kind string) []string {
	var names []string
	for i := range items {
		av, _, _ := unstructured.NestedString(items[i].Object, "spec", "compositeTypeRef", "apiVersion")
		k, _, _ := unstructured.NestedString(items[i].Object, "spec", "compositeTypeRef", "kind")
		if av == apiVersion && k == kind && items[i].GetDeletionTimestamp() == nil {
			names = append(names, items[i].GetName())
		}
	}
	return names
}

// Choose returns the name among names whose rendezvous score with uid is
// highest, ties broken by the smaller name. names must not be empty.
//
// Crossplane picks one of several matching Compositions at random; Loom
// picks by rendezvous hashing: the same uid always gets the same
// Composition, a decision repeated after a crash writes the same ref, uids
// still spread evenly over equivalent Compositions, and adding or removing
// a Composition moves only the uids it wins or won.
func Choose(uid types.UID, names []string) string {
	names = slices.Clone(names)
	slices.Sort(names)
	best, bestHash := "", uint64(0)
	for _, n := range names {
		if s := rendezvous.Score(string(uid), n); best == "" || s > bestHash {
			best, bestHash = n, s
		}
	}
	return best
}

// Revisions decodes the revisions among items that belong to the named
// Composition (a Composition of that name is their controller), sorted by
// name.
func Revisions(items []unstructured.Unstructured, composition string) ([]*v1.CompositionRevision, error) {
	revs := make([]*v1.CompositionRevision, 0, len(items))
	for i := range items {
		rev := &v1.CompositionRevision{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(items[i].Object, rev); err != nil {
			return nil, fmt.Errorf("cannot decode CompositionRevision %q: %w", items[i].GetName(), err)
		}
		if c := metav1.GetControllerOf(rev); c == nil || c.Kind != CompositionGVK.Kind || c.Name != composition {
			continue
		}
		revs = append(revs, rev)
	}
	slices.SortFunc(revs, func(a, b *v1.CompositionRevision) int { return strings.Compare(a.GetName(), b.GetName()) })
	return revs, nil
}

// RevisionsOf is the label selector of the revisions of the named
// Composition.
func RevisionsOf(composition string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{v1.LabelCompositionName: composition})
}

// Latest returns the revision with the highest number among revs whose
// labels match sel (nil matches all), or nil if none does. Equal numbers
// (which Loom never creates) are broken by name, so the choice is stable.
func Latest(revs []*v1.CompositionRevision, sel labels.Selector) *v1.CompositionRevision {
	var best *v1.CompositionRevision
	for _, r := range revs {
		if sel != nil && !sel.Matches(labels.Set(r.GetLabels())) {
			continue
		}
		if best == nil || r.Spec.Revision > best.Spec.Revision ||
			(r.Spec.Revision == best.Spec.Revision && r.GetName() > best.GetName()) {
			best = r
		}
	}
	return best
}
