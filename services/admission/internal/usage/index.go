// Package usage is Crossplane's Usage (apiextensions.crossplane.io) served
// by Loom: the webhook that refuses to delete an object a Usage names in
// spec.of, and the controller that resolves a Usage's selectors, labels the
// used object crossplane.io/in-use so that the webhook sees its deletions,
// ties the Usage to its user and, once the Usage goes, unlabels the used
// object and replays the deletion the webhook refused.
package usage

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/loomxr/loom/pkg/apis/apiextensions/v1beta1"
)

// Resource is the resource the component reads and writes Usages as. The
// CRD stores v1alpha1 and serves v1beta1 with the same schema (no
// conversion), so either version sees every Usage; v1beta1 is the one
// Crossplane's controller uses.
var Resource = v1beta1.SchemeGroupVersion.WithResource("usages") //nolint:gochecknoglobals // Treated as a constant.

// byOf indexes Usages by the object they name in spec.of.
const byOf = "of"

// ofKey is the index key of an object: group, kind and name. The version
// is left out: a Usage and the object's deletion may name different
// versions of the same kind.
func ofKey(apiVersion, kind, name string) string {
	gv, _ := schema.ParseGroupVersion(apiVersion) // An invalid one matches no object.
	return gv.Group + "/" + kind + "/" + name
}

// An Index answers which Usages name an object, from an informer: the
// webhook must answer within the API server's timeout, on every deletion
// of an object in use, without an API request each time.
type Index struct {
	informer cache.SharedIndexInformer
}

// NewIndex returns an Index over the Usages dyn can list and watch. Run
// starts it.
func NewIndex(dyn dynamic.Interface) (*Index, error) {
	inf := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0).ForResource(Resource).Informer()
	if err := inf.AddIndexers(cache.Indexers{byOf: func(obj any) ([]string, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, nil
		}
		av, _, _ := unstructured.NestedString(u.Object, "spec", "of", "apiVersion")
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "of", "kind")
		name, _, _ := unstructured.NestedString(u.Object, "spec", "of", "resourceRef", "name")
		if name == "" {
			// Not resolved yet: it protects nothing until it is.
			return nil, nil
		}
		return []string{ofKey(av, kind, name)}, nil
	}}); err != nil {
		return nil, fmt.Errorf("cannot index Usages: %w", err)
	}
	return &Index{informer: inf}, nil
}

// Run lists and watches Usages until ctx ends. It blocks.
func (x *Index) Run(ctx context.Context) { x.informer.RunWithContext(ctx) }

// Synced reports whether every Usage has been listed.
func (x *Index) Synced() bool { return x.informer.HasSynced() }

// Informer is the informer the Index reads, for event handlers.
func (x *Index) Informer() cache.SharedIndexInformer { return x.informer }

// Of returns the Usages whose spec.of names the object of apiVersion, kind
// and name, in order of name (messages built from them are deterministic).
func (x *Index) Of(apiVersion, kind, name string) ([]*v1beta1.Usage, error) {
	objs, err := x.informer.GetIndexer().ByIndex(byOf, ofKey(apiVersion, kind, name))
	if err != nil {
		return nil, fmt.Errorf("cannot look up the Usages of %s %q: %w", kind, name, err)
	}
	out := make([]*v1beta1.Usage, 0, len(objs))
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		typed, err := FromUnstructured(u)
		if err != nil {
			return nil, err
		}
		out = append(out, typed)
	}
	slices.SortFunc(out, func(a, b *v1beta1.Usage) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}

// FromUnstructured converts u to a Usage.
func FromUnstructured(u *unstructured.Unstructured) (*v1beta1.Usage, error) {
	out := &v1beta1.Usage{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("cannot decode Usage %q: %w", u.GetName(), err)
	}
	return out, nil
}
