package compose

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/condition"
	"github.com/loomxr/loom/pkg/fieldpath"
)

// ReasonNotCreated is the readiness reason of a composed resource that does
// not exist yet.
const ReasonNotCreated = "resource does not exist yet"

// defaultReadinessCheck is the check of a template without readiness checks:
// the Ready condition is True.
var defaultReadinessCheck = v1.ReadinessCheck{ //nolint:gochecknoglobals // Treated as a constant.
	Type:           v1.ReadinessCheckTypeMatchCondition,
	MatchCondition: &v1.MatchConditionReadinessCheck{Type: "Ready", Status: corev1.ConditionTrue},
}

// IsReady runs readiness checks against an observed composed resource (its
// JSON content). All checks must pass; no checks means the Ready condition
// must be True. It returns whether the resource is ready and, if not, a reason
// naming the first failing check and what it found. A check that is not valid
// is an error (of class ErrInvalid) naming it, e.g. "readinessChecks[1]".
func IsReady(observed map[string]any, checks []v1.ReadinessCheck) (ready bool, reason string, err error) {
	if observed == nil {
		return false, ReasonNotCreated, nil
	}
	if len(checks) == 0 {
		checks = []v1.ReadinessCheck{defaultReadinessCheck}
	}
	p := fieldpath.Pave(observed)
	for i, c := range checks {
		ok, why, err := check(p, c)
		if err != nil {
			return false, "", fmt.Errorf("readinessChecks[%d] (%s): %w", i, c.Type, err)
		}
		if !ok {
			if len(checks) > 1 {
				why = fmt.Sprintf("readiness check %d: %s", i, why)
			}
			return false, why, nil
		}
	}
	return true, "", nil
}

func check(p *fieldpath.Paved, c v1.ReadinessCheck) (bool, string, error) {
	switch c.Type {
	case v1.ReadinessCheckTypeNone:
		return true, "", nil
	case v1.ReadinessCheckTypeMatchCondition:
		return matchCondition(p, c.MatchCondition)
	case v1.ReadinessCheckTypeNonEmpty, v1.ReadinessCheckTypeMatchString, v1.ReadinessCheckTypeMatchInteger,
		v1.ReadinessCheckTypeMatchTrue, v1.ReadinessCheckTypeMatchFalse:
	default:
		return false, "", fmt.Errorf("unknown readiness check type %q (want NonEmpty, MatchString, MatchInteger, MatchTrue, MatchFalse, MatchCondition or None)", c.Type)
	}

	if c.FieldPath == "" {
		return false, "", errors.New("fieldPath is required")
	}
	path, err := fieldpath.Parse(c.FieldPath)
	if err != nil {
		return false, "", fmt.Errorf("fieldPath: %w", err)
	}
	switch c.Type { //nolint:exhaustive // The others returned above.
	case v1.ReadinessCheckTypeMatchString:
		if c.MatchString == "" {
			return false, "", errors.New("matchString is required")
		}
	case v1.ReadinessCheckTypeMatchInteger:
		if c.MatchInteger == 0 {
			return false, "", errors.New("matchInteger is required and may not be 0")
		}
	}

	v, err := fieldpath.GetSegments(p.UnstructuredContent(), path)
	if fieldpath.IsNotFound(err) {
		return false, fmt.Sprintf("%s is not set", c.FieldPath), nil
	}
	if err != nil {
		return false, fmt.Sprintf("cannot read %s: %v", c.FieldPath, err), nil
	}

	switch c.Type { //nolint:exhaustive // The others returned above.
	case v1.ReadinessCheckTypeNonEmpty:
		return true, "", nil
	case v1.ReadinessCheckTypeMatchString:
		s, ok := v.(string)
		if !ok {
			return false, fmt.Sprintf("%s is %s, want the string %q", c.FieldPath, TypeOf(v), c.MatchString), nil
		}
		if s != c.MatchString {
			return false, fmt.Sprintf("%s is %q, want %q", c.FieldPath, s, c.MatchString), nil
		}
		return true, "", nil
	case v1.ReadinessCheckTypeMatchInteger:
		i, ok := asInteger(v)
		if !ok {
			return false, fmt.Sprintf("%s is %s, want the integer %d", c.FieldPath, TypeOf(v), c.MatchInteger), nil
		}
		if i != c.MatchInteger {
			return false, fmt.Sprintf("%s is %d, want %d", c.FieldPath, i, c.MatchInteger), nil
		}
		return true, "", nil
	default: // MatchTrue, MatchFalse.
		want := c.Type == v1.ReadinessCheckTypeMatchTrue
		b, ok := v.(bool)
		if !ok {
			return false, fmt.Sprintf("%s is %s, want %t", c.FieldPath, TypeOf(v), want), nil
		}
		if b != want {
			return false, fmt.Sprintf("%s is %t, want %t", c.FieldPath, b, want), nil
		}
		return true, "", nil
	}
}

func asInteger(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true
		}
	}
	return 0, false
}

func matchCondition(p *fieldpath.Paved, mc *v1.MatchConditionReadinessCheck) (bool, string, error) {
	want := defaultReadinessCheck.MatchCondition
	if mc != nil {
		want = &v1.MatchConditionReadinessCheck{Type: mc.Type, Status: mc.Status}
		if want.Type == "" {
			want.Type = "Ready"
		}
		if want.Status == "" {
			want.Status = corev1.ConditionTrue
		}
	}
	c, found := condition.Find(condition.Observed(&unstructured.Unstructured{Object: p.UnstructuredContent()}), want.Type)
	if !found {
		return false, fmt.Sprintf("condition %s is not set, want %s", want.Type, want.Status), nil
	}
	if c.Status == want.Status {
		return true, "", nil
	}
	why := fmt.Sprintf("condition %s is %s, want %s", want.Type, orUnknown(string(c.Status)), want.Status)
	switch {
	case c.Reason != "" && c.Message != "":
		why += fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
	case c.Reason != "":
		why += fmt.Sprintf(" (%s)", c.Reason)
	case c.Message != "":
		why += fmt.Sprintf(" (%s)", c.Message)
	}
	return false, why, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}
