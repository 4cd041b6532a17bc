// Package condition reads the Crossplane-style status conditions of
// unstructured objects and builds the status.conditions part of the
// server-side-apply intents that Loom's services send. Every service uses
// this one package, so that "the object's conditions", "the condition of a
// type" and "a condition that did not change" mean the same everywhere.
//
// The types are those of pkg/apis/common. A condition that says what the
// object already says (common.Condition.Equal) keeps the object's
// lastTransitionTime (Settle), so applying the same state again is no change
// for pkg/apply and costs no write.
//
// One meaning per name:
//
//   - Observed: the conditions an object's status holds.
//   - Find: the condition of a type in a list of conditions.
//   - IsTrue: whether an object's condition of a type is True.
//   - Settle: conditions to write, with their transition times decided.
//   - List: conditions as the JSON form of status.conditions.
//   - Owned: the condition types a field manager applied to an object.
//   - Intent: the conditions a field manager applies, its others carried.
//   - FirstNAndSomeMore: names listed in a message as Crossplane lists them.
//
// common.ConditionedStatus.GetCondition (a typed status, Unknown when
// absent) is crossplane-runtime's and stays there.
package condition

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/apply"
)

// Observed returns the conditions at status.conditions of obj, in their
// order. It never fails: an entry that is not an object or has no type is
// skipped, and a field of the wrong kind (a status that is not a string, a
// lastTransitionTime that is not RFC 3339) reads as its zero value, so a
// third-party object with a sloppy status still answers for the fields it
// does hold. A nil obj has no conditions.
func Observed(obj *unstructured.Unstructured) []common.Condition {
	if obj == nil {
		return nil
	}
	raw, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	out := make([]common.Condition, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		c, ok := decode(m)
		if !ok {
			continue
		}
		out = append(out, c)
	}
	return out
}

// decode reads one entry of status.conditions; false when it has no type.
func decode(m map[string]any) (common.Condition, bool) {
	str := func(k string) string { s, _ := m[k].(string); return s }
	c := common.Condition{
		Type:    common.ConditionType(str("type")),
		Status:  corev1.ConditionStatus(str("status")),
		Reason:  common.ConditionReason(str("reason")),
		Message: str("message"),
	}
	if c.Type == "" {
		return c, false
	}
	if t, err := time.Parse(time.RFC3339, str("lastTransitionTime")); err == nil {
		c.LastTransitionTime = metav1.NewTime(t)
	}
	switch g := m["observedGeneration"].(type) {
	case int64:
		c.ObservedGeneration = g
	case int:
		c.ObservedGeneration = int64(g)
	case float64:
		c.ObservedGeneration = int64(g)
	case json.Number:
		c.ObservedGeneration, _ = g.Int64()
	}
	return c, true
}

// Find returns the first condition of type t in cs, and whether there is
// one.
func Find(cs []common.Condition, t common.ConditionType) (common.Condition, bool) {
	for _, c := range cs {
		if c.Type == t {
			return c, true
		}
	}
	return common.Condition{}, false
}

// IsTrue reports whether obj has a condition of type t with status True.
func IsTrue(obj *unstructured.Unstructured, t common.ConditionType) bool {
	c, ok := Find(Observed(obj), t)
	return ok && c.Status == corev1.ConditionTrue
}

// Settle returns want, each condition with the lastTransitionTime of the
// observed condition of its type when the two say the same thing
// (common.Condition.Equal), and with now otherwise: only a real transition
// moves the time. want is not modified.
func Settle(observed []common.Condition, now metav1.Time, want ...common.Condition) []common.Condition {
	out := make([]common.Condition, len(want))
	for i, w := range want {
		w.LastTransitionTime = now
		if o, ok := Find(observed, w.Type); ok && o.Equal(w) {
			w.LastTransitionTime = o.LastTransitionTime
		}
		out[i] = w
	}
	return out
}

// List renders conditions as the JSON form of status.conditions in an
// unstructured object, sorted by type so that the same conditions always
// make the same intent. A message or observed generation that is empty is
// left out, as the API types' omitempty does.
func List(cs ...common.Condition) []any {
	sorted := slices.Clone(cs)
	slices.SortStableFunc(sorted, func(a, b common.Condition) int { return strings.Compare(string(a.Type), string(b.Type)) })
	out := make([]any, 0, len(sorted))
	for _, c := range sorted {
		m := map[string]any{
			"type":               string(c.Type),
			"status":             string(c.Status),
			"reason":             string(c.Reason),
			"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
		}
		if c.Message != "" {
			m["message"] = c.Message
		}
		if c.ObservedGeneration != 0 {
			m["observedGeneration"] = c.ObservedGeneration
		}
		out = append(out, m)
	}
	return out
}

// Owned returns the condition types that manager applied to obj's status
// subresource (its server-side-apply entry lists them), sorted. An object
// the manager never applied to, or whose entry does not decode, has none.
func Owned(obj *unstructured.Unstructured, manager string) []common.ConditionType {
	tree, ok, err := apply.Owned(obj, manager, "status")
	if err != nil || !ok {
		return nil
	}
	status, _ := tree["f:status"].(map[string]any)
	conds, _ := status["f:conditions"].(map[string]any)
	var out []common.ConditionType
	for k := range conds {
		raw, ok := strings.CutPrefix(k, "k:")
		if !ok {
			continue
		}
		var key struct {
			Type string `json:"type"`
		}
		if json.Unmarshal([]byte(raw), &key) == nil && key.Type != "" {
			out = append(out, common.ConditionType(key.Type))
		}
	}
	slices.Sort(out)
	return out
}

// Intent returns the status.conditions of a status apply by manager that
// sets conds (settled against current's conditions, see Settle) and carries,
// unchanged, every other condition manager already owns on current, so that
// two code paths applying different conditions as the same manager never
// remove each other's. The result is sorted by type (see List).
func Intent(current *unstructured.Unstructured, manager string, now metav1.Time, conds ...common.Condition) []any {
	observed := Observed(current)
	set := Settle(observed, now, conds...)
	for _, t := range Owned(current, manager) {
		if _, ok := Find(set, t); ok {
			continue
		}
		if c, ok := Find(observed, t); ok {
			set = append(set, c)
		}
	}
	return List(set...)
}

// FirstNAndSomeMore lists names in a condition message exactly as
// crossplane-runtime's function of the same name does, so that messages such
// as "Unready resources: ..." read as Crossplane's: fewer than n names joined
// by ", " ("a", "a, b"), exactly n ending in ", and " ("a, b, and c"), more
// than n with the rest counted ("a, b, c, and 2 more"); n <= 0 gives only the
// count. Names are listed in the order given: callers sort them so that the
// message is deterministic.
func FirstNAndSomeMore(n int, names []string) string {
	switch {
	case n <= 0:
		return fmt.Sprintf("%d", len(names))
	case len(names) > n:
		return fmt.Sprintf("%s, and %d more", strings.Join(names[:n], ", "), len(names)-n)
	case len(names) == n && n > 1:
		return strings.Join(names[:n-1], ", ") + ", and " + names[n-1]
	default:
		return strings.Join(names, ", ")
	}
}
