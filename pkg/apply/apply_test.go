package apply

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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

// TestChanges holds the renderer's former cases and those the merged
// semantics add, each object with one other manager's Update entry and,
// when owned is set, the manager's Apply entry. Where a former package
// answered otherwise, the reason says which answer is right and why.
func TestChanges(t *testing.T) {
	cases := map[string]struct {
		reason      string
		current     string
		owned       string
		subresource string
		applyTo     string
		intent      string
		want        bool
	}{
		"NoObject": {
			reason: "An object that does not exist yet is created.",
			intent: `{"spec":{"a":1}}`,
			want:   true,
		},
		"NeverApplied": {
			reason: "An object holding every value of the intent changes nothing, although the manager never applied to it: " +
				"the apply would only record the manager as an owner. (The renderer's former package and the first kit " +
				"wrote here to establish ownership; on the API server that was a write for every object another writer " +
				"created, and the binder's tests counted it as an extra apply.)",
			current: `{"spec":{"a":1}}`,
			intent:  `{"spec":{"a":1}}`,
			want:    false,
		},
		"NotOwnedSameValue": {
			reason: "A field the manager does not own, holding the intended value, changes nothing: applying it shares " +
				"ownership and leaves the value. (The first kit counted it as a change.)",
			current: `{"spec":{"a":1,"b":2}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"spec":{"a":1,"b":2}}`,
			want:    false,
		},
		"NotOwnedOtherValue": {
			reason:  "A field the manager does not own, holding another value, changes: the apply takes it.",
			current: `{"spec":{"a":1,"other":"theirs"}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"spec":{"a":1,"other":"mine"}}`,
			want:    true,
		},
		"Same": {
			reason:  "An intent the object already holds changes nothing; metadata.name is never recorded as owned.",
			current: `{"metadata":{"name":"x","labels":{"l":"v"}},"spec":{"a":1,"b":"x","other":true}}`,
			owned:   `{"f:metadata":{"f:labels":{"f:l":{}}},"f:spec":{"f:a":{},"f:b":{}}}`,
			intent:  `{"apiVersion":"v1","kind":"K","metadata":{"name":"x","labels":{"l":"v"}},"spec":{"a":1,"b":"x"}}`,
			want:    false,
		},
		"IdentityOnly": {
			reason:  "An intent of identity fields only changes nothing once the manager has an entry.",
			current: `{"metadata":{"name":"x","namespace":"ns"},"spec":{"a":1}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"metadata":{"name":"x","namespace":"ns"},"spec":{"a":1}}`,
			want:    false,
		},
		"MetadataValueDiffers": {
			reason:  "Identity fields are not owned but still compared by value.",
			current: `{"metadata":{"name":"x"},"spec":{"a":1}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"metadata":{"name":"y"},"spec":{"a":1}}`,
			want:    true,
		},
		"LabelNotOwned": {
			reason:  "A label the manager does not own, with the intended value, changes nothing.",
			current: `{"metadata":{"name":"x","labels":{"l":"v"}},"spec":{"a":1}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"metadata":{"name":"x","labels":{"l":"v"}},"spec":{"a":1}}`,
			want:    false,
		},
		"LabelOtherValue": {
			reason:  "A label with another value changes.",
			current: `{"metadata":{"name":"x","labels":{"l":"v"}},"spec":{"a":1}}`,
			owned:   `{"f:metadata":{"f:labels":{"f:l":{}}},"f:spec":{"f:a":{}}}`,
			intent:  `{"metadata":{"name":"x","labels":{"l":"w"}},"spec":{"a":1}}`,
			want:    true,
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
			reason: "An atomic list the manager owns, equal element by element, changes nothing, fields defaulted inside " +
				"elements aside: nobody else can have changed an atomic list the manager still owns. (The binder's former " +
				"package compared the elements whole and wrote again on every reconcile.)",
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
		"AtomicListNotOwned": {
			reason:  "A list no entry records, equal to the intent's, changes nothing. (The first kit counted it as a change.)",
			current: `{"spec":{"a":1,"refs":[{"name":"a"}]}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"spec":{"a":1,"refs":[{"name":"a"}]}}`,
			want:    false,
		},
		"AtomicListNotOwnedMore": {
			reason: "A list the manager's entries do not record, whose element holds a field the intent does not set, " +
				"changes: the apply replaces the list whole, and nothing says the field is a default.",
			current: `{"spec":{"a":1,"refs":[{"name":"a","theirs":true}]}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"spec":{"a":1,"refs":[{"name":"a"}]}}`,
			want:    true,
		},
		"AtomicMapSame": {
			reason:  "A map owned without owned children is atomic and compared like an atomic list's element.",
			current: `{"spec":{"ref":{"name":"a","defaulted":true}}}`,
			owned:   `{"f:spec":{"f:ref":{}}}`,
			intent:  `{"spec":{"ref":{"name":"a"}}}`,
			want:    false,
		},
		"AtomicMapChanged": {
			reason:  "An atomic map with another value changes.",
			current: `{"spec":{"ref":{"name":"a"}}}`,
			owned:   `{"f:spec":{"f:ref":{}}}`,
			intent:  `{"spec":{"ref":{"name":"b"}}}`,
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
		"KeyedListElementNotOwned": {
			reason: "An element another writer added, equal to the intent's, changes nothing: the apply would share it. " +
				"(The first kit counted it as a change.)",
			current:     `{"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"Synced","status":"True"}]}}`,
			owned:       `{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:type":{},"f:status":{}}}}}`,
			subresource: "status",
			intent:      `{"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"Synced","status":"True"}]}}`,
			want:        false,
		},
		"KeyedListElementMissing": {
			reason:      "An element the object lacks changes.",
			current:     `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`,
			owned:       `{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:type":{},"f:status":{}}}}}`,
			subresource: "status",
			intent:      `{"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"Synced","status":"True"}]}}`,
			want:        true,
		},
		"KeyedListElementRemoved": {
			reason:      "An element the manager applied and no longer sends is removed.",
			current:     `{"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"Custom","status":"True"}]}}`,
			owned:       `{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{"f:type":{},"f:status":{}},"k:{\"type\":\"Custom\"}":{"f:type":{},"f:status":{}}}}}`,
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
			reason: "ownerReferences merge by uid; another owner's reference is not a change. An ownerReference is an " +
				"atomic struct, so the API server records the element without its fields, as here; its fields count as " +
				"the manager's. (The first kit's fixture recorded every field, and on the API server it saw each field " +
				"as unowned: two writes for an unchanged XRD's CRDs, three for an unchanged XR's composed resources.)",
			current: `{"metadata":{"ownerReferences":[{"uid":"other","name":"o"},{"uid":"xr","name":"x","controller":true,"blockOwnerDeletion":true}]}}`,
			owned:   `{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"xr\"}":{}}}}`,
			intent:  `{"metadata":{"ownerReferences":[{"uid":"xr","name":"x","controller":true,"blockOwnerDeletion":true}]}}`,
			want:    false,
		},
		"OwnerReferenceChanged": {
			reason:  "An ownerReference compares whole: one with another value changes.",
			current: `{"metadata":{"ownerReferences":[{"uid":"xr","name":"x","controller":false}]}}`,
			owned:   `{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"xr\"}":{}}}}`,
			intent:  `{"metadata":{"ownerReferences":[{"uid":"xr","name":"x","controller":true}]}}`,
			want:    true,
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
		"SetMemberNotOwned": {
			reason:  "A member another writer added, which the intent now holds too, changes nothing: the apply would share it.",
			current: `{"metadata":{"finalizers":["other","mine"]}}`,
			owned:   `{"f:metadata":{"f:finalizers":{"v:\"mine\"":{}}}}`,
			intent:  `{"metadata":{"finalizers":["mine","other"]}}`,
			want:    false,
		},
		"SetMemberMissing": {
			reason:  "A member the object lacks changes.",
			current: `{"metadata":{"finalizers":["other"]}}`,
			owned:   `{"f:metadata":{"f:finalizers":{"v:\"other\"":{}}}}`,
			intent:  `{"metadata":{"finalizers":["other","mine"]}}`,
			want:    true,
		},
		"OtherSubresource": {
			reason:  "A field the manager applied through the main resource is not removed by a status apply that drops it.",
			current: `{"status":{"a":1,"b":2}}`,
			owned:   `{"f:status":{"f:a":{},"f:b":{}}}`,
			applyTo: "status",
			intent:  `{"status":{"a":1}}`,
			want:    false,
		},
		"NilIntent": {
			reason:  "A null in the intent is owned and matches a missing field.",
			current: `{"spec":{}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"spec":{"a":null}}`,
			want:    false,
		},
		"NilIntentRemoves": {
			reason:  "A null in the intent removes a field the object holds.",
			current: `{"spec":{"a":1}}`,
			owned:   `{"f:spec":{"f:a":{}}}`,
			intent:  `{"spec":{"a":null}}`,
			want:    true,
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
			if tc.applyTo != "" {
				sub = tc.applyTo
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

func entry(manager, subresource, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{
		Manager:     manager,
		Operation:   metav1.ManagedFieldsOperationApply,
		Subresource: subresource,
		FieldsType:  "FieldsV1",
		FieldsV1:    &metav1.FieldsV1{Raw: []byte(fields)},
	}
}

// update is an entry that a create or an update (not an apply) recorded.
func update(manager, subresource, fields string) metav1.ManagedFieldsEntry {
	e := entry(manager, subresource, fields)
	e.Operation = metav1.ManagedFieldsOperationUpdate
	return e
}

func object(o map[string]any, managed ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: o}
	if len(managed) > 0 {
		u.SetManagedFields(managed)
	}
	return u
}

// TestChangesEntries holds the binder's former cases and the cases of who
// recorded a field, built from Go values and several managers' entries.
func TestChangesEntries(t *testing.T) {
	type args struct {
		current     *unstructured.Unstructured
		intent      *unstructured.Unstructured
		subresource string
	}
	cases := map[string]struct {
		reason string
		args   args
		want   bool
	}{
		"NoCurrent": {
			reason: "An object that does not exist is always changed by an apply.",
			args:   args{intent: object(map[string]any{"spec": map[string]any{"a": "b"}})},
			want:   true,
		},
		"Subset": {
			reason: "An intent whose every field the manager owns and the object holds changes nothing, whatever else the object holds.",
			args: args{
				current: object(map[string]any{
					"apiVersion": "example.org/v1", "kind": "X",
					"metadata": map[string]any{"name": "x"},
					"spec":     map[string]any{"a": "b", "n": int64(3), "other": "renderer"},
				}, entry("loom-binder", "", `{"f:spec":{"f:a":{},"f:n":{}}}`)),
				intent: object(map[string]any{
					"apiVersion": "example.org/v1", "kind": "X",
					"metadata": map[string]any{"name": "x"},
					"spec":     map[string]any{"a": "b", "n": 3},
				}),
			},
			want: false,
		},
		"ValueDiffers": {
			reason: "A field whose value differs changes the object.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b"}}, entry("loom-binder", "", `{"f:spec":{"f:a":{}}}`)),
				intent:  object(map[string]any{"spec": map[string]any{"a": "c"}}),
			},
			want: true,
		},
		"FieldMissing": {
			reason: "A field the object lacks changes the object.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{}}, entry("loom-binder", "", `{"f:spec":{"f:a":{}}}`)),
				intent:  object(map[string]any{"spec": map[string]any{"a": "c"}}),
			},
			want: true,
		},
		"OwnedFieldDropped": {
			reason: "A field the manager applied before and the intent no longer sets is removed by the apply.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b", "gone": "x"}},
					entry("loom-binder", "", `{"f:spec":{"f:a":{},"f:gone":{}}}`)),
				intent: object(map[string]any{"spec": map[string]any{"a": "b"}}),
			},
			want: true,
		},
		"OtherManagerFieldIgnored": {
			reason: "Fields other managers own are not the intent's business.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b", "theirs": "x"}},
					entry("loom-binder", "", `{"f:spec":{"f:a":{}}}`),
					entry("loom-renderer", "", `{"f:spec":{"f:theirs":{}}}`)),
				intent: object(map[string]any{"spec": map[string]any{"a": "b"}}),
			},
			want: false,
		},
		"OtherManagerOwnsIntendedField": {
			reason: "A field only another manager applied, holding the intended value, changes nothing: the apply would " +
				"share its ownership and leave the object as it is. This is what the renderer needed: its former package " +
				"compared values once it had an entry, and the first kit, which wrote here, made its unchanged XRs write. " +
				"(The binder's former package said unchanged too.)",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b", "theirs": "x"}},
					entry("loom-binder", "", `{"f:spec":{"f:a":{}}}`),
					entry("loom-renderer", "", `{"f:spec":{"f:theirs":{}}}`)),
				intent: object(map[string]any{"spec": map[string]any{"a": "b", "theirs": "x"}}),
			},
			want: false,
		},
		"OtherManagerOwnsIntendedFieldOtherValue": {
			reason: "A field another manager applied, holding another value than the intent's, changes: the apply takes it.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b", "theirs": "x"}},
					entry("loom-binder", "", `{"f:spec":{"f:a":{}}}`),
					entry("loom-renderer", "", `{"f:spec":{"f:theirs":{}}}`)),
				intent: object(map[string]any{"spec": map[string]any{"a": "b", "theirs": "y"}}),
			},
			want: true,
		},
		"OwnUpdateEntry": {
			reason: "A field the manager set by a create or an update, recorded under its Update entry, holding the " +
				"intended value, changes nothing. (The first kit counted it as unowned: the binder applied again to " +
				"every XR it had just created.)",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b", "n": int64(3)}},
					update("loom-binder", "", `{"f:spec":{".":{},"f:a":{},"f:n":{}}}`)),
				intent: object(map[string]any{"spec": map[string]any{"a": "b", "n": 3}}),
			},
			want: false,
		},
		"OwnUpdateEntryValueDiffers": {
			reason: "A field under the manager's Update entry holding another value changes.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b"}},
					update("loom-binder", "", `{"f:spec":{".":{},"f:a":{}}}`)),
				intent: object(map[string]any{"spec": map[string]any{"a": "c"}}),
			},
			want: true,
		},
		"OwnUpdateEntryNotRemoved": {
			reason: "A field the manager recorded by an update and the intent does not set is not removed by an apply: " +
				"only the manager's Apply entry says what an apply removes.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b", "old": "x"}},
					update("loom-binder", "", `{"f:spec":{".":{},"f:a":{},"f:old":{}}}`)),
				intent: object(map[string]any{"spec": map[string]any{"a": "b"}}),
			},
			want: false,
		},
		"NeverRecorded": {
			reason: "A value no entry records (no managed fields at all, as the binder's fakes hold), equal to the " +
				"intent's, changes nothing.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b", "l": []any{"x", "y"}}}),
				intent:  object(map[string]any{"spec": map[string]any{"a": "b", "l": []any{"x", "y"}}}),
			},
			want: false,
		},
		"NeverRecordedValueDiffers": {
			reason: "A value no entry records, different from the intent's, changes.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b"}}),
				intent:  object(map[string]any{"spec": map[string]any{"a": "c"}}),
			},
			want: true,
		},
		"OwnUpdateAtomicListDefaults": {
			reason: "An atomic list the manager created, whose elements hold fields the API server defaulted, changes " +
				"nothing: while the manager's Update entry records it nobody else changed it.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"l": []any{map[string]any{"name": "a", "port": int64(80)}}}},
					update("loom-binder", "", `{"f:spec":{".":{},"f:l":{}}}`)),
				intent: object(map[string]any{"spec": map[string]any{"l": []any{map[string]any{"name": "a"}}}}),
			},
			want: false,
		},
		"OthersAtomicListMore": {
			reason: "An atomic list another manager applied, whose element holds a field the intent does not set, " +
				"changes: the apply takes the list and replaces it whole.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b", "l": []any{map[string]any{"name": "a", "port": int64(80)}}}},
					entry("loom-binder", "", `{"f:spec":{"f:a":{}}}`),
					entry("loom-renderer", "", `{"f:spec":{"f:l":{}}}`)),
				intent: object(map[string]any{"spec": map[string]any{"a": "b", "l": []any{map[string]any{"name": "a"}}}}),
			},
			want: true,
		},
		"OthersAtomicMapMore": {
			reason: "A map another manager applied as one value (recorded without fields), holding a key the intent " +
				"does not set, changes: the apply replaces it whole.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b", "sel": map[string]any{"app": "x", "tier": "y"}}},
					entry("loom-binder", "", `{"f:spec":{"f:a":{}}}`),
					entry("loom-renderer", "", `{"f:spec":{"f:sel":{}}}`)),
				intent: object(map[string]any{"spec": map[string]any{"a": "b", "sel": map[string]any{"app": "x"}}}),
			},
			want: true,
		},
		"OthersGranularMap": {
			reason: "A map another manager applied field by field, holding a key the intent does not set, changes " +
				"nothing: the apply merges into it.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b", "labels": map[string]any{"app": "x", "tier": "y"}}},
					entry("loom-binder", "", `{"f:spec":{"f:a":{}}}`),
					entry("loom-renderer", "", `{"f:spec":{"f:labels":{"f:app":{},"f:tier":{}}}}`)),
				intent: object(map[string]any{"spec": map[string]any{"a": "b", "labels": map[string]any{"app": "x"}}}),
			},
			want: false,
		},
		"KeyedByOthersEntries": {
			reason: "A list the manager never applied elements to merges by key when another entry records it so: " +
				"other writers' conditions do not make it differ. (The first kit read the merge only from the manager's " +
				"own entry, compared the list whole and wrote.)",
			args: args{
				current: object(map[string]any{"status": map[string]any{"phase": "Bound", "conditions": []any{
					map[string]any{"type": "Ready", "status": "True"},
					map[string]any{"type": "Mine", "status": "True"},
				}}}, entry("loom-binder", "status", `{"f:status":{"f:phase":{}}}`), entry("loom-renderer", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:type":{},"f:status":{}},"k:{\"type\":\"Mine\"}":{".":{},"f:type":{},"f:status":{}}}}}`)),
				intent: object(map[string]any{"status": map[string]any{"phase": "Bound", "conditions": []any{
					map[string]any{"type": "Mine", "status": "True"},
				}}}),
				subresource: "status",
			},
			want: false,
		},
		"StatusEntrySeparate": {
			reason: "A status apply consults the manager's status entry, not its main-resource entry.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"a": "b"}, "status": map[string]any{"s": "1"}},
					entry("loom-binder", "", `{"f:spec":{"f:a":{}}}`),
					entry("loom-binder", "status", `{"f:status":{"f:s":{}}}`)),
				intent:      object(map[string]any{"status": map[string]any{"s": "1"}}),
				subresource: "status",
			},
			want: false,
		},
		"KeyedListSubset": {
			reason: "Conditions are merged by type: other writers' conditions do not make the intent differ.",
			args: args{
				current: object(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Ready", "status": "True"},
					map[string]any{"type": "Mine", "status": "False", "reason": "Waiting"},
				}}}, entry("loom-binder", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"Mine\"}":{".":{},"f:type":{},"f:status":{},"f:reason":{}}}}}`)),
				intent: object(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Mine", "status": "False", "reason": "Waiting"},
				}}}),
				subresource: "status",
			},
			want: false,
		},
		"KeyedListElementDropped": {
			reason: "A condition the manager applied and no longer sets is removed by the apply.",
			args: args{
				current: object(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Custom", "status": "True"},
					map[string]any{"type": "Mine", "status": "True"},
				}}}, entry("loom-binder", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"Mine\"}":{".":{},"f:type":{},"f:status":{}},"k:{\"type\":\"Custom\"}":{".":{},"f:type":{},"f:status":{}}}}}`)),
				intent: object(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Mine", "status": "True"},
				}}}),
				subresource: "status",
			},
			want: true,
		},
		"KeyedListElementFieldDropped": {
			reason: "A field of a keyed element the manager applied and no longer sets is removed by the apply.",
			args: args{
				current: object(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Mine", "status": "True", "message": "old"},
				}}}, entry("loom-binder", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"Mine\"}":{".":{},"f:type":{},"f:status":{},"f:message":{}}}}}`)),
				intent: object(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Mine", "status": "True"},
				}}}),
				subresource: "status",
			},
			want: true,
		},
		"KeyedListElementDiffers": {
			reason: "A keyed element whose fields differ changes the object.",
			args: args{
				current: object(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Mine", "status": "False"},
				}}}, entry("loom-binder", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"Mine\"}":{".":{},"f:type":{},"f:status":{}}}}}`)),
				intent: object(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Mine", "status": "True"},
				}}}),
				subresource: "status",
			},
			want: true,
		},
		"SetListSubset": {
			reason: "A list merged by value changes nothing when every intended value is present and owned.",
			args: args{
				current: object(map[string]any{"metadata": map[string]any{"finalizers": []any{"other", "mine"}}},
					entry("loom-binder", "", `{"f:metadata":{"f:finalizers":{"v:\"mine\"":{}}}}`)),
				intent: object(map[string]any{"metadata": map[string]any{"finalizers": []any{"mine"}}}),
			},
			want: false,
		},
		"SetListValueDropped": {
			reason: "A value the manager applied and no longer sets is removed by the apply.",
			args: args{
				current: object(map[string]any{"metadata": map[string]any{"finalizers": []any{"old", "mine"}}},
					entry("loom-binder", "", `{"f:metadata":{"f:finalizers":{"v:\"mine\"":{},"v:\"old\"":{}}}}`)),
				intent: object(map[string]any{"metadata": map[string]any{"finalizers": []any{"mine"}}}),
			},
			want: true,
		},
		"AtomicListDiffers": {
			reason: "A list with no keyed entries is atomic and compared whole.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"l": []any{"a", "b"}}},
					entry("loom-binder", "", `{"f:spec":{"f:l":{}}}`)),
				intent: object(map[string]any{"spec": map[string]any{"l": []any{"a"}}}),
			},
			want: true,
		},
		"AtomicListEqual": {
			reason: "An atomic list equal element by element changes nothing.",
			args: args{
				current: object(map[string]any{"spec": map[string]any{"l": []any{map[string]any{"name": "a", "n": float64(1)}}}},
					entry("loom-binder", "", `{"f:spec":{"f:l":{}}}`)),
				intent: object(map[string]any{"spec": map[string]any{"l": []any{map[string]any{"name": "a", "n": int64(1)}}}}),
			},
			want: false,
		},
		"TypeMismatch": {
			reason: "A map where the object holds a scalar changes the object.",
			args: args{
				current: object(map[string]any{"spec": "scalar"}, entry("loom-binder", "", `{"f:spec":{"f:a":{}}}`)),
				intent:  object(map[string]any{"spec": map[string]any{"a": "b"}}),
			},
			want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Changes(tc.args.current, tc.args.intent, "loom-binder", tc.args.subresource)
			if err != nil {
				t.Fatalf("\n%s\nChanges(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nChanges(...): -want, +got:\n%s", tc.reason, diff)
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

func TestChangesBadEntries(t *testing.T) {
	bad := func(manager string) metav1.ManagedFieldsEntry {
		e := entry(manager, "", `{}`)
		e.FieldsV1.Raw = []byte(`["not","an","object"]`)
		return e
	}
	cases := map[string]struct {
		reason  string
		current *unstructured.Unstructured
		want    bool
		wantErr error
	}{
		"Own": {
			reason:  "The manager's own entry that cannot be decoded is an error: it may hold what an apply removes.",
			current: object(map[string]any{"spec": map[string]any{"a": "b"}}, bad("loom-binder")),
			want:    true,
			wantErr: cmpopts.AnyError,
		},
		"Others": {
			reason:  "Another manager's entry that cannot be decoded is skipped: it only tells how lists merge.",
			current: object(map[string]any{"spec": map[string]any{"a": "b"}}, bad("loom-renderer")),
			want:    false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Changes(tc.current, object(map[string]any{"spec": map[string]any{"a": "b"}}), "loom-binder", "")
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("\n%s\nChanges(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nChanges(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestOwnsField(t *testing.T) {
	u := object(map[string]any{}, entry("loom-binder", "", `{"f:spec":{"f:forProvider":{"f:networkId":{}}}}`))
	owned, _, err := Owned(u, "loom-binder", "")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		path   []string
		want   bool
	}{
		"Owned":    {reason: "A leaf the manager applied is owned.", path: []string{"spec", "forProvider", "networkId"}, want: true},
		"Parent":   {reason: "A parent of an owned leaf counts as owned.", path: []string{"spec", "forProvider"}, want: true},
		"NotOwned": {reason: "A field the manager never applied is not owned.", path: []string{"spec", "forProvider", "networkRef"}, want: false},
		"Empty":    {reason: "The empty path is never owned.", path: nil, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, OwnsField(owned, tc.path)); diff != "" {
				t.Errorf("\n%s\nOwnsField(%v): -want, +got:\n%s", tc.reason, tc.path, diff)
			}
		})
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
			if diff := cmp.Diff(tc.want, Equal(tc.a, tc.b)); diff != "" {
				t.Errorf("%s\nEqual(%v, %v): -want, +got:\n%s", tc.reason, tc.a, tc.b, diff)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	cases := map[string]struct {
		reason    string
		cur, want any
		match     bool
	}{
		"Superset":    {reason: "Fields the intent does not set do not count.", cur: map[string]any{"a": 1, "b": 2}, want: map[string]any{"a": int64(1)}, match: true},
		"Missing":     {reason: "A field the object lacks does not match.", cur: map[string]any{}, want: map[string]any{"a": 1}, match: false},
		"NilMissing":  {reason: "A nil intent value matches a missing field.", cur: map[string]any{}, want: map[string]any{"a": nil}, match: true},
		"NilPresent":  {reason: "A nil intent value does not match a set field.", cur: map[string]any{"a": 1}, want: map[string]any{"a": nil}, match: false},
		"ListLength":  {reason: "Lists of other lengths do not match.", cur: []any{1, 2}, want: []any{1}, match: false},
		"ListDefault": {reason: "List elements match as maps do.", cur: []any{map[string]any{"a": 1, "d": true}}, want: []any{map[string]any{"a": 1}}, match: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.match, Matches(tc.cur, tc.want)); diff != "" {
				t.Errorf("%s\nMatches(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// FuzzChanges checks that Changes never panics, whatever the managed fields
// and objects hold.
func FuzzChanges(f *testing.F) {
	f.Add(`{"spec":{"a":1}}`, `{"f:spec":{"f:a":{}}}`, `{"spec":{"a":1}}`)
	f.Add(`{"status":{"conditions":[{"type":"Ready"}]}}`, `{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{}}}}`, `{"status":{"conditions":[{"type":"Ready"}]}}`)
	f.Add(`{"s":["a"]}`, `{"f:s":{"v:\"a\"":{},"k:{":{}}}`, `{"s":[1]}`)
	f.Add(`{"spec":{"a":"b","l":["x"]}}`, `{"f:l":{"v:\"x\"":{},"i:0":{}}}`, `{"spec":{"a":"b","l":["x"]}}`)
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
