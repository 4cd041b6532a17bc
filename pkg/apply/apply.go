// Package apply decides, before a service sends a server-side apply, whether
// that apply would change anything. The API server's write rate is the
// scarcest resource Loom has: a service computes its fully specified intent,
// compares it with the object it just read, and writes only when Changes
// says so. Every service that applies (binder, renderer, secrets) uses this
// one package, so they agree on what "unchanged" means.
//
// # What counts as a change
//
// The answer is read from the object's managed fields, because an apply
// changes not only values but also who owns them. An apply by field manager
// M on a subresource changes the object when
//
//   - M has no Apply entry for that subresource: the first apply establishes
//     ownership, even when every value already matches;
//   - the intent sets a field that M does not own, even with the value the
//     object already holds (another writer set it): the apply makes M an
//     owner, so that M's later applies keep the field and a later change of
//     intent removes or resets it;
//   - a field of the intent is missing from the object or holds another
//     value there (drift by another writer included); a null in the intent
//     is owned like any field and matches a missing field;
//   - M owns a field (it sent it in an earlier apply) that the intent no
//     longer sets: the API server removes it, or M's ownership of it.
//
// Fields of the object that the intent does not mention and M does not own
// (set by other writers, or defaulted by the API server) never count. The
// identity fields apiVersion and kind are not compared, and the metadata
// fields the API server never records as owned (name, namespace, uid,
// resourceVersion, generation, creationTimestamp, selfLink, managedFields)
// are compared by value only.
//
// # Lists and maps
//
// M's entry also says how the API server merges each list M applied:
//
//   - a list whose entry holds k:{...} elements (x-kubernetes-list-type: map,
//     conditions by type, ownerReferences by uid) is compared element by
//     element by key: the intent's elements must each be owned, present and
//     equal, other writers' elements and the order do not count, and an
//     element M owns that the intent drops is a change;
//   - a list whose entry holds v:... members (x-kubernetes-list-type: set,
//     finalizers) is compared by membership in the same way;
//   - any other list (x-kubernetes-list-type: atomic, or no list type, which
//     means atomic) is replaced whole by an apply and compared whole: same
//     length, same order, and each element holding what the intent's holds.
//     Fields inside an element that the intent does not set do not count:
//     while M owns an atomic list nobody else can have changed it without
//     taking it over, so such fields are defaults the API server adds again.
//
// A non-empty map or object field that M owns without any owned child is
// taken to be atomic (x-kubernetes-map-type: atomic) and compared like an
// atomic list's element. Numbers compare by value whatever their Go type
// (int, int64, float64, json.Number).
//
// Where the entry cannot tell the merge strategy, Changes errs towards a
// write: an empty list applied to a keyed list that others fill compares
// whole, which costs a write, never correctness. The one case it can miss
// is ownership of children of a granular map that M last applied empty and
// others have since filled with the very values M now intends.
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
// the status subresource), would change current, its values or its managed
// fields (see the package documentation). A nil current always changes. It
// fails only when the manager's managed-fields entry cannot be decoded.
func Changes(current, intent *unstructured.Unstructured, manager, subresource string) (bool, error) {
	if current == nil {
		return true, nil
	}
	owned, ok, err := Owned(current, manager, subresource)
	if err != nil || !ok {
		return true, err
	}
	want := make(map[string]any, len(intent.Object))
	for k, v := range intent.Object {
		if k == "apiVersion" || k == "kind" {
			continue
		}
		want[k] = v
	}
	return mapChanged(current.Object, want, owned, topLevel), nil
}

// Owned returns the fields that manager owns on obj through server-side
// apply on subresource, as the decoded FieldsV1 tree of its managed-fields
// entry (keys such as "f:spec", "k:{\"type\":\"Ready\"}", "v:\"x\"", "."),
// and whether the manager has such an entry at all.
func Owned(obj *unstructured.Unstructured, manager, subresource string) (map[string]any, bool, error) {
	for _, e := range obj.GetManagedFields() {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != subresource {
			continue
		}
		tree := map[string]any{}
		if e.FieldsV1 == nil {
			return tree, true, nil
		}
		if err := json.Unmarshal(e.FieldsV1.Raw, &tree); err != nil {
			return nil, false, fmt.Errorf("cannot decode managed fields of %s: %w", manager, err)
		}
		return tree, true, nil
	}
	return nil, false, nil
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

// level says where in the object a map is, for the fields the API server
// never records as owned.
type level int

const (
	nested level = iota
	topLevel
	metadata
)

// unowned are the metadata fields the API server strips from managed fields.
var unowned = map[string]bool{ //nolint:gochecknoglobals // A constant set.
	"name": true, "namespace": true, "uid": true, "resourceVersion": true, "generation": true,
	"creationTimestamp": true, "selfLink": true, "managedFields": true, "clusterName": true,
}

// mapChanged compares a map of the intent with the object's value cur at the
// same place; owned is the manager's FieldsV1 node for this map.
func mapChanged(cur any, want map[string]any, owned map[string]any, at level) bool {
	c, ok := cur.(map[string]any)
	if !ok {
		return len(want) > 0 || cur != nil
	}
	for k, wv := range want {
		node, owns := owned["f:"+k].(map[string]any)
		free := at == topLevel && k == "metadata" || at == metadata && unowned[k]
		if !owns && !free {
			return true
		}
		cv, present := c[k]
		if wv == nil {
			if present && cv != nil {
				return true
			}
			continue
		}
		if !present || fieldChanged(cv, wv, node, at == topLevel && k == "metadata") {
			return true
		}
	}
	for k := range owned {
		if name, ok := strings.CutPrefix(k, "f:"); ok {
			if _, ok := want[name]; !ok {
				return true
			}
		}
	}
	return false
}

// fieldChanged compares the value of one owned field.
func fieldChanged(cur, want any, owned map[string]any, isMetadata bool) bool {
	switch w := want.(type) {
	case map[string]any:
		if !isMetadata && len(w) > 0 && !hasPrefixed(owned, "f:") {
			// Owned whole: an atomic map.
			return !Matches(cur, w)
		}
		at := nested
		if isMetadata {
			at = metadata
		}
		return mapChanged(cur, w, owned, at)
	case []any:
		c, ok := cur.([]any)
		if !ok {
			return len(w) > 0 || cur != nil
		}
		return listChanged(c, w, owned)
	default:
		return !Equal(cur, want)
	}
}

func hasPrefixed(owned map[string]any, prefix string) bool {
	for k := range owned {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// listChanged compares a list according to how the manager's entry says the
// API server merges it.
func listChanged(cur, want []any, owned map[string]any) bool {
	var keys []string
	set := false
	for k := range owned {
		switch {
		case strings.HasPrefix(k, "k:"):
			key := map[string]any{}
			if err := json.Unmarshal([]byte(k[2:]), &key); err != nil {
				return true
			}
			keys = keys[:0]
			for f := range key {
				keys = append(keys, f)
			}
		case strings.HasPrefix(k, "v:"):
			set = true
		}
	}
	switch {
	case len(keys) > 0:
		return keyedListChanged(cur, want, owned, keys)
	case set:
		return setChanged(cur, want, owned)
	default:
		return !Matches(cur, want)
	}
}

func keyedListChanged(cur, want []any, owned map[string]any, keys []string) bool {
	for _, w := range want {
		wm, ok := w.(map[string]any)
		if !ok {
			return true
		}
		key := make(map[string]any, len(keys))
		for _, f := range keys {
			key[f] = wm[f]
		}
		node, owns := ownedElement(owned, key)
		if !owns {
			return true
		}
		cm := findByKey(cur, key)
		if cm == nil || mapChanged(cm, wm, node, nested) {
			return true
		}
	}
	for k := range owned {
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

func setChanged(cur, want []any, owned map[string]any) bool {
	members := make([]any, 0, len(owned))
	for k := range owned {
		raw, ok := strings.CutPrefix(k, "v:")
		if !ok {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil || !contains(want, v) {
			return true
		}
		members = append(members, v)
	}
	for _, w := range want {
		if !contains(cur, w) || !contains(members, w) {
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

// ownedElement returns the manager's node for the keyed element key, and
// whether it owns one.
func ownedElement(owned map[string]any, key map[string]any) (map[string]any, bool) {
	for k, v := range owned {
		raw, ok := strings.CutPrefix(k, "k:")
		if !ok {
			continue
		}
		ek := map[string]any{}
		if err := json.Unmarshal([]byte(raw), &ek); err != nil {
			continue
		}
		if Equal(ek, key) {
			c, _ := v.(map[string]any)
			return c, true
		}
	}
	return nil, false
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
