// Package apply decides, before the binder sends a server-side apply, whether
// that apply would change anything. The API server's write rate is the
// scarcest resource Loom has, so the binder computes its fully specified
// intent, compares it with the object it just read, and writes only when the
// comparison says so.
//
// An apply changes an object when a field of the intent differs from the
// object, or when the object holds a field that the same field manager set by
// an earlier apply and the intent no longer sets (the API server removes such
// a field). The second rule needs the manager's managed-fields entry, which
// also tells which lists the API server merges by key or by value rather than
// replacing them whole.
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
// manager manager, on subresource subresource ("" for the main resource,
// "status" for the status subresource), would change current. A nil current
// always changes. The identity fields apiVersion and kind are not compared.
//
// Changes never reports false for an apply that would change the object; it
// may report true for an apply that turns out to be a no-op when a list is
// merged by a key the manager has not yet applied (it then knows nothing of
// the list's merge strategy and compares the list whole).
func Changes(current, intent *unstructured.Unstructured, manager, subresource string) (bool, error) {
	if current == nil {
		return true, nil
	}
	owned, err := Owned(current, manager, subresource)
	if err != nil {
		return false, err
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

// Owned returns the fields that manager owns on obj through server-side apply
// on subresource, as the decoded FieldsV1 tree of its managed-fields entry
// (keys such as "f:spec", "k:{\"type\":\"Ready\"}", "v:\"x\"", "."). It
// returns nil if the manager has applied nothing there.
func Owned(obj *unstructured.Unstructured, manager, subresource string) (map[string]any, error) {
	for _, e := range obj.GetManagedFields() {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != subresource {
			continue
		}
		if e.FieldsV1 == nil {
			return nil, nil
		}
		tree := map[string]any{}
		if err := json.Unmarshal(e.FieldsV1.Raw, &tree); err != nil {
			return nil, fmt.Errorf("cannot decode managed fields of %s: %w", manager, err)
		}
		return tree, nil
	}
	return nil, nil
}

// OwnsField reports whether the FieldsV1 tree owned (see Owned) holds the
// field at the supplied path of object field names, for example
// ["spec", "forProvider", "networkId"].
func OwnsField(owned map[string]any, path []string) bool {
	node := owned
	for _, name := range path {
		next, ok := node["f:"+name].(map[string]any)
		if !ok {
			return false
		}
		node = next
	}
	return node != nil && len(path) > 0
}

func child(owned map[string]any, key string) map[string]any {
	c, _ := owned[key].(map[string]any)
	return c
}

// changed walks want (the intent) alongside cur (the object) and owned (the
// manager's FieldsV1 node at the same place, or nil).
func changed(cur, want any, owned map[string]any) bool {
	switch w := want.(type) {
	case map[string]any:
		c, ok := cur.(map[string]any)
		if !ok {
			return true
		}
		for k, wv := range w {
			cv, ok := c[k]
			if !ok {
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
			return true
		}
		return listChanged(c, w, owned)
	default:
		return !Equal(cur, want)
	}
}

// listChanged compares a list. When the manager's entry shows the list is
// merged by key (k:) or by value (v:), only the intent's elements are compared
// and an owned element missing from the intent counts as a removal; otherwise
// the list is atomic and compared whole.
func listChanged(cur, want []any, owned map[string]any) bool {
	var keyFields []string
	byValue := false
	for k := range owned {
		switch {
		case strings.HasPrefix(k, "k:"):
			key := map[string]any{}
			if err := json.Unmarshal([]byte(k[2:]), &key); err != nil {
				return !Equal(cur, want)
			}
			keyFields = keyFields[:0]
			for f := range key {
				keyFields = append(keyFields, f)
			}
		case strings.HasPrefix(k, "v:"):
			byValue = true
		case strings.HasPrefix(k, "i:"):
			return !Equal(cur, want)
		}
	}
	switch {
	case len(keyFields) > 0:
		return keyedListChanged(cur, want, owned, keyFields)
	case byValue:
		for _, w := range want {
			if !containsValue(cur, w) {
				return true
			}
		}
		for k := range owned {
			raw, ok := strings.CutPrefix(k, "v:")
			if !ok {
				continue
			}
			var v any
			if err := json.Unmarshal([]byte(raw), &v); err != nil || !containsValue(want, v) {
				return true
			}
		}
		return false
	default:
		return !Equal(cur, want)
	}
}

func keyedListChanged(cur, want []any, owned map[string]any, keyFields []string) bool {
	for _, w := range want {
		wm, ok := w.(map[string]any)
		if !ok {
			return !Equal(cur, want)
		}
		key := keyOf(wm, keyFields)
		cm := findByKey(cur, key)
		if cm == nil {
			return true
		}
		if changed(cm, wm, ownedElement(owned, key)) {
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

func keyOf(m map[string]any, fields []string) map[string]any {
	key := make(map[string]any, len(fields))
	for _, f := range fields {
		key[f] = m[f]
	}
	return key
}

func matchesKey(m map[string]any, key map[string]any) bool {
	for f, v := range key {
		if !Equal(m[f], v) {
			return false
		}
	}
	return true
}

func findByKey(list []any, key map[string]any) map[string]any {
	for _, e := range list {
		if m, ok := e.(map[string]any); ok && matchesKey(m, key) {
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
		ok2 := map[string]any{}
		if err := json.Unmarshal([]byte(raw), &ok2); err != nil {
			continue
		}
		if Equal(ok2, key) {
			c, _ := v.(map[string]any)
			return c
		}
	}
	return nil
}

func containsValue(list []any, v any) bool {
	for _, e := range list {
		if Equal(e, v) {
			return true
		}
	}
	return false
}

// Equal reports whether two JSON-like values (maps, slices, strings, bools,
// numbers, nil) are equal, treating numbers of different Go types as equal
// when their values are (objects decoded from the API hold int64 and float64,
// intents may hold int).
func Equal(a, b any) bool {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for k, x := range av {
			y, ok := bv[k]
			if !ok || !Equal(x, y) {
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
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
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
