package object

import (
	"hash/fnv"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
