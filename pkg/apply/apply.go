// Package apply decides, before a service sends a server-side apply, whether
// that apply would change anything. The API server's write rate is the
// scarcest resource Loom has: a service computes its fully specified intent,
// compares it with the object it just read, and writes only when Changes
// says so. Every service that applies (binder, renderer, secrets) uses this
// one package, so they agree on what "unchanged" means.
//
// # What counts as a change
//
// An apply by field manager M on a subresource changes the object when
//
//   - a field of the intent is missing from the object or holds another
//     value there (drift by another writer included); a null in the intent
//     matches a missing field;
//   - M owns a field through its Apply entry for that subresource (it sent
//     it in an earlier apply) that the intent no longer sets: the API server
//     removes it.
//
// Who else owns a field the intent sets with the value the object holds
// does not count: M's own Update entry (a create or an update recorded it),
// no entry at all, or another manager's entry. Applying that value shares
// ownership of it and leaves the object as it is, and a write that changes
// nothing but managed fields is the write this package exists to save.
// Taking a field from another manager is always a change of value (a
// forced apply of a value it does not hold), and so counts. Fields of the
// object that the intent does not mention (set by other writers, or
// defaulted by the API server) never count, and the identity fields
// apiVersion and kind are not compared.
//
// # Lists and maps
//
// The managed fields of every manager, M's and the others', say how the API
// server merges each list: that is the schema as the API server applies it.
//
//   - a list recorded with k:{...} elements (x-kubernetes-list-type: map,
//     conditions by type, ownerReferences by uid) is compared element by
//     element by key: the intent's elements must each be present and equal,
//     other writers' elements and the order do not count, and an element
//     M applied before that the intent drops is a change;
//   - a list recorded with v:... members (x-kubernetes-list-type: set,
//     finalizers) is compared by membership in the same way;
//   - any other list (x-kubernetes-list-type: atomic, no list type, or one
//     no entry records) is replaced whole by an apply and compared whole:
//     same length, same order, each element holding what the intent's holds.
//
// A non-empty map or keyed element that entries record without any child
// field (x-kubernetes-map-type: atomic, or an ownerReference, which is an
// atomic struct) is compared whole like an atomic list. While one of M's
// entries records an atomic value, fields inside it that the intent does
// not set do not count: nobody else can have changed the value without
// taking it from M, so such fields are defaults the API server adds again.
// Otherwise the value must equal the intent exactly, because the apply
// would replace it whole. Numbers compare by value whatever their Go type
// (int, int64, float64, json.Number).
package apply

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Changes reports whether server-side applying intent to current as field
// manager manager, on subresource ("" for the main resource, "status" for
// the status subresource), would change current (see the package
// documentation). A nil current always changes. It fails only when one of
// the manager's managed-fields entries cannot be decoded.
func Changes(current, intent *unstructured.Unstructured, manager, subresource string) (bool, error) {
	if current == nil {
		return true, nil
	}
	n, err := entries(current, manager, subresource)
	if err != nil {
		return true, err
	}
	want := make(map[string]any, len(intent.Object))
	for k, v := range intent.Object {
		if k == "apiVersion" || k == "kind" {
			continue
		}
		want[k] = v
	}
	return mapChanged(current.Object, want, n), nil
}

// Owned returns the fields that manager owns on obj through server-side
// apply on subresource, as the decoded FieldsV1 tree of its managed-fields
// entry (keys such as "f:spec", "k:{\"type\":\"Ready\"}", "v:\"x\"", "."),
// and whether the manager has such an entry at all.
func Owned(obj *unstructured.Unstructured, manager, subresource string) (map[string]any, bool, error) {
	for _, e := range managedFields(obj) {
		if e.manager != manager || e.operation != metav1.ManagedFieldsOperationApply || e.subresource != subresource {
			continue
		}
		return e.fields, e.err == nil, e.err
	}
	return nil, false, nil
}

// managedEntry is one managed-fields entry of an object, its FieldsV1 tree read
// in place.
type managedEntry struct {
	manager, subresource string
	operation            metav1.ManagedFieldsOperationType
	// fields is the entry's FieldsV1 tree: the object's own map, to be
	// read, never changed. It is empty when the entry records no fields.
	fields map[string]any
	// err says why fields could not be read.
	err error
}

// managedFields returns the managed-fields entries of obj, read from its
// map as they are. Converting them to metav1.ManagedFieldsEntry would
// encode every FieldsV1 tree to JSON and decode it again, which was a
// tenth of the renderer's CPU. An element that is no entry (not a JSON
// object) is left out, as the typed conversion would fail on it.
func managedFields(obj *unstructured.Unstructured) []managedEntry {
	list, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "managedFields")
	items, _ := list.([]any)
	out := make([]managedEntry, 0, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		e := managedEntry{fields: map[string]any{}}
		e.manager, _ = m["manager"].(string)
		e.subresource, _ = m["subresource"].(string)
		op, _ := m["operation"].(string)
		e.operation = metav1.ManagedFieldsOperationType(op)
		switch f := m["fieldsV1"].(type) {
		case nil:
		case map[string]any:
			e.fields = f
		default:
			e.fields, e.err = nil, fmt.Errorf("cannot decode managed fields of %s: fieldsV1 is a %T, not an object", e.manager, f)
		}
		out = append(out, e)
	}
	return out
}

// OwnsField reports whether the FieldsV1 tree owned (see Owned) holds the
// field at the supplied path of object field names, for example
// ["spec", "forProvider", "networkId"]. A parent of an owned field counts as
// owned; the empty path never does.
func OwnsField(owned map[string]any, path []string) bool {
	if len(path) == 0 {
		return false
	}
	node := owned
	for _, name := range path {
		next, ok := node["f:"+name].(map[string]any)
		if !ok {
			return false
		}
		node = next
	}
	return true
}

// node is one place in the object as the managed fields record it: the
// FieldsV1 nodes of the entries at that place, absent where an entry does
// not reach it.
type node struct {
	// applied is the manager's Apply entry for the subresource: what an
	// apply removes when the intent drops it.
	applied map[string]any
	// ours are every entry of the manager for the subresource (Apply and
	// Update): a value one of them records was last set by the manager.
	ours []map[string]any
	// all are every manager's entries, for any subresource: they tell how
	// the API server merges lists and maps.
	all []map[string]any
	// root is set on the object itself, metadata on its metadata, which is
	// never atomic.
	root, metadata bool
}

// entries returns the root node of obj's managed fields for an apply by
// manager on subresource. Another manager's entry that cannot be decoded
// is skipped: it only ever tells how a list merges, and without it the
// list is compared whole, which errs towards a write.
func entries(obj *unstructured.Unstructured, manager, subresource string) (node, error) {
	n := node{root: true}
	for _, e := range managedFields(obj) {
		mine := e.manager == manager && e.subresource == subresource
		if e.err != nil {
			if mine {
				return node{}, e.err
			}
			continue
		}
		n.all = append(n.all, e.fields)
		if !mine {
			continue
		}
		n.ours = append(n.ours, e.fields)
		if e.operation == metav1.ManagedFieldsOperationApply {
			n.applied = e.fields
		}
	}
	return n, nil
}

// child returns the node of the child key ("f:name", "k:{...}") of n.
func (n node) child(key string) node {
	pick := func(trees []map[string]any) []map[string]any {
		var out []map[string]any
		for _, t := range trees {
			if c, ok := t[key].(map[string]any); ok {
				out = append(out, c)
			}
		}
		return out
	}
	c, _ := n.applied[key].(map[string]any)
	return node{applied: c, ours: pick(n.ours), all: pick(n.all)}
}

// element returns the node of the keyed-list element whose key fields hold
// key.
func (n node) element(key map[string]any) node {
	find := func(t map[string]any) map[string]any {
		for k, v := range t {
			raw, ok := strings.CutPrefix(k, "k:")
			if !ok {
				continue
			}
			ek := map[string]any{}
			if json.Unmarshal([]byte(raw), &ek) == nil && Equal(ek, key) {
				c, _ := v.(map[string]any)
				return c
			}
		}
		return nil
	}
	pick := func(trees []map[string]any) []map[string]any {
		var out []map[string]any
		for _, t := range trees {
			if c := find(t); c != nil {
				out = append(out, c)
			}
		}
		return out
	}
	return node{applied: find(n.applied), ours: pick(n.ours), all: pick(n.all)}
}

// atomic reports whether the entries record the map at n as one value:
// some entry holds it and none holds a field of it.
func (n node) atomic() bool {
	if n.metadata || len(n.all) == 0 {
		return false
	}
	for _, t := range n.all {
		for k := range t {
			if strings.HasPrefix(k, "f:") {
				return false
			}
		}
	}
	return true
}

// wholeChanged compares an atomic value: leniently while the manager's
// entries record it (fields inside it that the intent does not set are
// defaults), exactly otherwise (the apply replaces it whole).
func wholeChanged(cur, want any, n node) bool {
	if len(n.ours) > 0 {
		return !Matches(cur, want)
	}
	return !Equal(cur, want)
}

// mapChanged compares a map of the intent with the object's map cur at the
// same place.
func mapChanged(cur any, want map[string]any, n node) bool {
	c, ok := cur.(map[string]any)
	if !ok {
		return len(want) > 0 || cur != nil
	}
	for k, wv := range want {
		cv, present := c[k]
		if wv == nil {
			if present && cv != nil {
				return true
			}
			continue
		}
		if !present {
			return true
		}
		child := n.child("f:" + k)
		child.metadata = n.root && k == "metadata"
		if fieldChanged(cv, wv, child) {
			return true
		}
	}
	for k := range n.applied {
		if name, ok := strings.CutPrefix(k, "f:"); ok {
			if _, ok := want[name]; !ok {
				return true
			}
		}
	}
	return false
}

// fieldChanged compares the value of one field.
func fieldChanged(cur, want any, n node) bool {
	switch w := want.(type) {
	case map[string]any:
		if len(w) > 0 && n.atomic() {
			return wholeChanged(cur, w, n)
		}
		return mapChanged(cur, w, n)
	case []any:
		c, ok := cur.([]any)
		if !ok {
			return len(w) > 0 || cur != nil
		}
		return listChanged(c, w, n)
	default:
		return !Equal(cur, want)
	}
}

// listChanged compares a list according to how the entries say the API
// server merges it.
func listChanged(cur, want []any, n node) bool {
	keys, set := mergeKind(n.all)
	switch {
	case len(keys) > 0:
		return keyedListChanged(cur, want, n, keys)
	case set:
		return setChanged(cur, want, n)
	default:
		return wholeChanged(cur, want, n)
	}
}

// mergeKind returns the key fields of a list the trees record as keyed, or
// whether they record it as a set.
func mergeKind(trees []map[string]any) ([]string, bool) {
	set := false
	for _, t := range trees {
		for k := range t {
			if raw, ok := strings.CutPrefix(k, "k:"); ok {
				key := map[string]any{}
				if json.Unmarshal([]byte(raw), &key) != nil || len(key) == 0 {
					continue
				}
				fields := make([]string, 0, len(key))
				for f := range key {
					fields = append(fields, f)
				}
				return fields, false
			}
			if strings.HasPrefix(k, "v:") {
				set = true
			}
		}
	}
	return nil, set
}

func keyedListChanged(cur, want []any, n node, keys []string) bool {
	for _, w := range want {
		wm, ok := w.(map[string]any)
		if !ok {
			return true
		}
		key := make(map[string]any, len(keys))
		for _, f := range keys {
			key[f] = wm[f]
		}
		cm := findByKey(cur, key)
		if cm == nil || fieldChanged(cm, wm, n.element(key)) {
			return true
		}
	}
	for k := range n.applied {
		raw, ok := strings.CutPrefix(k, "k:")
		if !ok {
			continue
		}
		key := map[string]any{}
		if err := json.Unmarshal([]byte(raw), &key); err != nil || findByKey(want, key) == nil {
			return true
		}
	}
	return false
}

func setChanged(cur, want []any, n node) bool {
	for _, w := range want {
		if !contains(cur, w) {
			return true
		}
	}
	for k := range n.applied {
		raw, ok := strings.CutPrefix(k, "v:")
		if !ok {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil || !contains(want, v) {
			return true
		}
	}
	return false
}

func contains(list []any, v any) bool {
	for _, e := range list {
		if Equal(e, v) {
			return true
		}
	}
	return false
}

func findByKey(list []any, key map[string]any) map[string]any {
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		match := true
		for f, v := range key {
			if !Equal(m[f], v) {
				match = false
				break
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// Matches reports whether cur holds everything want holds: maps hold each of
// want's keys with a matching value (a nil value in want matches a missing
// key) and may hold more, lists have the same length and matching elements
// in the same order, and scalars are Equal. It is how an atomic list or map
// that the manager owns is compared, and how a service compares an intended
// object with an observed one when the API server may have added defaults.
func Matches(cur, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		c, ok := cur.(map[string]any)
		if !ok {
			return len(w) == 0 && cur == nil
		}
		for k, wv := range w {
			cv, present := c[k]
			if wv == nil {
				if present && cv != nil {
					return false
				}
				continue
			}
			if !present || !Matches(cv, wv) {
				return false
			}
		}
		return true
	case []any:
		c, ok := cur.([]any)
		if !ok {
			return len(w) == 0 && cur == nil
		}
		if len(c) != len(w) {
			return false
		}
		for i := range w {
			if !Matches(c[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return cur == nil
	default:
		return Equal(cur, want)
	}
}

// Equal reports whether two JSON-like values (maps, slices, strings, bools,
// numbers, nil) are equal, comparing numbers by value whatever their Go types
// (objects decoded from the API hold int64 and float64, intents may hold int
// or json.Number).
func Equal(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for k, v := range av {
			w, ok := bv[k]
			if !ok || !Equal(v, w) {
				return false
			}
		}
		return true
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !Equal(av[i], bv[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case float32:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n)
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}
