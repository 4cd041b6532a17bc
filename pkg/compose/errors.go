package compose

import (
	"errors"
	"fmt"
	"strings"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// Error classes. Every error Render returns or reports matches exactly one of
// them with errors.Is.
var (
	// ErrInvalid matches errors caused by invalid input: a Composition, a
	// composite resource or an EnvironmentConfig that cannot be rendered as
	// it is. Rendering the same input again fails the same way, so retrying
	// is pointless until the input changes.
	ErrInvalid = errors.New("invalid input")

	// ErrUnavailable matches errors caused by input that does not exist yet,
	// for example an EnvironmentConfig that is referenced but not (yet)
	// created. Rendering again after it appears may succeed.
	ErrUnavailable = errors.New("input not available")
)

// unavailable marks err as ErrUnavailable.
func unavailable(format string, args ...any) error {
	return &classified{err: fmt.Errorf(format, args...), class: ErrUnavailable}
}

// classified attaches a class to an error without changing its message.
type classified struct {
	err   error
	class error
}

func (c *classified) Error() string        { return c.err.Error() }
func (c *classified) Unwrap() error        { return c.err }
func (c *classified) Is(target error) bool { return target == c.class }

// isInvalid implements the default class of the wrapper errors below: invalid
// unless the cause says it is unavailable.
func isInvalid(cause error, target error) bool {
	return target == ErrInvalid && !errors.Is(cause, ErrUnavailable)
}

// A PatchError is a patch that could not be applied. It names the template
// (empty for environment patches), the patch and its field paths, and wraps
// the cause.
type PatchError struct {
	// Template is the name of the template, or "" for a patch of
	// spec.environment.patches.
	Template string
	// Index of the patch in the template's (or the environment's) patches.
	Index int
	// PatchSet is the name of the PatchSet the failing patch was included
	// from, if any, and PatchSetIndex its index within the PatchSet.
	PatchSet      string
	PatchSetIndex int
	// Type of the failing patch.
	Type v1.PatchType
	// From is the patch's fromFieldPath, or its combine variables joined by
	// ", "; To its toFieldPath.
	From, To string
	// Err is the cause.
	Err error
}

func (e *PatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cannot apply patch %d", e.Index)
	if e.Template == "" {
		b.WriteString(" of the environment")
	} else {
		fmt.Fprintf(&b, " of template %q", e.Template)
	}
	b.WriteString(" (")
	if e.PatchSet != "" {
		fmt.Fprintf(&b, "patch %d of PatchSet %q: ", e.PatchSetIndex, e.PatchSet)
	}
	b.WriteString(string(e.Type))
	if e.From != "" || e.To != "" {
		fmt.Fprintf(&b, " %s -> %s", orNone(e.From), orNone(e.To))
	}
	fmt.Fprintf(&b, "): %v", e.Err)
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Unwrap returns the cause.
func (e *PatchError) Unwrap() error { return e.Err }

// Is reports whether the error is of class target.
func (e *PatchError) Is(target error) bool { return isInvalid(e.Err, target) }

// A TransformError is a transform that failed. It names the transform's index
// and type and wraps the cause.
type TransformError struct {
	// Index of the transform in the patch's transforms.
	Index int
	// Type describes the transform, e.g. "math Multiply" or "convert to
	// int64".
	Type string
	// Err is the cause.
	Err error
}

func (e *TransformError) Error() string {
	return fmt.Sprintf("transform %d (%s): %v", e.Index, e.Type, e.Err)
}

// Unwrap returns the cause.
func (e *TransformError) Unwrap() error { return e.Err }

// Is reports whether the error is of class target.
func (e *TransformError) Is(target error) bool { return isInvalid(e.Err, target) }

// A TemplateError is a resource template that could not be rendered, for a
// reason other than a patch: its base, metadata, readiness checks or
// connection details.
type TemplateError struct {
	// Template is the name of the template.
	Template string
	// Field is the offending field of the template, e.g. "base" or
	// "readinessChecks[1]".
	Field string
	// Err is the cause.
	Err error
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("cannot render template %q: %s: %v", e.Template, e.Field, e.Err)
}

// Unwrap returns the cause.
func (e *TemplateError) Unwrap() error { return e.Err }

// Is reports whether the error is of class target.
func (e *TemplateError) Is(target error) bool { return isInvalid(e.Err, target) }

// An EnvironmentError is an environment that could not be built from the
// Composition's spec.environment.
type EnvironmentError struct {
	// Field is the offending field, e.g. "environmentConfigs[1]".
	Field string
	// Err is the cause.
	Err error
}

func (e *EnvironmentError) Error() string {
	return fmt.Sprintf("cannot build the environment: spec.environment.%s: %v", e.Field, e.Err)
}

// Unwrap returns the cause.
func (e *EnvironmentError) Unwrap() error { return e.Err }

// Is reports whether the error is of class target.
func (e *EnvironmentError) Is(target error) bool { return isInvalid(e.Err, target) }

// A CompositionError is a Composition, or a composite resource, that cannot be
// rendered at all.
type CompositionError struct {
	// Field is the offending field of the Composition (e.g.
	// "spec.resources[2].name") or of the composite resource.
	Field string
	// Err is the cause.
	Err error
}

func (e *CompositionError) Error() string {
	return fmt.Sprintf("cannot render Composition: %s: %v", e.Field, e.Err)
}

// Unwrap returns the cause.
func (e *CompositionError) Unwrap() error { return e.Err }

// Is reports whether the error is of class target.
func (e *CompositionError) Is(target error) bool { return isInvalid(e.Err, target) }
