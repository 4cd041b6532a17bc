package object

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWriters(t *testing.T) {
	// nop is a NopResource with the given managed-fields entries.
	nop := func(entries ...string) string {
		return "apiVersion: nop.crossplane.io/v1alpha1\nkind: NopResource\nmetadata:\n  name: x\n  uid: u1\n  managedFields:\n  - " + strings.Join(entries, "\n  - ") + "\n"
	}
	const (
		renderer  = `{manager: loom-renderer, operation: Apply, apiVersion: nop.crossplane.io/v1alpha1, time: "2026-01-01T00:00:00Z", fieldsType: FieldsV1, fieldsV1: {"f:spec": {"f:forProvider": {}}}}`
		provider  = `{manager: provider-nop, operation: Update, subresource: status, apiVersion: nop.crossplane.io/v1alpha1, time: "2026-01-01T00:00:01Z", fieldsType: FieldsV1, fieldsV1: {"f:status": {"f:conditions": {}}}}`
		provider5 = `{manager: provider-nop, operation: Update, subresource: status, apiVersion: nop.crossplane.io/v1alpha1, time: "2026-01-01T00:00:05Z", fieldsType: FieldsV1, fieldsV1: {"f:status": {"f:conditions": {}}}}`
		binder    = `{manager: loom-binder, operation: Apply, apiVersion: nop.crossplane.io/v1alpha1, time: "2026-01-01T00:00:00Z", fieldsType: FieldsV1, fieldsV1: {"f:spec": {"f:forProvider": {"f:network": {}}}}}`
		renderer2 = `{manager: loom-renderer, operation: Apply, apiVersion: nop.crossplane.io/v1alpha1, time: "2026-01-01T00:00:00Z", fieldsType: FieldsV1, fieldsV1: {"f:spec": {"f:forProvider": {"f:size": {}}}}}`
	)
	base := nop(renderer, provider)
	cases := map[string]struct {
		reason string
		cur    string
		old    string // "" for a creation
		want   []string
	}{
		"Created": {
			reason: "A new object's writers are all its managers.",
			cur:    base,
			want:   []string{"loom-renderer", "provider-nop"},
		},
		"Unchanged": {
			reason: "No entry changed: no known writer, which means anyone.",
			old:    base,
			cur:    base,
		},
		"StatusByProvider": {
			reason: "The provider's entry moved: the provider wrote.",
			old:    base,
			cur:    nop(renderer, provider5),
			want:   []string{"provider-nop"},
		},
		"NewManager": {
			reason: "A manager that appears wrote.",
			old:    base,
			cur:    nop(renderer, binder, provider),
			want:   []string{"loom-binder"},
		},
		"FieldsWithinTheSecond": {
			reason: "A manager whose fields changed within the same second wrote.",
			old:    base,
			cur:    nop(renderer2, provider),
			want:   []string{"loom-renderer"},
		},
	}
	meta := func(y string) Meta {
		t.Helper()
		u := parse(t, y)
		return cachedMeta(t, 0, u.GroupVersionKind(), u)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var old Meta
			if tc.old != "" {
				old = meta(tc.old)
			}
			if got := Writers(old, meta(tc.cur)); !slices.Equal(got, tc.want) {
				t.Errorf("%s\nWriters(): got %v, want %v", tc.reason, got, tc.want)
			}
		})
	}

	t.Run("Metadata", func(t *testing.T) {
		at := metav1.Unix(1700000000, 0)
		later := metav1.Unix(1700000009, 0)
		obj := func(providerTime metav1.Time) Meta {
			return cachedMeta(t, 0, parse(t, base).GroupVersionKind(), &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "u1", ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "loom-renderer", Operation: metav1.ManagedFieldsOperationApply, Time: &at, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}},
				{Manager: "provider-nop", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &providerTime, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}},
			}}})
		}
		if got := Writers(obj(at), obj(later)); !slices.Equal(got, []string{"provider-nop"}) {
			t.Errorf("Writers() of metadata-only objects: got %v, want [provider-nop]", got)
		}
	})
}

// BenchmarkWritersOf measures the writers annotation of a composed resource
// with three field managers, read in place (Map) and through the typed
// entries GetManagedFields converts them to (Typed), as it was read before.
func BenchmarkWritersOf(b *testing.B) {
	entry := func(manager, op, sub, fields string) string {
		return `{manager: ` + manager + `, operation: ` + op + `, subresource: "` + sub + `", apiVersion: nop.crossplane.io/v1alpha1, time: "2026-01-01T00:00:00Z", fieldsType: FieldsV1, fieldsV1: ` + fields + `}`
	}
	y := "apiVersion: nop.crossplane.io/v1alpha1\nkind: NopResource\nmetadata:\n  name: x\n  uid: u1\n  managedFields:\n  - " + strings.Join([]string{
		entry("loom-renderer", "Apply", "", `{"f:metadata": {"f:labels": {"f:crossplane.io/composite": {}, "f:crossplane.io/claim-name": {}}, "f:ownerReferences": {"k:{\"uid\":\"u\"}": {}}}, "f:spec": {"f:forProvider": {"f:conditionAfter": {}, "f:fields": {"f:a": {}, "f:b": {}}}, "f:writeConnectionSecretToRef": {"f:name": {}, "f:namespace": {}}}}`),
		entry("provider-nop", "Update", "status", `{"f:status": {"f:atProvider": {"f:id": {}}, "f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}}, "k:{\"type\":\"Synced\"}": {".": {}, "f:status": {}}}}}`),
		entry("loom-binder", "Apply", "", `{"f:spec": {"f:forProvider": {"f:fields": {"f:network": {}, "f:networkRef": {"f:name": {}}}}}}`),
	}, "\n  - ") + "\n"
	u := parse(b, y)
	b.Run("Map", func(b *testing.B) {
		for b.Loop() {
			_ = writersOf(u)
		}
	})
	b.Run("Typed", func(b *testing.B) {
		for b.Loop() {
			_ = writersOf(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ManagedFields: u.GetManagedFields()}})
		}
	})
}
