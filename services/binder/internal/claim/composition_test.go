package claim

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/composition"
)

// fakeLister lists from a fixed set of objects by kind and label selector,
// counting its calls.
type fakeLister struct {
	items []*unstructured.Unstructured
	err   error
	calls int
}

func (l *fakeLister) List(_ context.Context, gvk schema.GroupVersionKind, _ string, sel labels.Selector) ([]unstructured.Unstructured, error) {
	l.calls++
	if l.err != nil {
		return nil, l.err
	}
	var out []unstructured.Unstructured
	for _, o := range l.items {
		if o.GetKind() == gvk.Kind && (sel == nil || sel.Matches(labels.Set(o.GetLabels()))) {
			out = append(out, *o.DeepCopy())
		}
	}
	return out, nil
}

func testComposition(name, kind string, lbls map[string]any) *unstructured.Unstructured {
	return u(map[string]any{
		"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
		"metadata": map[string]any{"name": name, "labels": lbls},
		"spec":     map[string]any{"compositeTypeRef": map[string]any{"apiVersion": "example.org/v1", "kind": kind}},
	})
}

func testRevision(comp string, n int64, lbls map[string]any) *unstructured.Unstructured {
	l := map[string]any{xv1.LabelCompositionName: comp}
	for k, v := range lbls {
		l[k] = v
	}
	ctrl := true
	return u(map[string]any{
		"apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositionRevision",
		"metadata": map[string]any{
			"name": comp + "-" + string(rune('a'+n)), "labels": l,
			"ownerReferences": []any{map[string]any{"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition", "name": comp, "uid": "c", "controller": ctrl}},
		},
		"spec": map[string]any{"revision": n, "compositeTypeRef": map[string]any{"apiVersion": "example.org/v1", "kind": "XDatabase"}},
	})
}

func TestCompositionsChoose(t *testing.T) {
	revs := []*unstructured.Unstructured{
		testRevision("small", 1, map[string]any{"channel": "stable"}),
		testRevision("small", 2, map[string]any{"channel": "stable"}),
		testRevision("small", 3, map[string]any{"channel": "beta"}),
		testRevision("large", 1, nil),
		testRevision("large", 2, nil),
	}
	comps := []*unstructured.Unstructured{
		testComposition("small", "XDatabase", map[string]any{"size": "s"}),
		testComposition("large", "XDatabase", map[string]any{"size": "l"}),
		testComposition("other-kind", "XCache", map[string]any{"size": "s"}),
	}
	all := append(append([]*unstructured.Unstructured{}, comps...), revs...)
	ref := func(n string) map[string]any { return map[string]any{"name": n} }
	manual := xv1.UpdateManual
	cases := map[string]struct {
		reason string
		cm     *unstructured.Unstructured
		d      *xv1.CompositeResourceDefinition
		items  []*unstructured.Unstructured
		err    error
		want   map[string]any
	}{
		"ClaimsCompositionLatestRevision": {
			reason: "A claim naming its Composition gets that Composition's latest revision.",
			cm:     testClaim(withSpec("compositionRef", ref("small"))),
			items:  all,
			want:   map[string]any{"compositionRevisionRef": ref("small-d")},
		},
		"DefaultComposition": {
			reason: "Without a ref or selector the XRD's default Composition is named, with its latest revision.",
			cm:     testClaim(),
			d: xrd(func(d *xv1.CompositeResourceDefinition) {
				d.Spec.DefaultCompositionRef = &xv1.CompositionReference{Name: "large"}
			}),
			items: all,
			want:  map[string]any{"compositionRef": ref("large"), "compositionRevisionRef": ref("large-c")},
		},
		"EnforcedWins": {
			reason: "The XRD's enforced Composition replaces the claim's own.",
			cm:     testClaim(withSpec("compositionRef", ref("small"))),
			d: xrd(func(d *xv1.CompositeResourceDefinition) {
				d.Spec.EnforcedCompositionRef = &xv1.CompositionReference{Name: "large"}
			}),
			items: all,
			want:  map[string]any{"compositionRef": ref("large"), "compositionRevisionRef": ref("large-c")},
		},
		"SelectorAmongCompatible": {
			reason: "A compositionSelector chooses among the Compositions for the XR's kind only: other-kind matches the labels but is for another kind.",
			cm:     testClaim(withSpec("compositionSelector", map[string]any{"matchLabels": map[string]any{"size": "s"}})),
			d: xrd(func(d *xv1.CompositeResourceDefinition) {
				d.Spec.DefaultCompositionRef = &xv1.CompositionReference{Name: "large"}
			}),
			items: all,
			want:  map[string]any{"compositionRef": ref("small"), "compositionRevisionRef": ref("small-d")},
		},
		"RevisionSelectorOfClaim": {
			reason: "The claim's compositionRevisionSelector narrows the revisions.",
			cm: testClaim(withSpec("compositionRef", ref("small")),
				withSpec("compositionRevisionSelector", map[string]any{"matchLabels": map[string]any{"channel": "stable"}})),
			items: all,
			want:  map[string]any{"compositionRevisionRef": ref("small-c")},
		},
		"DefaultRevisionSelector": {
			reason: "The XRD's default revision selector is named on the claim, as the renderer would write it to the XR, and narrows the revisions.",
			cm:     testClaim(withSpec("compositionRef", ref("small"))),
			d: xrd(func(d *xv1.CompositeResourceDefinition) {
				d.Spec.DefaultCompositionRevisionSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"channel": "stable"}}
			}),
			items: all,
			want: map[string]any{
				"compositionRevisionSelector": map[string]any{"matchLabels": map[string]any{"channel": "stable"}},
				"compositionRevisionRef":      ref("small-c"),
			},
		},
		"ManualNoRevision": {
			reason: "Under the Manual update policy the XR's revision does not flow back to the claim: no revision is named.",
			cm:     testClaim(withSpec("compositionRef", ref("small")), withSpec("compositionUpdatePolicy", string(manual))),
			items:  all,
			want:   map[string]any{},
		},
		"AlreadyLatest": {
			reason: "A claim that already names the latest revision gets nothing to add.",
			cm:     testClaim(withSpec("compositionRef", ref("small")), withSpec("compositionRevisionRef", ref("small-d"))),
			items:  all,
			want:   map[string]any{},
		},
		"NoRevisionYet": {
			reason: "A Composition without revisions yet is named without one; the renderer's choice flows back later.",
			cm:     testClaim(),
			d: xrd(func(d *xv1.CompositeResourceDefinition) {
				d.Spec.DefaultCompositionRef = &xv1.CompositionReference{Name: "new"}
			}),
			items: all,
			want:  map[string]any{"compositionRef": ref("new")},
		},
		"NoCompatible": {
			reason: "No compatible Composition: nothing is named, and the renderer reports the problem on the XR.",
			cm:     testClaim(withSpec("compositionSelector", map[string]any{"matchLabels": map[string]any{"size": "xl"}})),
			items:  all,
			want:   map[string]any{},
		},
		"ListFails": {
			reason: "A list that fails names nothing.",
			cm:     testClaim(),
			err:    errors.New("boom"),
			want:   map[string]any{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := tc.d
			if d == nil {
				d = xrd()
			}
			c := NewCompositions(&fakeLister{items: tc.items, err: tc.err}, time.Minute, 8)
			got := c.Choose(t.Context(), tc.cm, d)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nChoose(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCompositionsChooseDeterministic(t *testing.T) {
	var comps []*unstructured.Unstructured
	var names []string
	for _, n := range []string{"a", "b", "c", "d"} {
		comps = append(comps, testComposition(n, "XDatabase", nil))
		names = append(names, n)
	}
	c := NewCompositions(&fakeLister{items: comps}, time.Minute, 8)
	seen := map[string]bool{}
	for _, uid := range []types.UID{"u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8"} {
		cm := testClaim(withSpec("compositionSelector", map[string]any{"matchLabels": map[string]any{}}))
		cm.SetUID(uid)
		got := c.Choose(t.Context(), cm, xrd())
		want := composition.Choose(uid, names)
		if diff := cmp.Diff(map[string]any{"name": want}, got["compositionRef"]); diff != "" {
			t.Errorf("claim %s: compositionRef -want (composition.Choose with the claim's UID), +got:\n%s", uid, diff)
		}
		seen[want] = true
	}
	if len(seen) < 2 {
		t.Errorf("8 claims all chose %v: the choice does not spread", seen)
	}
}

func TestCompositionsTTL(t *testing.T) {
	l := &fakeLister{items: []*unstructured.Unstructured{testRevision("small", 1, nil)}}
	c := NewCompositions(l, 5*time.Second, 8)
	now := time.Unix(0, 0)
	c.now = func() time.Time { return now }
	cm := testClaim(withSpec("compositionRef", map[string]any{"name": "small"}))
	for range 3 {
		c.Choose(t.Context(), cm, xrd())
	}
	if l.calls != 1 {
		t.Errorf("three choices within the TTL listed %d times, want 1", l.calls)
	}
	l.items = append(l.items, testRevision("small", 2, nil))
	now = now.Add(6 * time.Second)
	got := c.Choose(t.Context(), cm, xrd())
	if l.calls != 2 {
		t.Errorf("a choice after the TTL listed %d times in all, want 2", l.calls)
	}
	if diff := cmp.Diff(map[string]any{"compositionRevisionRef": map[string]any{"name": "small-c"}}, got); diff != "" {
		t.Errorf("after the TTL: -want (the new revision), +got:\n%s", diff)
	}
}

// TestBindNamesComposition reconciles a new claim, lets "the renderer" set
// the XR's Composition and revision, and reconciles again: with
// Compositions the claim's binding already names them, so nothing flows
// back and the claim is updated once; without, the second reconcile
// updates the claim again.
func TestBindNamesComposition(t *testing.T) {
	d := xrd(func(d *xv1.CompositeResourceDefinition) {
		d.Spec.DefaultCompositionRef = &xv1.CompositionReference{Name: "small"}
	})
	items := []*unstructured.Unstructured{testRevision("small", 1, nil), testRevision("small", 2, nil)}
	for name, tc := range map[string]struct {
		opts    []Option
		updates int
	}{
		"WithCompositions":    {opts: []Option{WithCompositions(NewCompositions(&fakeLister{items: items}, time.Minute, 8))}, updates: 1},
		"WithoutCompositions": {updates: 2},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(testClaim())
			o := append([]Option{WithNameGenerator(names("db-bbbbb")),
				WithClock(func() time.Time { return time.Unix(0, 0) })}, tc.opts...)
			r := NewReconciler(f, defs{d}, o...)
			if _, err := r.Reconcile(t.Context(), claimGVK, "team-a", "db"); err != nil {
				t.Fatalf("first Reconcile: %v", err)
			}
			// The renderer: the XR keeps a compositionRef it has, and
			// moves to the latest revision.
			xr := f.get("XDatabase", "", "db-bbbbb")
			if xr == nil {
				t.Fatal("no XR was created")
			}
			if got, _, _ := unstructured.NestedString(xr.Object, "spec", "compositionRef", "name"); tc.updates == 1 && got != "small" {
				t.Errorf("the XR was created with compositionRef %q, want the one the claim's binding named (small)", got)
			}
			_ = unstructured.SetNestedField(xr.Object, "small", "spec", "compositionRef", "name")
			_ = unstructured.SetNestedField(xr.Object, "small-c", "spec", "compositionRevisionRef", "name")
			withStatus(xr)
			f.put(xr)
			if _, err := r.Reconcile(t.Context(), claimGVK, "team-a", "db"); err != nil {
				t.Fatalf("second Reconcile: %v", err)
			}
			updates := 0
			for _, c := range f.calls {
				if c == "update Database db" {
					updates++
				}
			}
			if updates != tc.updates {
				t.Errorf("claim updates %d, want %d (calls %v)", updates, tc.updates, f.calls)
			}
			cm := f.get("Database", "team-a", "db")
			if got, _, _ := unstructured.NestedString(cm.Object, "spec", "compositionRevisionRef", "name"); got != "small-c" {
				t.Errorf("claim's compositionRevisionRef %q, want small-c", got)
			}
		})
	}
}

func TestCompositionsEmptyNotKept(t *testing.T) {
	l := &fakeLister{}
	c := NewCompositions(l, time.Minute, 8)
	cm := testClaim(withSpec("compositionRef", map[string]any{"name": "small"}))
	if got := c.Choose(t.Context(), cm, xrd()); len(got) != 0 {
		t.Fatalf("no revisions: Choose = %v, want nothing", got)
	}
	l.items = []*unstructured.Unstructured{testRevision("small", 1, nil)}
	got := c.Choose(t.Context(), cm, xrd())
	if diff := cmp.Diff(map[string]any{"compositionRevisionRef": map[string]any{"name": "small-b"}}, got); diff != "" {
		t.Errorf("a revision that appeared after an empty list: -want, +got:\n%s", diff)
	}
}
