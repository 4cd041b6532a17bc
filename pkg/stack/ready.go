package stack

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/condition"
)

// Claims returns the objects among objs that are claims: namespaced
// objects whose CRD is in the "claim" category or whose schema has
// spec.resourceRef (as every Crossplane claim CRD does).
func (s *Stack) Claims(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	a, err := newApplier(s.RESTConfig(), s.logf)
	if err != nil {
		return nil, err
	}
	crds := a.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	isClaim := map[schema.GroupKind]bool{}
	var claims []*unstructured.Unstructured
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		gk := gvk.GroupKind()
		known, seen := isClaim[gk]
		if !seen {
			m, err := a.mapper.RESTMapping(gk, gvk.Version)
			if err != nil {
				return nil, fmt.Errorf("cannot map %s: %w", gvk, err)
			}
			if gk.Group != "" {
				crd, err := crds.Get(ctx, m.Resource.GroupResource().String(), metav1.GetOptions{})
				if err == nil {
					known = crdIsClaim(crd)
				}
			}
			isClaim[gk] = known
		}
		if known {
			claims = append(claims, o)
		}
	}
	return claims, nil
}

// crdIsClaim reports whether crd defines a namespaced claim kind.
func crdIsClaim(crd *unstructured.Unstructured) bool {
	scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
	if scope != "Namespaced" {
		return false
	}
	cats, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "categories")
	if slices.Contains(cats, "claim") {
		return true
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if _, ok, _ := unstructured.NestedMap(vm, "schema", "openAPIV3Schema", "properties", "spec", "properties", "resourceRef"); ok {
			return true
		}
	}
	return false
}

// WaitReady waits until every object in objs has condition Ready=True, or
// ctx ends; the error then lists the objects that are not Ready yet. Each
// time an object turns Ready, progress names it.
func (s *Stack) WaitReady(ctx context.Context, objs []*unstructured.Unstructured) error {
	a, err := newApplier(s.RESTConfig(), s.logf)
	if err != nil {
		return err
	}
	pending := slices.Clone(objs)
	err = waitUntil(ctx, 500*time.Millisecond, func(ctx context.Context) error {
		var still []*unstructured.Unstructured
		for _, o := range pending {
			ri, err := a.resource(ctx, o)
			if err != nil {
				return err
			}
			got, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
			if err != nil || !condition.IsTrue(got, common.TypeReady) {
				still = append(still, o)
				continue
			}
			s.logf("%s %s is Ready", o.GetKind(), objectName(o))
		}
		pending = still
		if len(pending) == 0 {
			return nil
		}
		names := make([]string, 0, len(pending))
		for _, o := range pending {
			names = append(names, o.GetKind()+" "+objectName(o))
		}
		return fmt.Errorf("not Ready: %v", names)
	})
	if err != nil {
		return fmt.Errorf("cannot wait for Ready: %w", err)
	}
	return nil
}
