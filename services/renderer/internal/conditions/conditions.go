// Package conditions prepares the status conditions the renderer applies, so
// that applying the same conditions again is recognised as no change: a
// condition that says what the object already says keeps the object's
// lastTransitionTime, and only a real transition gets a new one.
package conditions

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/pkg/apis/common"
)

// Observed returns the conditions in obj's status.conditions. Entries that
// do not decode are skipped.
func Observed(obj *unstructured.Unstructured) []common.Condition {
	raw, ok, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if !ok {
		return nil
	}
	out := make([]common.Condition, 0, len(raw))
	for _, r := range raw {
		b, err := json.Marshal(r)
		if err != nil {
			continue
		}
		var c common.Condition
		if err := json.Unmarshal(b, &c); err != nil || c.Type == "" {
			continue
		}
		out = append(out, c)
	}
	return out
}

// Settle returns want with each condition's LastTransitionTime replaced by
// the observed one of the same type when the two are equal apart from it
// (common.Condition.Equal), so that only real transitions move the time.
func Settle(observed, want []common.Condition) []common.Condition {
	out := make([]common.Condition, len(want))
	for i, w := range want {
		out[i] = w
		for _, o := range observed {
			if o.Type == w.Type && o.Equal(w) {
				out[i].LastTransitionTime = o.LastTransitionTime
				break
			}
		}
	}
	return out
}

// Unstructured converts conditions to the JSON form of status.conditions.
func Unstructured(cs []common.Condition) ([]any, error) {
	out := make([]any, 0, len(cs))
	for _, c := range cs {
		b, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("cannot encode condition %s: %w", c.Type, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("cannot encode condition %s: %w", c.Type, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// Get returns the condition of type t in cs, and whether there is one.
func Get(cs []common.Condition, t common.ConditionType) (common.Condition, bool) {
	for _, c := range cs {
		if c.Type == t {
			return c, true
		}
	}
	return common.Condition{}, false
}
