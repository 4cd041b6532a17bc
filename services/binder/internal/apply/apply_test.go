package apply

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(o map[string]any, managed ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: o}
	if len(managed) > 0 {
		u.SetManagedFields(managed)
	}
	return u
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

func TestChanges(t *testing.T) {
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
			args: args{
				intent: obj(map[string]any{"spec": map[string]any{"a": "b"}}),
			},
			want: true,
		},
		"Subset": {
			reason: "An intent whose every field equals the object's changes nothing, whatever else the object holds.",
			args: args{
				current: obj(map[string]any{
					"apiVersion": "example.org/v1", "kind": "X",
					"metadata": map[string]any{"name": "x"},
					"spec":     map[string]any{"a": "b", "n": int64(3), "other": "renderer"},
				}, entry("loom-binder", "", `{"f:spec":{"f:a":{},"f:n":{}}}`)),
				intent: obj(map[string]any{
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
				current: obj(map[string]any{"spec": map[string]any{"a": "b"}}),
				intent:  obj(map[string]any{"spec": map[string]any{"a": "c"}}),
			},
			want: true,
		},
		"FieldMissing": {
			reason: "A field the object lacks changes the object.",
			args: args{
				current: obj(map[string]any{"spec": map[string]any{}}),
				intent:  obj(map[string]any{"spec": map[string]any{"a": "c"}}),
			},
			want: true,
		},
		"OwnedFieldDropped": {
			reason: "A field the manager applied before and the intent no longer sets is removed by the apply.",
			args: args{
				current: obj(map[string]any{"spec": map[string]any{"a": "b", "gone": "x"}},
					entry("loom-binder", "", `{"f:spec":{"f:a":{},"f:gone":{}}}`)),
				intent: obj(map[string]any{"spec": map[string]any{"a": "b"}}),
			},
			want: true,
		},
		"OtherManagerFieldIgnored": {
			reason: "Fields other managers own are not the intent's business.",
			args: args{
				current: obj(map[string]any{"spec": map[string]any{"a": "b", "theirs": "x"}},
					entry("loom-binder", "", `{"f:spec":{"f:a":{}}}`),
					entry("loom-renderer", "", `{"f:spec":{"f:theirs":{}}}`)),
				intent: obj(map[string]any{"spec": map[string]any{"a": "b"}}),
			},
			want: false,
		},
		"StatusEntrySeparate": {
			reason: "A status apply consults the manager's status entry, not its main-resource entry.",
			args: args{
				current: obj(map[string]any{"spec": map[string]any{"a": "b"}, "status": map[string]any{"s": "1"}},
					entry("loom-binder", "", `{"f:spec":{"f:a":{}}}`),
					entry("loom-binder", "status", `{"f:status":{"f:s":{}}}`)),
				intent:      obj(map[string]any{"status": map[string]any{"s": "1"}}),
				subresource: "status",
			},
			want: false,
		},
		"KeyedListSubset": {
			reason: "Conditions are merged by type: other writers' conditions do not make the intent differ.",
			args: args{
				current: obj(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Ready", "status": "True"},
					map[string]any{"type": "Mine", "status": "False", "reason": "Waiting"},
				}}}, entry("loom-binder", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"Mine\"}":{".":{},"f:type":{},"f:status":{},"f:reason":{}}}}}`)),
				intent: obj(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Mine", "status": "False", "reason": "Waiting"},
				}}}),
				subresource: "status",
			},
			want: false,
		},
		"KeyedListElementDropped": {
			reason: "A condition the manager applied and no longer sets is removed by the apply.",
			args: args{
				current: obj(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Custom", "status": "True"},
					map[string]any{"type": "Mine", "status": "True"},
				}}}, entry("loom-binder", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"Mine\"}":{".":{},"f:type":{},"f:status":{}},"k:{\"type\":\"Custom\"}":{".":{},"f:type":{},"f:status":{}}}}}`)),
				intent: obj(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Mine", "status": "True"},
				}}}),
				subresource: "status",
			},
			want: true,
		},
		"KeyedListElementFieldDropped": {
			reason: "A field of a keyed element the manager applied and no longer sets is removed by the apply.",
			args: args{
				current: obj(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Mine", "status": "True", "message": "old"},
				}}}, entry("loom-binder", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"Mine\"}":{".":{},"f:type":{},"f:status":{},"f:message":{}}}}}`)),
				intent: obj(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Mine", "status": "True"},
				}}}),
				subresource: "status",
			},
			want: true,
		},
		"KeyedListElementDiffers": {
			reason: "A keyed element whose fields differ changes the object.",
			args: args{
				current: obj(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Mine", "status": "False"},
				}}}, entry("loom-binder", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"Mine\"}":{".":{},"f:type":{},"f:status":{}}}}}`)),
				intent: obj(map[string]any{"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Mine", "status": "True"},
				}}}),
				subresource: "status",
			},
			want: true,
		},
		"SetListSubset": {
			reason: "A list merged by value changes nothing when every intended value is present.",
			args: args{
				current: obj(map[string]any{"metadata": map[string]any{"finalizers": []any{"other", "mine"}}},
					entry("loom-binder", "", `{"f:metadata":{"f:finalizers":{"v:\"mine\"":{}}}}`)),
				intent: obj(map[string]any{"metadata": map[string]any{"finalizers": []any{"mine"}}}),
			},
			want: false,
		},
		"SetListValueDropped": {
			reason: "A value the manager applied and no longer sets is removed by the apply.",
			args: args{
				current: obj(map[string]any{"metadata": map[string]any{"finalizers": []any{"old", "mine"}}},
					entry("loom-binder", "", `{"f:metadata":{"f:finalizers":{"v:\"mine\"":{},"v:\"old\"":{}}}}`)),
				intent: obj(map[string]any{"metadata": map[string]any{"finalizers": []any{"mine"}}}),
			},
			want: true,
		},
		"AtomicListDiffers": {
			reason: "A list with no keyed entries is atomic and compared whole.",
			args: args{
				current: obj(map[string]any{"spec": map[string]any{"l": []any{"a", "b"}}},
					entry("loom-binder", "", `{"f:spec":{"f:l":{}}}`)),
				intent: obj(map[string]any{"spec": map[string]any{"l": []any{"a"}}}),
			},
			want: true,
		},
		"AtomicListEqual": {
			reason: "An atomic list equal element by element changes nothing.",
			args: args{
				current: obj(map[string]any{"spec": map[string]any{"l": []any{map[string]any{"name": "a", "n": float64(1)}}}},
					entry("loom-binder", "", `{"f:spec":{"f:l":{}}}`)),
				intent: obj(map[string]any{"spec": map[string]any{"l": []any{map[string]any{"name": "a", "n": int64(1)}}}}),
			},
			want: false,
		},
		"TypeMismatch": {
			reason: "A map where the object holds a scalar changes the object.",
			args: args{
				current: obj(map[string]any{"spec": "scalar"}),
				intent:  obj(map[string]any{"spec": map[string]any{"a": "b"}}),
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

func TestOwnsField(t *testing.T) {
	u := obj(map[string]any{}, entry("loom-binder", "", `{"f:spec":{"f:forProvider":{"f:networkId":{}}}}`))
	owned, err := Owned(u, "loom-binder", "")
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

func FuzzChanges(f *testing.F) {
	f.Add(`{"f:spec":{"f:a":{}}}`)
	f.Add(`{"f:status":{"f:conditions":{"k:{\"type\":\"Mine\"}":{".":{}}}}}`)
	f.Add(`{"f:l":{"v:\"x\"":{},"i:0":{}}}`)
	f.Fuzz(func(t *testing.T, fields string) {
		cur := obj(map[string]any{"spec": map[string]any{"a": "b", "l": []any{"x"}}}, entry("m", "", fields))
		intent := obj(map[string]any{"spec": map[string]any{"a": "b", "l": []any{"x"}}})
		// Must not panic; a malformed entry may only yield an error.
		_, _ = Changes(cur, intent, "m", "")
	})
}
