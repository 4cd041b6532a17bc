package fn

import "errors"

// Causes of a failed step. A *StepError wraps exactly one of them (match with
// errors.Is). They split into two families:
//
// Transient (retry the same input with backoff; the next attempt may succeed):
// ErrUnreachable, ErrTimeout, ErrMalformedResponse, ErrFunctionFailed and
// ErrFetch. Any error this package returns that wraps none of the sentinels
// (for example an unresolvable Function object) is transient too.
//
// Permanent for this input (retrying the same input gives the same answer; wait
// for the XR, the Composition or an extra resource to change): ErrFatalResult,
// ErrDenied, ErrUnstable, ErrInvalidStep, ErrInvalidRequirement and
// ErrUnsupported.
var (
	// ErrUnreachable: no connection to the function could be made (gRPC
	// Unavailable: refused, DNS failure, TLS handshake failure).
	ErrUnreachable = errors.New("function is unreachable")
	// ErrTimeout: the function did not answer before the deadline, or no
	// concurrency slot for it was free before the deadline.
	ErrTimeout = errors.New("function timed out")
	// ErrMalformedResponse: the function answered, but the answer breaks the
	// protocol (for example it does not echo the request's tag).
	ErrMalformedResponse = errors.New("malformed function response")
	// ErrFunctionFailed: the function answered with a gRPC error.
	ErrFunctionFailed = errors.New("function returned an error")
	// ErrFetch: an extra resource, credential or schema could not be read.
	ErrFetch = errors.New("cannot fetch what the step needs")

	// ErrFatalResult: the function returned a result of severity Fatal.
	ErrFatalResult = errors.New("function returned a fatal result")
	// ErrDenied: the function required resources outside the step's
	// allowedExtraResources. Nothing was fetched.
	ErrDenied = errors.New("requirement denied by allowedExtraResources")
	// ErrUnstable: the function kept changing its requirements.
	ErrUnstable = errors.New("requirements did not stabilize")
	// ErrInvalidStep: the pipeline step itself is invalid (no function, input
	// that is not a JSON object, a bad regular expression, ...).
	ErrInvalidStep = errors.New("invalid pipeline step")
	// ErrInvalidRequirement: the function required resources with a selector
	// that cannot be served (no apiVersion or kind, an empty name).
	ErrInvalidRequirement = errors.New("invalid requirement")
	// ErrUnsupported: the endpoint serves neither FunctionRunnerService v1
	// nor v1beta1.
	ErrUnsupported = errors.New("endpoint is not a composition function")
)

var permanent = []error{ErrFatalResult, ErrDenied, ErrUnstable, ErrInvalidStep, ErrInvalidRequirement, ErrUnsupported} //nolint:gochecknoglobals // Treated as a constant.

// IsPermanent reports whether err means that running the same pipeline with
// the same input again gives the same failure, so the caller should record it
// (a condition naming the step) and not retry until something changes.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	for _, p := range permanent {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}

// IsTransient reports whether err is worth retrying with backoff: every
// non-nil error that is not permanent, including context cancellation.
func IsTransient(err error) bool {
	return err != nil && !IsPermanent(err)
}

// A StepError is the failure of one pipeline step. Its message names the step
// (and the function where that helps) and quotes the cause, so it can be put
// into a condition as is. Unwrap yields the cause, which wraps one of the
// sentinel errors above.
type StepError struct {
	// Step is the name of the failed pipeline step.
	Step string
	// Function is the name of the step's function.
	Function string

	msg   string
	cause error
}

// Error returns a message naming the step.
func (e *StepError) Error() string { return e.msg }

// Unwrap returns the cause.
func (e *StepError) Unwrap() error { return e.cause }

// stepError wraps cause for step s. msg is the whole message.
func stepError(s Step, msg string, cause error) *StepError {
	return &StepError{Step: s.Name, Function: s.Function, msg: msg, cause: cause}
}
