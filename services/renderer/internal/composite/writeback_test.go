package composite

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestWriteBack(t *testing.T) {
	xr := func(spec map[string]any, labels, annotations map[string]any) *unstructured.Unstructured {
		md := map[string]any{"name": "xr"}
		if labels != nil {
			md["labels"] = labels
		}
		if annotations != nil {
			md["annotations"] = annotations
		}
		return &unstructured.Unstructured{Object: map[string]any{"metadata": md, "spec": spec, "status": map[string]any{"tier": "s"}}}
	}
	cases := map[string]struct {
		reason            string
		observed, desired *unstructured.Unstructured
		want              map[string]any
	}{
		"Unchanged": {
			reason:   "Patches that wrote nothing outside the status (the benchmark's Composition) cost no write.",
			observed: xr(map[string]any{"size": "small", "replicas": int64(3)}, map[string]any{"a": "b"}, nil),
			desired:  xr(map[string]any{"size": "small", "replicas": float64(3)}, map[string]any{"a": "b"}, nil),
		},
		"Annotation": {
			reason:   "An annotation a patch wrote is written back, alone.",
			observed: xr(map[string]any{"size": "small"}, nil, map[string]any{"keep": "me"}),
			desired:  xr(map[string]any{"size": "small"}, nil, map[string]any{"keep": "me", "exampleVal": "foo"}),
			want:     map[string]any{"metadata": map[string]any{"annotations": map[string]any{"exampleVal": "foo"}}},
		},
		"LabelAndSpec": {
			reason:   "A label and nested spec fields are written back as a merge patch of what differs.",
			observed: xr(map[string]any{"size": "small", "net": map[string]any{"cidr": "10.0.0.0/8", "zone": "a"}}, nil, nil),
			desired:  xr(map[string]any{"size": "small", "net": map[string]any{"cidr": "10.0.0.0/16", "zone": "a"}, "ids": []any{"x"}}, map[string]any{"tier": "gold"}, nil),
			want: map[string]any{
				"spec":     map[string]any{"net": map[string]any{"cidr": "10.0.0.0/16"}, "ids": []any{"x"}},
				"metadata": map[string]any{"labels": map[string]any{"tier": "gold"}},
			},
		},
		"ReplacedObject": {
			reason:   "An object a patch replaced with a smaller one loses the keys it no longer has.",
			observed: xr(map[string]any{"net": map[string]any{"cidr": "10.0.0.0/8", "zone": "a"}}, nil, nil),
			desired:  xr(map[string]any{"net": map[string]any{"cidr": "10.0.0.0/8"}}, nil, nil),
			want:     map[string]any{"spec": map[string]any{"net": map[string]any{"zone": nil}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := writeBack(tc.observed, tc.desired)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nwriteBack(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMergeInto(t *testing.T) {
	dst := map[string]any{"spec": map[string]any{"size": "large", "resourceRefs": []any{"patched"}}, "metadata": map[string]any{"labels": map[string]any{"a": "b"}}}
	mergeInto(dst, map[string]any{"spec": map[string]any{"resourceRefs": []any{"decided"}, "compositionRef": map[string]any{"name": "c"}}})
	want := map[string]any{
		"spec":     map[string]any{"size": "large", "resourceRefs": []any{"decided"}, "compositionRef": map[string]any{"name": "c"}},
		"metadata": map[string]any{"labels": map[string]any{"a": "b"}},
	}
	if diff := cmp.Diff(want, dst); diff != "" {
		t.Errorf("mergeInto(): the machinery must win over patches: -want, +got:\n%s", diff)
	}
}
