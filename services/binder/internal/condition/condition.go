// Package condition reads Crossplane-style status conditions from
// unstructured objects and builds the conditions part of the binder's
// server-side-apply intents, keeping a condition's last transition time when
// what it says has not changed, so that re-applying the same state is a no-op.
package condition

import (
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/apply"
)

// Get returns the conditions at status.conditions of obj, skipping any entry
// that is not a condition. It never fails: a malformed status has no
// conditions as far as the binder is concerned.
func Get(obj *unstructured.Unstructured) []common.Condition {
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
		c := common.Condition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err != nil || c.Type == "" {
			continue
		}
		out = append(out, c)
	}
	return out
}

// Find returns the condition of type t among conds.
func Find(conds []common.Condition, t common.ConditionType) (common.Condition, bool) {
	for _, c := range conds {
		if c.Type == t {
			return c, true
		}
	}
	return common.Condition{}, false
}

// IsTrue reports whether obj has a condition of type t with status True.
func IsTrue(obj *unstructured.Unstructured, t common.ConditionType) bool {
	c, ok := Find(Get(obj), t)
	return ok && c.Status == "True"
}

// Keep returns c with the last transition time of the condition of the same
// type in current when both say the same thing (common.Condition.Equal), and
// with now otherwise.
func Keep(current []common.Condition, c common.Condition, now metav1.Time) common.Condition {
	if old, ok := Find(current, c.Type); ok && old.Equal(c) {
		c.LastTransitionTime = old.LastTransitionTime
		return c
	}
	c.LastTransitionTime = now
	return c
}

// OwnedTypes returns the condition types that manager owns on obj's status
// through server-side apply, sorted.
func OwnedTypes(obj *unstructured.Unstructured, manager string) []common.ConditionType {
	owned, _, err := apply.Owned(obj, manager, "status")
	if err != nil || owned == nil {
		return nil
	}
	status, _ := owned["f:status"].(map[string]any)
	conds, _ := status["f:conditions"].(map[string]any)
	var out []common.ConditionType
	for _, c := range Get(obj) {
		if _, ok := conds[`k:{"type":"`+string(c.Type)+`"}`]; ok {
			out = append(out, c.Type)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Intent returns the status.conditions list of a status apply by manager
// that sets conds (each keeping its transition time when unchanged, see Keep)
// and carries, unchanged, every other condition manager already owns on
// current, so that two code paths applying different conditions as the same
// manager never remove each other's. Conditions are sorted by type, so the
// intent is deterministic.
func Intent(current *unstructured.Unstructured, manager string, now metav1.Time, conds ...common.Condition) []any {
	existing := Get(current)
	set := map[common.ConditionType]common.Condition{}
	for _, c := range conds {
		set[c.Type] = Keep(existing, c, now)
	}
	for _, t := range OwnedTypes(current, manager) {
		if _, ok := set[t]; ok {
			continue
		}
		if c, ok := Find(existing, t); ok {
			set[t] = c
		}
	}
	return List(mapValues(set)...)
}

// List renders conditions as the JSON-like list of an unstructured object,
// sorted by type.
func List(conds ...common.Condition) []any {
	sort.Slice(conds, func(i, j int) bool { return conds[i].Type < conds[j].Type })
	out := make([]any, 0, len(conds))
	for _, c := range conds {
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

func mapValues(m map[common.ConditionType]common.Condition) []common.Condition {
	out := make([]common.Condition, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	return out
}
