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
// naming the first failing check and what it found.
//
// As in Crossplane, the checks are validated first, whether or not the
// resource exists (see ValidateReadinessCheck), and a field check whose field
// exists but has the wrong type (MatchString on a number, MatchTrue on a
// string) is an error rather than a reason: the check can never pass until the
// Composition changes. Errors are of class ErrInvalid and name the check, e.g.
// "readinessChecks[1] (MatchString): ...".
func IsReady(observed map[string]any, checks []v1.ReadinessCheck) (ready bool, reason string, err error) {
	for i, c := range checks {
		if err := ValidateReadinessCheck(c); err != nil {
			return false, "", checkError(i, c, err)
		}
	}
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
			return false, "", checkError(i, c, err)
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

func checkError(i int, c v1.ReadinessCheck, err error) error {
	return &ReadinessCheckError{Index: i, Type: c.Type, Err: err}
}

// A ReadinessCheckError is a readiness check that is invalid or cannot be
// run against the observed resource.
type ReadinessCheckError struct {
	// Index of the check in the template's readinessChecks.
	Index int
	// Type of the check.
	Type v1.ReadinessCheckType
	// Err is the cause; a *FieldError if the check is invalid.
	Err error
}

func (e *ReadinessCheckError) Error() string {
	return fmt.Sprintf("readinessChecks[%d] (%s): %v", e.Index, e.Type, e.Err)
}

// Unwrap returns the cause.
func (e *ReadinessCheckError) Unwrap() error { return e.Err }

// Is reports whether the error is of class target.
func (e *ReadinessCheckError) Is(target error) bool { return isInvalid(e.Err, target) }

// validateReadinessChecks refuses a Composition with an invalid readiness
// check, as Crossplane's Composition validation does, naming its field path.
func validateReadinessChecks(ts []v1.ComposedTemplate) error {
	for i := range ts {
		for j, c := range ts[i].ReadinessChecks {
			err := ValidateReadinessCheck(c)
			var fe *FieldError
			if errors.As(err, &fe) {
				return &CompositionError{Field: fmt.Sprintf("spec.resources[%d].readinessChecks[%d].%s", i, j, fe.Field), Err: fe.Err}
			}
		}
	}
	return nil
}

// A FieldError is an invalid field of a readiness check: Field is its path
// relative to the check (e.g. "matchCondition.type"), Err the cause.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *FieldError) Unwrap() error { return e.Err }

// ValidateReadinessCheck returns a *FieldError if the check is invalid as
// Crossplane v1.20 defines it: an unknown type; MatchString without
// matchString or MatchInteger without a non-zero matchInteger (like
// Crossplane, the empty string and 0 mean unset); MatchCondition without
// matchCondition or with an empty matchCondition.type or status (nothing
// defaults them for a check that is given); a field check without a
// well-formed fieldPath. It does not read any resource.
func ValidateReadinessCheck(c v1.ReadinessCheck) error {
	switch c.Type {
	case v1.ReadinessCheckTypeNone:
		return nil
	case v1.ReadinessCheckTypeMatchCondition:
		switch {
		case c.MatchCondition == nil:
			return &FieldError{Field: "matchCondition", Err: fmt.Errorf("is required for type %s", c.Type)}
		case c.MatchCondition.Type == "":
			return &FieldError{Field: "matchCondition.type", Err: fmt.Errorf("is required for type %s", c.Type)}
		case c.MatchCondition.Status == "":
			return &FieldError{Field: "matchCondition.status", Err: fmt.Errorf("is required for type %s", c.Type)}
		}
		return nil
	case v1.ReadinessCheckTypeMatchString:
		if c.MatchString == "" {
			return &FieldError{Field: "matchString", Err: fmt.Errorf("is required for type %s", c.Type)}
		}
	case v1.ReadinessCheckTypeMatchInteger:
		if c.MatchInteger == 0 {
			return &FieldError{Field: "matchInteger", Err: fmt.Errorf("is required for type %s and may not be 0", c.Type)}
		}
	case v1.ReadinessCheckTypeNonEmpty, v1.ReadinessCheckTypeMatchTrue, v1.ReadinessCheckTypeMatchFalse:
	default:
		return &FieldError{Field: "type", Err: fmt.Errorf("unknown readiness check type %q (want NonEmpty, MatchString, MatchInteger, MatchTrue, MatchFalse, MatchCondition or None)", c.Type)}
	}
	if c.FieldPath == "" {
		return &FieldError{Field: "fieldPath", Err: fmt.Errorf("is required for type %s", c.Type)}
	}
	if _, err := fieldpath.Parse(c.FieldPath); err != nil {
		return &FieldError{Field: "fieldPath", Err: err}
	}
	return nil
}

// check runs a valid check.
func check(p *fieldpath.Paved, c v1.ReadinessCheck) (bool, string, error) {
	switch c.Type { //nolint:exhaustive // The field checks follow.
	case v1.ReadinessCheckTypeNone:
		return true, "", nil
	case v1.ReadinessCheckTypeMatchCondition:
		return matchCondition(p, c.MatchCondition)
	}

	path, err := fieldpath.Parse(c.FieldPath)
	if err != nil {
		return false, "", fmt.Errorf("fieldPath: %w", err)
	}
	v, err := fieldpath.GetSegments(p.UnstructuredContent(), path)
	if fieldpath.IsNotFound(err) {
		return false, fmt.Sprintf("%s is not set", c.FieldPath), nil
	}
	if err != nil {
		return false, "", fmt.Errorf("cannot read %s: %w", c.FieldPath, err)
	}

	switch c.Type { //nolint:exhaustive // The others returned above.
	case v1.ReadinessCheckTypeNonEmpty:
		return true, "", nil
	case v1.ReadinessCheckTypeMatchString:
		s, ok := v.(string)
		if !ok {
			return false, "", fmt.Errorf("%s is %s, not a string", c.FieldPath, TypeOf(v))
		}
		if s != c.MatchString {
			return false, fmt.Sprintf("%s is %q, want %q", c.FieldPath, s, c.MatchString), nil
		}
		return true, "", nil
	case v1.ReadinessCheckTypeMatchInteger:
		i, ok := asInteger(v)
		if !ok {
			return false, "", fmt.Errorf("%s is %s, not an integer", c.FieldPath, TypeOf(v))
		}
		if i != c.MatchInteger {
			return false, fmt.Sprintf("%s is %d, want %d", c.FieldPath, i, c.MatchInteger), nil
		}
		return true, "", nil
	default: // MatchTrue, MatchFalse.
		want := c.Type == v1.ReadinessCheckTypeMatchTrue
		b, ok := v.(bool)
		if !ok {
			return false, "", fmt.Errorf("%s is %s, not a boolean", c.FieldPath, TypeOf(v))
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

// matchCondition compares the condition's status with the one wanted. As in
// Crossplane, a condition that is not set has status Unknown.
func matchCondition(p *fieldpath.Paved, want *v1.MatchConditionReadinessCheck) (bool, string, error) {
	c, found := condition.Find(condition.Observed(&unstructured.Unstructured{Object: p.UnstructuredContent()}), want.Type)
	if !found {
		if want.Status == corev1.ConditionUnknown {
			return true, "", nil
		}
		return false, fmt.Sprintf("condition %s is Unknown (not set), want %s", want.Type, want.Status), nil
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
