package apply

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const manager = "loom-renderer"

// obj builds an object from JSON, with the manager's managed fields when
// owned is not empty.
func obj(t *testing.T, content, owned, subresource string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(content), &u.Object); err != nil {
		t.Fatal(err)
	}
	if owned != "" {
		u.SetManagedFields([]metav1.ManagedFieldsEntry{
			{Manager: "someone-else", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:other":{}}}`)}},
			{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, Subresource: subresource, FieldsV1: &metav1.FieldsV1{Raw: []byte(owned)}},
		})
	}
	return u
}

func TestChanges(t *testing.T) {
	cases := map[string]struct {
		reason      string
		current     string
		owned       string
		subresource string
		intent      string
		want        bool
	}{
		"NoObject": {
			reason: "An object that does not exist yet is created.",
			intent: `{"spec":{"a":1}}`,
			want:   true,
		},
		"NeverApplied": {
			reason:  "The first apply establishes ownership, even when the values match.",
			current: `{"spec":{"a":1}}`,
			intent:  `{"spec":{"a":1}}`,
			want:    true,
		},
		"Same": {
			reason:  "An intent the object already holds changes nothing.",
			current: `{"metadata":{"name":"x","labels":{"l":"v"}},"spec":{"a":1,"b":"x","other":true}}`,
			owned:   `{"f:metadata":{"f:labels":{"f:l":{}}},"f:spec":{"f:a":{},"f:b":{}}}`,
			intent:  `{"apiVersion":"v1","kind":"K","metadata":{"name":"x","labels":{"l":"v"}},"spec":{"a":1,"b":"x"}}`,
			want:    false,
		},
		"NumbersByValue": {
			reason:  "JSON numbers compare by value whatever their Go type.",
			current: `{"spec":{"a":2}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"spec":{"a":2.0}}`,
			want:    false,
		},
		"ValueChanged": {
			reason:  "A field with another value changes.",
			current: `{"spec":{"a":1}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"spec":{"a":2}}`,
			want:    true,
		},
		"Drift": {
			reason:  "A field someone else removed changes back.",
			current: `{"spec":{}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"spec":{"a":1}}`,
			want:    true,
		},
		"Removed": {
			reason:  "A field the manager applied before and no longer sends is removed.",
			current: `{"spec":{"a":1,"b":2}}`,
			owned:   `{"f:spec":{"f:a":{},"f:b":{}}}`,
			intent:  `{"spec":{"a":1}}`,
			want:    true,
		},
		"OthersFieldsIgnored": {
			reason:  "Fields of other managers and defaults are not the manager's business.",
			current: `{"spec":{"a":1,"other":"x","defaulted":{"deep":true}}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"spec":{"a":1}}`,
			want:    false,
		},
		"AtomicListSame": {
			reason:  "An atomic list equal element by element changes nothing, defaults inside elements aside.",
			current: `{"spec":{"refs":[{"name":"a","defaulted":1},{"name":"b"}]}}`,
			owned:   `{"f:spec":{"f:refs":{}}}`,
			intent:  `{"spec":{"refs":[{"name":"a"},{"name":"b"}]}}`,
			want:    false,
		},
		"AtomicListReordered": {
			reason:  "An atomic list in another order changes.",
			current: `{"spec":{"refs":[{"name":"b"},{"name":"a"}]}}`,
			owned:   `{"f:spec":{"f:refs":{}}}`,
			intent:  `{"spec":{"refs":[{"name":"a"},{"name":"b"}]}}`,
			want:    true,
		},
		"AtomicListLonger": {
			reason:  "An atomic list with an element more changes.",
			current: `{"spec":{"refs":[{"name":"a"},{"name":"b"}]}}`,
			owned:   `{"f:spec":{"f:refs":{}}}`,
			intent:  `{"spec":{"refs":[{"name":"a"}]}}`,
			want:    true,
		},
		"KeyedListSame": {
			reason:      "A list merged by key ignores other managers' elements and their order.",
			current:     `{"status":{"conditions":[{"type":"Bound","status":"True"},{"type":"Ready","status":"True","reason":"Available"}]}}`,
			owned:       `{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:type":{},"f:status":{},"f:reason":{}}}}}`,
			subresource: "status",
			intent:      `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Available"}]}}`,
			want:        false,
		},
		"KeyedListElementChanged": {
			reason:      "An element of a keyed list with another value changes.",
			current:     `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Creating"}]}}`,
			owned:       `{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:type":{},"f:status":{},"f:reason":{}}}}}`,
			subresource: "status",
			intent:      `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Available"}]}}`,
			want:        true,
		},
		"KeyedListElementRemoved": {
			reason:      "An element the manager applied and no longer sends is removed.",
			current:     `{"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"Custom","status":"True"}]}}`,
			owned:       `{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{"f:status":{}},"k:{\"type\":\"Custom\"}":{"f:status":{}}}}}`,
			subresource: "status",
			intent:      `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`,
			want:        true,
		},
		"KeyedListFieldRemoved": {
			reason:      "A field of a keyed element the manager no longer sends is removed.",
			current:     `{"status":{"conditions":[{"type":"Ready","status":"True","message":"old"}]}}`,
			owned:       `{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{"f:type":{},"f:status":{},"f:message":{}}}}}`,
			subresource: "status",
			intent:      `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`,
			want:        true,
		},
		"OwnerReferencesByUID": {
			reason:  "ownerReferences merge by uid; another owner's reference is not a change.",
			current: `{"metadata":{"ownerReferences":[{"uid":"other","name":"o"},{"uid":"xr","name":"x","controller":true}]}}`,
			owned:   `{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"xr\"}":{}}}}`,
			intent:  `{"metadata":{"ownerReferences":[{"uid":"xr","name":"x","controller":true}]}}`,
			want:    false,
		},
		"SetSame": {
			reason:  "A set compares by membership.",
			current: `{"status":{"types":["b","a","c"]}}`,
			owned:   `{"f:status":{"f:types":{"v:\"a\"":{},"v:\"b\"":{}}}}`,
			intent:  `{"status":{"types":["a","b"]}}`,
			want:    false,
		},
		"SetMemberRemoved": {
			reason:  "A set member the manager applied and no longer sends is removed.",
			current: `{"status":{"types":["a","b"]}}`,
			owned:   `{"f:status":{"f:types":{"v:\"a\"":{},"v:\"b\"":{}}}}`,
			intent:  `{"status":{"types":["a"]}}`,
			want:    true,
		},
		"OtherSubresource": {
			reason:      "Ownership of the main resource says nothing about the status subresource.",
			current:     `{"status":{"a":1}}`,
			owned:       `{"f:status":{"f:a":{}}}`,
			subresource: "",
			intent:      `{"status":{"a":1}}`,
			want:        true,
		},
		"NilIntent": {
			reason:  "A null in the intent matches a missing field.",
			current: `{"spec":{}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"spec":{"a":null}}`,
			want:    false,
		},
		"TypeChanged": {
			reason:  "A field that changes from an object to a scalar changes.",
			current: `{"spec":{"a":{"b":1}}}`,
			owned:   `{"f:spec":{"f:a":{"f:b":{}}}}`,
			intent:  `{"spec":{"a":"b"}}`,
			want:    true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var current *unstructured.Unstructured
			if tc.current != "" {
				current = obj(t, tc.current, tc.owned, tc.subresource)
			}
			intent := obj(t, tc.intent, "", "")
			sub := tc.subresource
			if name == "OtherSubresource" {
				sub = "status"
			}
			got, err := Changes(current, intent, manager, sub)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nChanges(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestOwnedBadFields(t *testing.T) {
	// Managed fields whose FieldsV1 is JSON but not an object.
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"managedFields": []any{
		map[string]any{"manager": manager, "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": []any{"not", "an", "object"}},
	}}}}
	if _, _, err := Owned(u, manager, ""); err == nil {
		t.Error("Owned(...) of undecodable managed fields: want an error")
	}
}

func TestEqual(t *testing.T) {
	cases := map[string]struct {
		reason string
		a, b   any
		want   bool
	}{
		"IntFloat":     {reason: "Numbers compare by value.", a: int64(3), b: 3.0, want: true},
		"Different":    {reason: "Different numbers differ.", a: int64(3), b: 3.5, want: false},
		"NumberString": {reason: "A number is not a string.", a: int64(3), b: "3", want: false},
		"Maps":         {reason: "Maps compare deeply.", a: map[string]any{"a": []any{int64(1)}}, b: map[string]any{"a": []any{1.0}}, want: true},
		"MapsKeys":     {reason: "Maps with other keys differ.", a: map[string]any{"a": 1}, b: map[string]any{"b": 1}, want: false},
		"Lists":        {reason: "Lists compare in order.", a: []any{"a", "b"}, b: []any{"b", "a"}, want: false},
		"JSONNumber":   {reason: "json.Number compares by value.", a: json.Number("2"), b: int64(2), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Equal(tc.a, tc.b); got != tc.want {
				t.Errorf("%s\nEqual(%v, %v) = %v, want %v", tc.reason, tc.a, tc.b, got, tc.want)
			}
		})
	}
}

// FuzzChanges checks that Changes never panics, whatever the managed fields
// and objects hold, and that an object always matches itself once owned.
func FuzzChanges(f *testing.F) {
	f.Add(`{"spec":{"a":1}}`, `{"f:spec":{"f:a":{}}}`, `{"spec":{"a":1}}`)
	f.Add(`{"status":{"conditions":[{"type":"Ready"}]}}`, `{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{}}}}`, `{"status":{"conditions":[{"type":"Ready"}]}}`)
	f.Add(`{"s":["a"]}`, `{"f:s":{"v:\"a\"":{},"k:{":{}}}`, `{"s":[1]}`)
	f.Fuzz(func(t *testing.T, current, owned, intent string) {
		c := &unstructured.Unstructured{}
		if json.Unmarshal([]byte(current), &c.Object) != nil || c.Object == nil {
			return
		}
		in := &unstructured.Unstructured{}
		if json.Unmarshal([]byte(intent), &in.Object) != nil || in.Object == nil {
			return
		}
		c.Object["metadata"] = map[string]any{}
		c.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(owned)}}})
		_, _ = Changes(c, in, manager, "")
	})
}
