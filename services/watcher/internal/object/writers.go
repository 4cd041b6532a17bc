package object

import (
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationWriters is kept on every cached object, beside AnnotationDigest:
// one entry per managed-fields entry of the object, "<manager>=<digest>",
// sorted and joined by ';', where the digest covers the entry's operation,
// subresource, time and fields. Comparing two versions tells which field
// managers made a change (Writers). Like the digest it exists only in the
// watcher's cache.
const AnnotationWriters = "loom.dev/watcher-writers"

// writersOf returns the AnnotationWriters value of an object, unstructured
// or metadata-only; an object that was cached already (no managed fields,
// the annotation set) keeps its value.
func writersOf(o metav1.Object) string {
	if u, ok := o.(*unstructured.Unstructured); ok {
		// Read in place: GetManagedFields converts every entry to the
		// typed struct, encoding each fields tree to JSON on the way.
		if entries, ok := managedFieldsOf(u); ok {
			if len(entries) == 0 {
				return o.GetAnnotations()[AnnotationWriters]
			}
			return writersOfMaps(entries)
		}
	}
	entries := o.GetManagedFields()
	if len(entries) == 0 {
		return o.GetAnnotations()[AnnotationWriters]
	}
	out := make([]string, 0, len(entries))
	for _, m := range entries {
		h := fnv.New64a()
		for _, s := range []string{string(m.Operation), m.Subresource, m.APIVersion} {
			_, _ = io.WriteString(h, s)
			_, _ = h.Write([]byte{0})
		}
		if m.Time != nil {
			_, _ = io.WriteString(h, m.Time.UTC().Format(time.RFC3339))
		}
		_, _ = h.Write([]byte{0})
		if m.FieldsV1 != nil {
			_, _ = h.Write(m.FieldsV1.Raw)
		}
		out = append(out, entry(m.Manager, h.Sum64()))
	}
	return join(out)
}

// managedFieldsOf returns the managedFields entries of u as maps, and false
// when they are not all maps (the typed reading then says what it makes of
// them).
func managedFieldsOf(u *unstructured.Unstructured) ([]map[string]any, bool) {
	md, _ := u.Object["metadata"].(map[string]any)
	raw, _ := md["managedFields"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, e := range raw {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		out = append(out, m)
	}
	return out, true
}

// writersOfMaps is writersOf of managedFields entries read as maps: the
// digest covers the same parts (the fields tree hashed in key order rather
// than as JSON, the time as the API server wrote it), so two versions of an
// object compare as they do through the typed entries.
func writersOfMaps(entries []map[string]any) string {
	out := make([]string, 0, len(entries))
	for _, m := range entries {
		h := newFNV()
		for _, k := range []string{"operation", "subresource", "apiVersion", "time"} {
			s, _ := m[k].(string)
			h.str(s)
			h.byte(0)
		}
		h.tree(m["fieldsV1"])
		manager, _ := m["manager"].(string)
		out = append(out, entry(manager, uint64(h)))
	}
	return join(out)
}

// fnv64a is FNV-1a, 64 bits, written to without allocating.
type fnv64a uint64

func newFNV() fnv64a { return 14695981039346656037 }

func (h *fnv64a) byte(b byte) {
	*h ^= fnv64a(b)
	*h *= 1099511628211
}

func (h *fnv64a) str(s string) {
	for i := 0; i < len(s); i++ {
		h.byte(s[i])
	}
}

// tree writes a fields tree (maps of maps) in key order; other values,
// which fields trees do not hold, by their printed form.
func (h *fnv64a) tree(v any) {
	switch t := v.(type) {
	case nil:
		h.byte('n')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		h.byte('{')
		for _, k := range keys {
			h.str(k)
			h.byte(0)
			h.tree(t[k])
		}
		h.byte('}')
	default:
		h.str(fmt.Sprintf("%T:%v", v, v))
	}
}

func entry(manager string, digest uint64) string {
	// Manager names are free text: keep the separators out.
	manager = strings.NewReplacer("=", "_", ";", "_").Replace(manager)
	return manager + "=" + strconv.FormatUint(digest, 16)
}

func join(entries []string) string {
	slices.Sort(entries)
	return strings.Join(entries, ";")
}

// Writers returns the field managers that made the change from old to cur:
// those whose managed-fields entry is new or changed. For a new object
// (old.UID empty) they are all of its managers. It returns nil when it
// cannot tell, which callers must read as "anyone": the API server moves an
// entry's time only to the second and only when the manager changed a
// value, so two writes of one manager within a second may leave no trace.
func Writers(old, cur Meta) []string {
	if cur.Writers == "" {
		return nil
	}
	had := map[string]bool{}
	if old.UID != "" {
		if old.Writers == "" {
			return nil
		}
		for _, e := range strings.Split(old.Writers, ";") {
			had[e] = true
		}
	}
	var out []string
	for _, e := range strings.Split(cur.Writers, ";") {
		if !had[e] {
			m, _, _ := strings.Cut(e, "=")
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
