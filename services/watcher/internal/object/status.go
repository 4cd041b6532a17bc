package object

import (
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationStatus is kept on cached XRs only, beside AnnotationDigest: a
// summary of the XR's status in five parts,
// "<ready>/<patchable>/<claim>/<published>/<unresolved>",
// so that the watcher can tell which services a change of the status alone
// concerns (see StatusChanges). Like the digest it exists only in the
// watcher's cache.
const AnnotationStatus = "loom.dev/watcher-status-summary"

// A StatusChange says which parts of an XR's status a change touched.
type StatusChange uint8

// Parts of an XR's status.
const (
	// StatusReady is the status of the Ready condition ("True", "False",
	// "Unknown", or none), which the claim's status mirrors.
	StatusReady StatusChange = 1 << iota

	// StatusPatchable is the status outside the composition machinery's
	// own fields (machineryStatus): what ToCompositeFieldPath patches and
	// functions write, and what FromCompositeFieldPath patches may read.
	StatusPatchable

	// StatusClaim is what the binder copies to the XR's claim: the status
	// outside compositeOnlyStatus, the Ready condition's status, the
	// conditions of the types in status.claimConditionTypes and, while the
	// XR is Ready, connectionDetails.lastPublishedTime; and whether the XR
	// has a status at all (the claim's first status waits for it).
	StatusClaim

	// StatusPublished is the time the connection Secret of a Ready XR was
	// last published (connectionDetails.lastPublishedTime): the news that
	// a claim waiting for its Secret can turn Ready.
	StatusPublished

	// StatusReadyTrue is whether the Ready condition is True: the secrets
	// service copies the connection Secret to the claim once it is, and
	// tells no other status of it from another (a first "Creating" after
	// none, say). It changes only with StatusReady.
	StatusReadyTrue

	// StatusUnresolved is a turn of the binder's ReferencesResolved
	// condition to anything but True (from True or none): the binder
	// writes it there and, having written it, turns it True once the
	// references resolve; the change tells a binder that forgot its write
	// (it restarted) that the condition waits for it. A turn to True is no
	// such change.
	StatusUnresolved

	// StatusAll is every part; it is the change when either summary is
	// unknown.
	StatusAll = StatusReady | StatusPatchable | StatusClaim | StatusPublished | StatusReadyTrue | StatusUnresolved
)

// typeReferencesResolved is the binder's condition on XRs whose references
// wait or fail (services/binder/internal/reference).
const typeReferencesResolved = "ReferencesResolved"

// machineryStatus are the XR status fields that Loom's services write for
// themselves (the renderer's conditions, summary and watch list, the
// secrets service's connectionDetails, the binder's conditions): the same
// set the renderer never lets patches or functions own.
var machineryStatus = []string{ //nolint:gochecknoglobals // Treated as a constant.
	"conditions", "connectionDetails", "claimConditionTypes", "loom", "watchedResourceRefs", "crossplane",
}

// compositeOnlyStatus are the XR status fields the binder does not copy to
// the claim.
var compositeOnlyStatus = []string{ //nolint:gochecknoglobals // Treated as a constant.
	"conditions", "connectionDetails", "watchedResourceRefs",
}

// statusSummary returns the AnnotationStatus value of an XR. An object that
// was cached already (it has the annotation and no status) keeps its value.
func statusSummary(u *unstructured.Unstructured) string {
	status, ok := u.Object["status"].(map[string]any)
	if !ok {
		if v, ok := u.GetAnnotations()[AnnotationStatus]; ok {
			return v
		}
	}
	ready := readyIn(status)
	conds, _ := status["conditions"].([]any)

	patchable := fnv.New64a()
	hashWithout(patchable, status, machineryStatus)

	var published string
	claim := fnv.New64a()
	if ok {
		// The claim's first status waits for its XR's first status,
		// whatever that says.
		_, _ = claim.Write([]byte{1})
	}
	hashWithout(claim, status, compositeOnlyStatus)
	_, _ = io.WriteString(claim, ready)
	if ready == "True" {
		// The binder copies the time the XR's connection Secret last
		// changed to the claim once the XR is Ready (the secrets service
		// copies the Secret itself then).
		cd, _ := status["connectionDetails"].(map[string]any)
		last, _ := cd["lastPublishedTime"].(string)
		_, _ = io.WriteString(claim, "\x00"+last)
		published = strconv.FormatUint(fnvString(last), 16)
	}
	types, _ := status["claimConditionTypes"].([]any)
	unresolved := ""
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && slices.Contains(types, m["type"]) {
			hashValue(claim, m)
		}
		if ok && m["type"] == typeReferencesResolved && m["status"] != "True" {
			unresolved = "1"
		}
	}
	return ready + "/" + strconv.FormatUint(patchable.Sum64(), 16) + "/" + strconv.FormatUint(claim.Sum64(), 16) + "/" + published + "/" + unresolved
}

func fnvString(s string) uint64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, s)
	return h.Sum64()
}

// NotReady reports, from the annotations of a cached XR, whether its Ready
// condition is known not to be True (it is False, Unknown, or missing);
// false when the XR's status summary is unknown.
func NotReady(annotations map[string]string) bool {
	v, ok := annotations[AnnotationStatus]
	if !ok {
		return false
	}
	ready, _, _ := strings.Cut(v, "/")
	return ready != "True"
}

// Unresolved reports, from the annotations of a cached XR, whether its
// ReferencesResolved condition is there and not True (a reference waits or
// failed); false when the XR's status summary is unknown.
func Unresolved(annotations map[string]string) bool {
	parts := strings.Split(annotations[AnnotationStatus], "/")
	return len(parts) == 5 && parts[4] != ""
}

// StatusChanges returns the parts of an XR's status that differ between two
// cached versions; StatusAll when either has no summary.
func StatusChanges(old, cur Meta) StatusChange {
	o, c := strings.Split(old.Status, "/"), strings.Split(cur.Status, "/")
	if len(o) != 5 || len(c) != 5 {
		return StatusAll
	}
	var ch StatusChange
	for i, part := range []StatusChange{StatusReady, StatusPatchable, StatusClaim, StatusPublished} {
		if o[i] != c[i] {
			ch |= part
		}
	}
	if (o[0] == "True") != (c[0] == "True") {
		ch |= StatusReadyTrue
	}
	if c[4] != "" && o[4] == "" {
		ch |= StatusUnresolved
	}
	return ch
}

// hashWithout writes m without the given keys to h, as hashValue would
// write a copy of m without them, and without making that copy (a nil m
// and an m of those keys alone are an empty object).
func hashWithout(h hash.Hash64, m map[string]any, keys []string) {
	_, _ = h.Write([]byte{'{'})
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if slices.Contains(keys, k) {
			continue
		}
		_, _ = io.WriteString(h, k)
		_, _ = h.Write([]byte{0})
		hashValue(h, m[k])
	}
	_, _ = h.Write([]byte{'}'})
}

// hashValue writes a JSON value to h unambiguously: a type tag before each
// value, object keys sorted, a terminator after each string.
func hashValue(h hash.Hash64, v any) {
	switch tv := v.(type) {
	case nil:
		_, _ = h.Write([]byte{'n'})
	case map[string]any:
		hashWithout(h, tv, nil)
	case []any:
		_, _ = h.Write([]byte{'['})
		for _, e := range tv {
			hashValue(h, e)
		}
		_, _ = h.Write([]byte{']'})
	case string:
		_, _ = h.Write([]byte{'s'})
		_, _ = io.WriteString(h, tv)
		_, _ = h.Write([]byte{0})
	case bool:
		_, _ = io.WriteString(h, "b"+strconv.FormatBool(tv))
	case int64:
		_, _ = io.WriteString(h, "i"+strconv.FormatInt(tv, 10)+"\x00")
	case float64:
		_, _ = io.WriteString(h, "f"+strconv.FormatFloat(tv, 'g', -1, 64)+"\x00")
	default:
		// Unstructured content holds nothing else.
		_, _ = fmt.Fprintf(h, "?%T%#v\x00", v, v)
	}
}
