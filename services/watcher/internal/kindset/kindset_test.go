package kindset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	nop    = schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}
	bucket = schema.GroupVersionKind{Group: "s3.aws.example.org", Version: "v1beta1", Kind: "Bucket"}
	cm     = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	nopV2  = schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1", Kind: "NopResource"}
)

// op is one update of a set: a Put (kinds non-nil or put true) or a Remove.
type op struct {
	source  string
	kinds   []schema.GroupVersionKind
	remove  bool
	added   []schema.GroupVersionKind
	removed []schema.GroupVersionKind
}

func TestSet(t *testing.T) {
	cases := map[string]struct {
		reason  string
		ops     []op
		want    []schema.GroupVersionKind
		sources []string
	}{
		"FirstSourceAdds": {
			reason:  "The first source naming kinds adds them, sorted and without duplicates.",
			ops:     []op{{source: "xr/a", kinds: []schema.GroupVersionKind{nop, cm, nop}, added: []schema.GroupVersionKind{cm, nop}}},
			want:    []schema.GroupVersionKind{cm, nop},
			sources: []string{"xr/a"},
		},
		"SecondSourceAddsNothingKnown": {
			reason: "A second source naming a known kind adds only the new ones.",
			ops: []op{
				{source: "xr/a", kinds: []schema.GroupVersionKind{nop}, added: []schema.GroupVersionKind{nop}},
				{source: "composition/c", kinds: []schema.GroupVersionKind{nop, bucket}, added: []schema.GroupVersionKind{bucket}},
			},
			want:    []schema.GroupVersionKind{nop, bucket},
			sources: []string{"composition/c", "xr/a"},
		},
		"KindStaysWhileNamed": {
			reason: "Removing one of two sources naming a kind keeps the kind.",
			ops: []op{
				{source: "xr/a", kinds: []schema.GroupVersionKind{nop}, added: []schema.GroupVersionKind{nop}},
				{source: "xr/b", kinds: []schema.GroupVersionKind{nop}},
				{source: "xr/a", remove: true},
			},
			want:    []schema.GroupVersionKind{nop},
			sources: []string{"xr/b"},
		},
		"LastSourceRemoves": {
			reason: "Removing the last source naming a kind removes the kind.",
			ops: []op{
				{source: "xr/a", kinds: []schema.GroupVersionKind{nop, cm}, added: []schema.GroupVersionKind{cm, nop}},
				{source: "xr/b", kinds: []schema.GroupVersionKind{cm}},
				{source: "xr/a", remove: true, removed: []schema.GroupVersionKind{nop}},
				{source: "xr/b", remove: true, removed: []schema.GroupVersionKind{cm}},
			},
			sources: nil,
		},
		"ReplaceDiffs": {
			reason: "Putting a new list for a source adds and removes the difference.",
			ops: []op{
				{source: "xr/a", kinds: []schema.GroupVersionKind{nop, cm}, added: []schema.GroupVersionKind{cm, nop}},
				{source: "xr/a", kinds: []schema.GroupVersionKind{cm, bucket}, added: []schema.GroupVersionKind{bucket}, removed: []schema.GroupVersionKind{nop}},
			},
			want:    []schema.GroupVersionKind{cm, bucket},
			sources: []string{"xr/a"},
		},
		"VersionsAreDistinct": {
			reason: "Two versions of a kind are two kinds.",
			ops: []op{
				{source: "xr/a", kinds: []schema.GroupVersionKind{nop}, added: []schema.GroupVersionKind{nop}},
				{source: "xr/a", kinds: []schema.GroupVersionKind{nopV2}, added: []schema.GroupVersionKind{nopV2}, removed: []schema.GroupVersionKind{nop}},
			},
			want:    []schema.GroupVersionKind{nopV2},
			sources: []string{"xr/a"},
		},
		"PutNothingRemoves": {
			reason: "Putting no kinds removes the source.",
			ops: []op{
				{source: "xr/a", kinds: []schema.GroupVersionKind{nop}, added: []schema.GroupVersionKind{nop}},
				{source: "xr/a", kinds: nil, removed: []schema.GroupVersionKind{nop}},
			},
			sources: nil,
		},
		"RemoveUnknown": {
			reason: "Removing an unknown source changes nothing.",
			ops: []op{
				{source: "xr/a", kinds: []schema.GroupVersionKind{nop}, added: []schema.GroupVersionKind{nop}},
				{source: "xr/z", remove: true},
			},
			want:    []schema.GroupVersionKind{nop},
			sources: []string{"xr/a"},
		},
		"IdempotentPut": {
			reason: "Putting the same kinds again changes nothing.",
			ops: []op{
				{source: "xr/a", kinds: []schema.GroupVersionKind{nop}, added: []schema.GroupVersionKind{nop}},
				{source: "xr/a", kinds: []schema.GroupVersionKind{nop}},
			},
			want:    []schema.GroupVersionKind{nop},
			sources: []string{"xr/a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := New()
			for i, o := range tc.ops {
				var added, removed []schema.GroupVersionKind
				if o.remove {
					removed = s.Remove(o.source)
				} else {
					added, removed = s.Put(o.source, o.kinds)
				}
				if diff := cmp.Diff(o.added, added, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s\nop %d added: -want, +got:\n%s", tc.reason, i, diff)
				}
				if diff := cmp.Diff(o.removed, removed, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s\nop %d removed: -want, +got:\n%s", tc.reason, i, diff)
				}
			}
			if diff := cmp.Diff(tc.want, s.Kinds(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nKinds(): -want, +got:\n%s", tc.reason, diff)
			}
			for _, k := range tc.want {
				if !s.Has(k) {
					t.Errorf("%s\nHas(%v): want true", tc.reason, k)
				}
			}
			if diff := cmp.Diff(tc.sources, s.Sources(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nSources(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
