// Package kindset maintains the set of kinds the watcher must watch as
// composed resources (or on request), counted by source. A source is anything
// that names kinds, such as an XR's spec.resourceRefs or a Composition's
// templates; a kind stays in the set while at least one source names it.
//
// The caller learns which kinds entered and left the set with every update, so
// it starts and stops exactly the watches that changed. A Set is not safe for
// concurrent use.
package kindset

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/services/watcher/internal/object"
)

// A Set of kinds, counted by source.
type Set struct {
	sources map[string][]schema.GroupVersionKind
	counts  map[schema.GroupVersionKind]int
}

// New returns an empty set.
func New() *Set {
	return &Set{sources: map[string][]schema.GroupVersionKind{}, counts: map[schema.GroupVersionKind]int{}}
}

// Put records that source names exactly kinds (duplicates are ignored),
// replacing what it named before. It returns the kinds that entered the set
// and those that left it, each sorted. Putting no kinds removes the source.
func (s *Set) Put(source string, kinds []schema.GroupVersionKind) (added, removed []schema.GroupVersionKind) {
	next := slices.Clone(kinds)
	slices.SortFunc(next, object.CompareGVK)
	next = slices.Compact(next)
	prev := s.sources[source]

	for _, k := range next {
		if _, found := slices.BinarySearchFunc(prev, k, object.CompareGVK); found {
			continue
		}
		if s.counts[k] == 0 {
			added = append(added, k)
		}
		s.counts[k]++
	}
	for _, k := range prev {
		if _, found := slices.BinarySearchFunc(next, k, object.CompareGVK); found {
			continue
		}
		s.counts[k]--
		if s.counts[k] == 0 {
			delete(s.counts, k)
			removed = append(removed, k)
		}
	}
	if len(next) == 0 {
		delete(s.sources, source)
	} else {
		s.sources[source] = next
	}
	return added, removed
}

// Remove forgets a source. It returns the kinds that left the set, sorted.
func (s *Set) Remove(source string) (removed []schema.GroupVersionKind) {
	_, removed = s.Put(source, nil)
	return removed
}

// Has reports whether some source names the kind.
func (s *Set) Has(k schema.GroupVersionKind) bool { return s.counts[k] > 0 }

// Kinds returns every kind in the set, sorted.
func (s *Set) Kinds() []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, 0, len(s.counts))
	for k := range s.counts {
		out = append(out, k)
	}
	slices.SortFunc(out, object.CompareGVK)
	return out
}

// Sources returns the sources that name at least one kind, sorted.
func (s *Set) Sources() []string {
	out := make([]string, 0, len(s.sources))
	for src := range s.sources {
		out = append(out, src)
	}
	slices.Sort(out)
	return out
}
