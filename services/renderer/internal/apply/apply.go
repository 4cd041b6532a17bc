// Package apply decides whether a server-side apply would change an object,
// so that the renderer sends only the writes that change something. The API
// server's write rate is the scarcest resource in Loom: re-rendering an XR
// whose composed resources and status are as they should be must make no
// write at all.
//
// An apply by a field manager changes an object when
//   - a field of the intent is missing from the object or has another value
//     there (drift by another writer included), or
//   - the manager owns a field (it sent it in an earlier apply) that the
//     intent no longer holds: the API server would remove it.
//
// The second rule reads the manager's managed-fields entry, which also says
// how the API server merges each list the manager applied: by key (for
// example conditions by type), as a set, or whole (atomic). A manager that
// has never applied to the object always changes it, so the first apply
// establishes ownership.
//
// Values are compared with JSON semantics: numbers by value whatever their
// Go type, a nil intent value equal to a missing field. Fields of the object
// that the intent does not mention (set by other writers, or defaulted by the
// API server) never count as a change.
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

// Changes reports whether server-side applying intent to current as manager,
// on subresource ("" for the main resource, "status" for the status
// subresource), would change current. A nil current always changes. The
// fields apiVersion and kind are not compared.
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
	return changed(current.Object, want, owned), nil
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

func child(owned map[string]any, key string) map[string]any {
	c, _ := owned[key].(map[string]any)
	return c
}

// changed walks want (the intent) alongside cur (the object) and owned (the
// manager's FieldsV1 node for the same field, nil when it owns nothing
// there).
func changed(cur, want any, owned map[string]any) bool {
	switch w := want.(type) {
	case map[string]any:
		c, ok := cur.(map[string]any)
		if !ok {
			return len(w) > 0 || cur != nil
		}
		for k, wv := range w {
			cv, ok := c[k]
			if !ok {
				if wv == nil {
					continue
				}
				return true
			}
			if changed(cv, wv, child(owned, "f:"+k)) {
				return true
			}
		}
		for k := range owned {
			name, ok := strings.CutPrefix(k, "f:")
			if !ok {
				continue
			}
			if _, ok := w[name]; !ok {
				return true
			}
		}
		return false
	case []any:
		c, ok := cur.([]any)
		if !ok {
			return len(w) > 0 || cur != nil
		}
		return listChanged(c, w, owned)
	case nil:
		return cur != nil
	default:
		return !Equal(cur, want)
	}
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
		// Atomic: the apply replaces the list whole. Elements are compared
		// as objects are, so that fields the API server defaults inside
		// them do not count.
		if len(cur) != len(want) {
			return true
		}
		for i := range want {
			if changed(cur[i], want[i], nil) {
				return true
			}
		}
		return false
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
		cm := findByKey(cur, key)
		if cm == nil || changed(cm, wm, ownedElement(owned, key)) {
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
	for _, w := range want {
		if !contains(cur, w) {
			return true
		}
	}
	for k := range owned {
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

func ownedElement(owned map[string]any, key map[string]any) map[string]any {
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
			return c
		}
	}
	return nil
}

// Equal reports whether two JSON-like values are equal, comparing numbers
// by value whatever their Go types (int64, float64, json.Number ...).
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
