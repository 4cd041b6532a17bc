package reference

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
)

type ruleLister []v1alpha1.ReferenceRule

func (l ruleLister) List(context.Context, schema.GroupVersionKind, string, labels.Selector) ([]unstructured.Unstructured, error) {
	out := make([]unstructured.Unstructured, 0, len(l))
	for i := range l {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&l[i])
		if err != nil {
			return nil, err
		}
		out = append(out, unstructured.Unstructured{Object: m})
	}
	return out, nil
}

func rule(name string, refs ...v1alpha1.Reference) v1alpha1.ReferenceRule {
	r := v1alpha1.ReferenceRule{}
	r.SetName(name)
	r.Spec.For = v1alpha1.KindReference{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource"}
	r.Spec.References = refs
	return r
}

func TestRulesMerge(t *testing.T) {
	sa := networkRef
	sa.ValueField = "spec.forProvider.serviceAccount"
	bad := networkRef
	bad.ReferenceField = "spec..ref"

	rules := NewRules(ruleLister{
		rule("b-network", networkRef),
		rule("a-sa", sa),
		rule("c-duplicate", networkRef),
		rule("d-invalid", bad),
	}, time.Minute)
	gk := schema.GroupKind{Group: "nop.crossplane.io", Kind: "NopResource"}
	got, err := rules.For(t.Context(), gk)
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, r := range got.References {
		fields = append(fields, r.ValueField+" from "+r.Rule)
	}
	want := []string{"spec.forProvider.network from b-network", "spec.forProvider.serviceAccount from a-sa"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("Rules for the same kind merge, sorted by value field: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a-sa", "b-network"}, got.Sources); diff != "" {
		t.Errorf("Sources: -want, +got:\n%s", diff)
	}
	for _, name := range []string{"c-duplicate", "d-invalid"} {
		if rules.Invalid(name) == nil {
			t.Errorf("rule %s: want it refused", name)
		}
	}
	for _, name := range []string{"a-sa", "b-network"} {
		if err := rules.Invalid(name); err != nil {
			t.Errorf("rule %s: unexpectedly refused: %v", name, err)
		}
	}
	if kind, ok := rules.KindOf("d-invalid"); !ok || kind != gk {
		t.Errorf("KindOf(d-invalid) = %v, %t; want %v even for an invalid rule", kind, ok, gk)
	}
}
