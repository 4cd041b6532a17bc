package xrd

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// lister serves a fixed list of XRDs and counts LISTs.
type lister struct {
	items []unstructured.Unstructured
	calls int
}

func (l *lister) List(context.Context, schema.GroupVersionKind, string, labels.Selector) ([]unstructured.Unstructured, error) {
	l.calls++
	return l.items, nil
}

func xrd(name, group, kind, claimKind string) unstructured.Unstructured {
	spec := map[string]any{
		"group":    group,
		"names":    map[string]any{"kind": kind, "plural": name},
		"versions": []any{map[string]any{"name": "v1", "referenceable": true, "served": true}},
	}
	if claimKind != "" {
		spec["claimNames"] = map[string]any{"kind": claimKind, "plural": claimKind}
	}
	return unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.crossplane.io/v1",
		"kind":       "CompositeResourceDefinition",
		"metadata":   map[string]any{"name": name + "." + group},
		"spec":       spec,
	}}
}

func TestLookup(t *testing.T) {
	l := &lister{items: []unstructured.Unstructured{xrd("xdatabases", "example.org", "XDatabase", "Database")}}
	now := time.Unix(0, 0)
	i := NewIndex(l, WithTTL(time.Minute), WithMinInterval(time.Second))
	i.now = func() time.Time { return now }
	ctx := t.Context()

	type step struct {
		reason    string
		advance   time.Duration
		gk        schema.GroupKind
		wantXRD   string
		wantClaim bool
		wantCalls int
	}
	steps := []step{
		{reason: "The first lookup loads the index.", gk: schema.GroupKind{Group: "example.org", Kind: "Database"}, wantXRD: "xdatabases.example.org", wantClaim: true, wantCalls: 1},
		{reason: "A hit in a fresh index does not list again.", gk: schema.GroupKind{Group: "example.org", Kind: "XDatabase"}, wantXRD: "xdatabases.example.org", wantCalls: 1},
		{reason: "A miss within the minimum interval does not list again.", gk: schema.GroupKind{Group: "example.org", Kind: "Unknown"}, wantCalls: 1},
		{reason: "A miss after the minimum interval lists again.", advance: 2 * time.Second, gk: schema.GroupKind{Group: "example.org", Kind: "Unknown"}, wantCalls: 2},
		{reason: "A hit in a stale index lists again.", advance: 2 * time.Minute, gk: schema.GroupKind{Group: "example.org", Kind: "Database"}, wantXRD: "xdatabases.example.org", wantClaim: true, wantCalls: 3},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		d, claim, err := i.Lookup(ctx, s.gk)
		if err != nil {
			t.Fatalf("\n%s\nLookup(%s): %v", s.reason, s.gk, err)
		}
		got := ""
		if d != nil {
			got = d.GetName()
		}
		if diff := cmp.Diff(s.wantXRD, got); diff != "" {
			t.Errorf("\n%s\nLookup(%s) XRD: -want, +got:\n%s", s.reason, s.gk, diff)
		}
		if diff := cmp.Diff(s.wantClaim, claim); diff != "" {
			t.Errorf("\n%s\nLookup(%s) claim: -want, +got:\n%s", s.reason, s.gk, diff)
		}
		if diff := cmp.Diff(s.wantCalls, l.calls); diff != "" {
			t.Errorf("\n%s\nLIST calls: -want, +got:\n%s", s.reason, diff)
		}
	}
}
