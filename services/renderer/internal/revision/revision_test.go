package revision

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/composition"
)

func comp(labels map[string]string, mode v1.CompositionMode) *v1.Composition {
	return &v1.Composition{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: labels},
		Spec: v1.CompositionSpec{
			CompositeTypeRef: v1.TypeReference{APIVersion: "example.org/v1", Kind: "XThing"},
			Mode:             mode,
		},
	}
}

func TestHash(t *testing.T) {
	a, err := Hash(comp(map[string]string{"a": "b"}, v1.CompositionModeResources))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		c      *v1.Composition
		same   bool
	}{
		"Same":       {reason: "The same labels, annotations and spec hash the same.", c: comp(map[string]string{"a": "b"}, v1.CompositionModeResources), same: true},
		"OtherLabel": {reason: "Labels are part of the hash.", c: comp(map[string]string{"a": "c"}, v1.CompositionModeResources)},
		"OtherSpec":  {reason: "The spec is part of the hash.", c: comp(map[string]string{"a": "b"}, v1.CompositionModePipeline)},
		"OtherName": {reason: "The name is not part of the hash.", c: func() *v1.Composition {
			c := comp(map[string]string{"a": "b"}, v1.CompositionModeResources)
			c.Name = "d"
			return c
		}(), same: true},
		"Annotations": {reason: "Annotations are part of the hash.", c: func() *v1.Composition {
			c := comp(map[string]string{"a": "b"}, v1.CompositionModeResources)
			c.Annotations = map[string]string{"x": "y"}
			return c
		}()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := Hash(tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if (a == b) != tc.same {
				t.Errorf("%s\nHash equal: %v, want %v", tc.reason, a == b, tc.same)
			}
			if len(b) != 64 {
				t.Errorf("hash %q is not 64 hex characters", b)
			}
		})
	}
	if got := Name("comp", a); got != "comp-"+a[:7] {
		t.Errorf("Name(...) = %q", got)
	}
}

func rev(name string, n int64, l map[string]string) *v1.CompositionRevision {
	return &v1.CompositionRevision{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Spec: v1.CompositionRevisionSpec{Revision: n}}
}

func TestLatest(t *testing.T) {
	revs := []*v1.CompositionRevision{
		rev("c-1", 1, map[string]string{"channel": "stable"}),
		rev("c-3", 3, map[string]string{"channel": "dev"}),
		rev("c-2", 2, map[string]string{"channel": "stable"}),
	}
	cases := map[string]struct {
		reason string
		sel    labels.Selector
		want   string
	}{
		"All":      {reason: "Without a selector the highest number wins.", want: "c-3"},
		"Selected": {reason: "A selector restricts the choice.", sel: labels.SelectorFromSet(labels.Set{"channel": "stable"}), want: "c-2"},
		"None":     {reason: "A selector matching nothing gives nothing.", sel: labels.SelectorFromSet(labels.Set{"channel": "x"}), want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if r := composition.Latest(revs, tc.sel); r != nil {
				got = r.GetName()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nLatest(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestFollows(t *testing.T) {
	revs := []*v1.CompositionRevision{
		rev("c-1", 1, map[string]string{"channel": "stable"}),
		rev("c-2", 2, map[string]string{"channel": "dev"}),
	}
	xr := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	}
	ref := func(n string) map[string]any { return map[string]any{"name": n} }
	cases := map[string]struct {
		reason  string
		xr      *unstructured.Unstructured
		path    string
		want    bool
		wantRev string
	}{
		"NoComposition": {reason: "An XR without a Composition may select this one.", xr: xr(map[string]any{}), path: "spec", want: true},
		"OtherComposition": {reason: "An XR of another Composition does not care.",
			xr: xr(map[string]any{"compositionRef": ref("other")}), path: "spec"},
		"Behind": {reason: "An Automatic XR on an older revision follows.",
			xr: xr(map[string]any{"compositionRef": ref("c"), "compositionRevisionRef": ref("c-1")}), path: "spec", want: true, wantRev: "c-2"},
		"Latest": {reason: "An XR on the latest revision has nothing to do.",
			xr: xr(map[string]any{"compositionRef": ref("c"), "compositionRevisionRef": ref("c-2")}), path: "spec"},
		"Manual": {reason: "A Manual XR keeps its revision.",
			xr: xr(map[string]any{"compositionRef": ref("c"), "compositionRevisionRef": ref("c-1"), "compositionUpdatePolicy": "Manual"}), path: "spec"},
		"Selector": {reason: "An XR on the latest revision its selector allows has nothing to do.",
			xr: xr(map[string]any{"compositionRef": ref("c"), "compositionRevisionRef": ref("c-1"),
				"compositionRevisionSelector": map[string]any{"matchLabels": map[string]any{"channel": "stable"}}}), path: "spec"},
		"Crossplane": {reason: "Modern XRs keep their machinery under spec.crossplane.",
			xr: xr(map[string]any{"crossplane": map[string]any{"compositionRef": ref("c"), "compositionRevisionRef": ref("c-1")}}), path: "spec.crossplane", want: true, wantRev: "c-2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, rev := Follows(tc.xr, tc.path, "c", revs)
			if got != tc.want {
				t.Errorf("%s\nFollows(...) = %v, want %v", tc.reason, got, tc.want)
			}
			if rev != nil && rev.GetName() != tc.wantRev {
				t.Errorf("%s\nFollows(...) revision %q, want %q", tc.reason, rev.GetName(), tc.wantRev)
			}
		})
	}
}
