package composite

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/services/renderer/internal/kube"
)

// patchRecorder is a Client that records merge patches and answers them
// with the object patched; nothing else is called by what it tests.
type patchRecorder struct {
	Client
	patches []map[string]any
}

func (p *patchRecorder) MergePatch(_ context.Context, gvk schema.GroupVersionKind, namespace, name string, patch map[string]any) (*unstructured.Unstructured, error) {
	p.patches = append(p.patches, patch)
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u, nil
}

func (p *patchRecorder) List(context.Context, schema.GroupVersionKind, string, labels.Selector) ([]unstructured.Unstructured, error) {
	return nil, nil
}

// eventRecorder records the reasons of events.
type eventRecorder struct{ reasons []string }

func (e *eventRecorder) Event(_ runtime.Object, _, reason, _, _ string) {
	e.reasons = append(e.reasons, reason)
}

func TestDropCrossplaneFinalizer(t *testing.T) {
	cases := map[string]struct {
		reason     string
		finalizers []string
		want       []map[string]any
	}{
		"Crossplane": {
			reason:     "Crossplane's finalizer is removed, others kept, with the resourceVersion read as a precondition.",
			finalizers: []string{"foregroundDeletion", CrossplaneFinalizer},
			want:       []map[string]any{{"metadata": map[string]any{"resourceVersion": "7", "finalizers": []any{"foregroundDeletion"}}}},
		},
		"None": {
			reason:     "An XR without Crossplane's finalizer is not written.",
			finalizers: []string{"foregroundDeletion"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &patchRecorder{}
			r := NewReconciler(c, nil, nil)
			xr := &unstructured.Unstructured{Object: map[string]any{}}
			xr.SetAPIVersion("example.org/v1")
			xr.SetKind("XNop")
			xr.SetName("one-abcde")
			xr.SetResourceVersion("7")
			xr.SetFinalizers(tc.finalizers)
			if err := r.dropCrossplaneFinalizer(t.Context(), xr); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.patches, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\ndropCrossplaneFinalizer(...): patches -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTakeOwnership(t *testing.T) {
	fields := func(s string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(s)} }
	spec := `{"f:spec":{"f:forProvider":{"f:fields":{"f:size":{}}}}}`
	type want struct {
		managers []string
		events   []string
	}
	cases := map[string]struct {
		reason  string
		managed []metav1.ManagedFieldsEntry
		want    want
	}{
		"Crossplane": {
			reason: "Fields Crossplane's patch-and-transform composer updated become the renderer's, once, with an event.",
			managed: []metav1.ManagedFieldsEntry{
				{Manager: "crossplane", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "nop.crossplane.io/v1alpha1", FieldsType: "FieldsV1", FieldsV1: fields(spec)},
				{Manager: "provider-nop", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "nop.crossplane.io/v1alpha1", FieldsType: "FieldsV1", FieldsV1: fields(`{"f:status":{}}`), Subresource: "status"},
			},
			want: want{managers: []string{kube.FieldManager, "provider-nop"}, events: []string{"TakeFieldOwnership"}},
		},
		"FunctionComposer": {
			reason: "Fields Crossplane's function composer applied become the renderer's too.",
			managed: []metav1.ManagedFieldsEntry{
				{Manager: "apiextensions.crossplane.io/composed/0a1b", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "nop.crossplane.io/v1alpha1", FieldsType: "FieldsV1", FieldsV1: fields(spec)},
			},
			want: want{managers: []string{kube.FieldManager}, events: []string{"TakeFieldOwnership"}},
		},
		"Loom": {
			reason: "A resource no Crossplane manager owns fields of is not written.",
			managed: []metav1.ManagedFieldsEntry{
				{Manager: kube.FieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "nop.crossplane.io/v1alpha1", FieldsType: "FieldsV1", FieldsV1: fields(spec)},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &patchRecorder{}
			rec := &eventRecorder{}
			r := NewReconciler(c, nil, nil, WithRecorder(rec))
			o := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"forProvider": map[string]any{"fields": map[string]any{"size": "small"}}}}}
			o.SetAPIVersion("nop.crossplane.io/v1alpha1")
			o.SetKind("NopResource")
			o.SetName("one-abcde-fghij")
			o.SetResourceVersion("7")
			o.SetManagedFields(tc.managed)
			st := &state{xr: &unstructured.Unstructured{Object: map[string]any{}}, xrd: &v1.CompositeResourceDefinition{}, composer: c}
			if err := r.takeOwnership(t.Context(), st, &composed{name: "nop-a", observed: o}); err != nil {
				t.Fatal(err)
			}
			var managers []string
			for _, p := range c.patches {
				md := p["metadata"].(map[string]any)
				if md["resourceVersion"] != "7" {
					t.Errorf("%s\ntakeOwnership(...): patch without the resourceVersion read: %v", tc.reason, md)
				}
				b, err := json.Marshal(md["managedFields"])
				if err != nil {
					t.Fatal(err)
				}
				var mf []metav1.ManagedFieldsEntry
				if err := json.Unmarshal(b, &mf); err != nil {
					t.Fatal(err)
				}
				for _, e := range mf {
					managers = append(managers, e.Manager)
				}
			}
			got := want{managers: managers, events: rec.reasons}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("%s\ntakeOwnership(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPatchSpec(t *testing.T) {
	cases := map[string]struct {
		reason    string
		patch     map[string]any
		writeBack map[string]any
		want      []map[string]any
	}{
		"MachineryAndWriteBack": {
			reason:    "One merge patch carries the machinery fields, what the render's patches wrote, and the resourceVersion read as a precondition: a render of an older XR than the API server's fails with a conflict.",
			patch:     map[string]any{"resourceRefs": []any{}},
			writeBack: map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "b"}}},
			want: []map[string]any{{
				"metadata": map[string]any{"resourceVersion": "7", "labels": map[string]any{"a": "b"}},
				"spec":     map[string]any{"resourceRefs": []any{}},
			}},
		},
		"Nothing": {
			reason: "A render that changes nothing of the spec writes nothing.",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &patchRecorder{}
			r := NewReconciler(c, nil, nil)
			xr := &unstructured.Unstructured{Object: map[string]any{}}
			xr.SetAPIVersion("example.org/v1")
			xr.SetKind("XNop")
			xr.SetName("one-abcde")
			xr.SetResourceVersion("7")
			st := &state{xr: xr, machinery: []string{"spec"}}
			sel := &selection{patch: tc.patch, writeBack: tc.writeBack}
			if err := r.patchSpec(t.Context(), st, sel); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.patches, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\npatchSpec(...): patches -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
