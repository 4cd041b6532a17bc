package fn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

// MaxIterations caps how often a step's function may change its requirements:
// a step is called at most MaxIterations+1 times in one run.
const MaxIterations = 5

// DefaultResultReason is the reason of a result whose function set none.
const DefaultResultReason = "ComposeResources"

// Resource is one Kubernetes object in the pipeline's state.
type Resource struct {
	// Object is the object's content, as in an unstructured.Unstructured.
	// Desired objects come back with whole numbers as int64.
	Object map[string]any
	// ConnectionDetails of the object. Observed: from its connection Secret.
	// Desired: only meaningful for the composite resource of a legacy XR.
	ConnectionDetails map[string][]byte
	// Ready is what the function said about a desired resource's readiness.
	// Ignored in observed state.
	Ready Ready
}

// State is a composite resource and its composed resources.
type State struct {
	// Composite is the XR. A nil Object means none (in desired state: the
	// pipeline does not want to change the XR).
	Composite Resource
	// Resources are the composed resources, keyed by composition resource
	// name (annotation crossplane.io/composition-resource-name).
	Resources map[string]Resource
}

// Ready is a function's verdict on a desired resource's readiness.
type Ready string

// Readiness verdicts.
const (
	// ReadyUnspecified: the function did not say; derive it from the
	// resource's conditions.
	ReadyUnspecified Ready = ""
	ReadyTrue        Ready = "True"
	ReadyFalse       Ready = "False"
)

// Severity of a Result. The values are Kubernetes event types, except Fatal.
type Severity string

// Severities.
const (
	// SeverityFatal: the step failed; Run returns an error naming it.
	SeverityFatal   Severity = "Fatal"
	SeverityWarning Severity = "Warning"
	SeverityNormal  Severity = "Normal"
)

// ResultTarget says whom a Result or Condition is for.
type ResultTarget string

// Result and Condition targets.
const (
	// TargetComposite: the XR only (the default).
	TargetComposite ResultTarget = "Composite"
	// TargetCompositeAndClaim: the XR and, if it has one, its claim.
	TargetCompositeAndClaim ResultTarget = "CompositeAndClaim"
)

// A Result is something a step asked to tell the user; the caller turns it
// into an event (Fatal and Warning as warnings, Normal as normal).
type Result struct {
	Step     string
	Severity Severity
	// Reason is CamelCase; DefaultResultReason when the function set none.
	Reason  string
	Message string
	Target  ResultTarget
}

// A Condition is a status condition a step asked to set. Conditions of the
// types Loom owns (Ready, Synced, Healthy, UpToDate, Responsive) are dropped.
type Condition struct {
	Step    string
	Type    string
	Status  corev1.ConditionStatus
	Reason  string
	Message string
	Target  ResultTarget
}

// A Step is one step of a Pipeline Composition.
type Step struct {
	// Name is the step's name (pipeline[].step). Required.
	Name string
	// Function is the name of the function to call (functionRef.name).
	// Required.
	Function string
	// Input is the step's input as JSON (the RawExtension's bytes); nil or
	// "null" for none. It must be a JSON object.
	Input []byte
	// Credentials the step passes to its function.
	Credentials []Credential
	// AllowedExtraResources limits the resources the step's function may
	// require. nil: no limit (upstream behaviour). Non-nil, even empty: every
	// requirement must be allowed by an entry, or the step fails with
	// ErrDenied and nothing is fetched.
	AllowedExtraResources []AllowedResource
}

// CredentialSource says where a credential comes from.
type CredentialSource string

// Credential sources.
const (
	CredentialSourceNone   CredentialSource = "None"
	CredentialSourceSecret CredentialSource = "Secret"
)

// A Credential is one entry of a step's credentials.
type Credential struct {
	// Name is the key the function finds it under.
	Name string
	// Source: None (skipped) or Secret.
	Source CredentialSource
	// SecretRef names the Secret whose data is sent when Source is Secret.
	SecretRef *SecretRef
}

// SecretRef names a Secret.
type SecretRef struct {
	Namespace string
	Name      string
}

// A CredentialFetcher reads the data of a Secret named by a step's
// credentials. The renderer implements it with a Secret get.
type CredentialFetcher interface {
	FetchCredential(ctx context.Context, ref SecretRef) (map[string][]byte, error)
}

// CredentialFetcherFn adapts a function to a CredentialFetcher.
type CredentialFetcherFn func(ctx context.Context, ref SecretRef) (map[string][]byte, error)

// FetchCredential calls fn.
func (fn CredentialFetcherFn) FetchCredential(ctx context.Context, ref SecretRef) (map[string][]byte, error) {
	return fn(ctx, ref)
}

// A SchemaFetcher returns the OpenAPI v3 schema of a kind, or nil when the
// kind is unknown.
type SchemaFetcher interface {
	FetchSchema(ctx context.Context, apiVersion, kind string) (map[string]any, error)
}

// SchemaFetcherFn adapts a function to a SchemaFetcher.
type SchemaFetcherFn func(ctx context.Context, apiVersion, kind string) (map[string]any, error)

// FetchSchema calls fn.
func (fn SchemaFetcherFn) FetchSchema(ctx context.Context, apiVersion, kind string) (map[string]any, error) {
	return fn(ctx, apiVersion, kind)
}

// A StepReport says how one step went; the Executor passes one per step to
// its observer (for a duration metric) and returns them in the Outcome.
type StepReport struct {
	Step     string
	Function string
	// Calls is how many times the function was called (1 + the number of
	// times its requirements changed).
	Calls    int
	Duration time.Duration
	// Err is the step's error, nil on success.
	Err error
}

// Outcome is what a pipeline run produced. When Run fails, the Outcome still
// holds the results, conditions, watches and reports of the steps that ran
// (the failing one included), so the caller can emit events and keep watching.
type Outcome struct {
	// Desired is the desired state the last step returned. Empty on error.
	Desired State
	// Results of every step, in order.
	Results []Result
	// Conditions of every step, in order; later ones win for the same type.
	Conditions []Condition
	// TTL is the shortest non-zero TTL of the steps' responses; zero when no
	// step set one. The caller renders the XR again when it runs out.
	TTL time.Duration
	// Watches are the extra resources the steps asked Loom to watch (see the
	// package documentation), only ever for requirements the step was
	// allowed to make, in step order.
	Watches []Watch
	// Context is the context the last step returned. Crossplane discards it;
	// loomctl render can print it.
	Context map[string]any
	// Steps reports each step that ran.
	Steps []StepReport
}

// An Executor runs function pipelines. It is safe for concurrent use; every
// Run is independent.
type Executor struct {
	runner      Runner
	resources   ResourceFetcher
	credentials CredentialFetcher
	schemas     SchemaFetcher
	observe     func(StepReport)
	tracer      trace.Tracer
}

// An ExecutorOption configures an Executor.
type ExecutorOption func(*Executor)

// WithResourceFetcher sets how extra (required) resources are read. Without
// one, a step that requires resources fails.
func WithResourceFetcher(f ResourceFetcher) ExecutorOption {
	return func(e *Executor) { e.resources = f }
}

// WithCredentialFetcher sets how Secret credentials are read. Without one, a
// step with a Secret credential fails.
func WithCredentialFetcher(f CredentialFetcher) ExecutorOption {
	return func(e *Executor) { e.credentials = f }
}

// WithSchemaFetcher sets how required schemas are read, and makes the
// Executor advertise CAPABILITY_REQUIRED_SCHEMAS. Without one, every required
// schema is answered with an empty Schema (unknown kind).
func WithSchemaFetcher(f SchemaFetcher) ExecutorOption {
	return func(e *Executor) { e.schemas = f }
}

// WithStepObserver calls fn after every step, e.g. to record a duration
// histogram. fn must not block.
func WithStepObserver(fn func(StepReport)) ExecutorOption {
	return func(e *Executor) { e.observe = fn }
}

// WithTracerProvider replaces the global OpenTelemetry tracer provider.
func WithTracerProvider(tp trace.TracerProvider) ExecutorOption {
	return func(e *Executor) { e.tracer = tp.Tracer(tracerName) }
}

const tracerName = "github.com/loomxr/loom/pkg/fn"

// NewExecutor returns an Executor calling functions through r (a Client,
// usually behind a Cache).
func NewExecutor(r Runner, o ...ExecutorOption) *Executor {
	e := &Executor{runner: r, tracer: otel.GetTracerProvider().Tracer(tracerName)}
	for _, fn := range o {
		fn(e)
	}
	return e
}

// A RunOption configures one Run.
type RunOption func(*runOptions)

type runOptions struct {
	context map[string]any
}

// WithPipelineContext sets the context the first step receives (loomctl
// render's --context-values). By default it is an empty object.
func WithPipelineContext(c map[string]any) RunOption {
	return func(o *runOptions) { o.context = c }
}

// Run runs steps in order. Every step sees the same observed state, the
// desired state and context the previous step returned (the first: empty),
// its input and credentials, and the extra resources it requires (see the
// package documentation for the requirements loop). Run stops at the first
// failing step and returns a *StepError naming it; IsTransient and
// IsPermanent classify it. It blocks until the pipeline is done or ctx ends.
func (e *Executor) Run(ctx context.Context, steps []Step, observed State, o ...RunOption) (Outcome, error) {
	ro := runOptions{}
	for _, fn := range o {
		fn(&ro)
	}
	obs, err := toProtoState(observed)
	if err != nil {
		return Outcome{}, fmt.Errorf("cannot encode observed state: %w", err)
	}
	fctx := &structpb.Struct{}
	if ro.context != nil {
		if fctx, err = toStruct(ro.context); err != nil {
			return Outcome{}, fmt.Errorf("cannot encode pipeline context: %w", err)
		}
	}

	out := Outcome{}
	desired := &fnv1.State{}
	for _, s := range steps {
		rsp, rep, err := e.runStep(ctx, s, obs, desired, fctx, &out)
		out.Steps = append(out.Steps, rep)
		if e.observe != nil {
			e.observe(rep)
		}
		if err != nil {
			return out, err
		}
		if ttl := rsp.GetMeta().GetTtl().AsDuration(); ttl > 0 && (out.TTL == 0 || ttl < out.TTL) {
			out.TTL = ttl
		}
		desired = rsp.GetDesired()
		fctx = rsp.GetContext()
	}

	if out.Desired, err = fromProtoState(desired); err != nil {
		return out, fmt.Errorf("%w: %w", ErrMalformedResponse, err)
	}
	if out.Context, err = fromStruct(fctx); err != nil {
		return out, fmt.Errorf("%w: cannot decode the pipeline's context: %w", ErrMalformedResponse, err)
	}
	return out, nil
}

// runStep runs one step inside its span, collecting its results, conditions
// and watches into out.
func (e *Executor) runStep(ctx context.Context, s Step, observed, desired *fnv1.State, fctx *structpb.Struct, out *Outcome) (*fnv1.RunFunctionResponse, StepReport, error) {
	start := time.Now()
	ctx, span := e.tracer.Start(ctx, "fn.Step", trace.WithAttributes(
		attribute.String("loom.step", s.Name),
		attribute.String("loom.function", s.Function),
	))
	defer span.End()

	rsp, calls, watches, err := e.iterate(ctx, s, observed, desired, fctx)
	out.Watches = append(out.Watches, watches...)
	if rsp != nil {
		out.Results = append(out.Results, results(s.Name, rsp)...)
		out.Conditions = append(out.Conditions, conditions(s.Name, rsp)...)
	}
	rep := StepReport{Step: s.Name, Function: s.Function, Calls: calls, Duration: time.Since(start), Err: err}
	span.SetAttributes(attribute.Int("loom.calls", calls))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(otelcodes.Error, err.Error())
	}
	return rsp, rep, err
}

// iterate calls the step's function until its requirements stabilize. On a
// fatal result it returns the response with the error, so the caller can
// report the results.
func (e *Executor) iterate(ctx context.Context, s Step, observed, desired *fnv1.State, fctx *structpb.Struct) (*fnv1.RunFunctionResponse, int, []Watch, error) {
	req, pol, err := e.prepare(ctx, s, observed, desired, fctx)
	if err != nil {
		return nil, 0, nil, err
	}
	var (
		prev    *fnv1.Requirements
		watches []Watch
	)
	for i := 0; i <= MaxIterations; i++ {
		req.Meta = &fnv1.RequestMeta{Capabilities: e.capabilities()}
		tag, err := Tag(req)
		if err != nil {
			return nil, i, watches, stepError(s, fmt.Sprintf("cannot tag the request of pipeline step %q: %v", s.Name, err), err)
		}
		req.Meta.Tag = tag

		rsp, err := e.runner.RunFunction(ctx, s.Function, req)
		if err != nil {
			return nil, i + 1, watches, stepError(s, fmt.Sprintf("cannot run pipeline step %q (function %q): %v", s.Name, s.Function, err), err)
		}
		if rsp.GetMeta().GetTag() != tag {
			// The request's tag stays out of the message: it changes with
			// every observed state, and a message that changes on every
			// render would rewrite the XR's status, which renders it again.
			err := fmt.Errorf("%w: response tag %q does not echo the request's tag", ErrMalformedResponse, rsp.GetMeta().GetTag())
			return nil, i + 1, watches, stepError(s, fmt.Sprintf("cannot run pipeline step %q (function %q): %v", s.Name, s.Function, err), err)
		}
		if r := fatal(rsp); r != nil {
			msg := fmt.Sprintf("pipeline step %q returned a fatal result: %s", s.Name, r.GetMessage())
			return rsp, i + 1, watches, stepError(s, msg, fmt.Errorf("%w: %s", ErrFatalResult, r.GetMessage()))
		}
		reqs := rsp.GetRequirements()
		if proto.Equal(orEmpty(reqs), orEmpty(prev)) {
			if rsp.GetDesired() == nil {
				err := fmt.Errorf("%w: response has no desired state", ErrMalformedResponse)
				return nil, i + 1, watches, stepError(s, fmt.Sprintf("cannot run pipeline step %q (function %q): %v", s.Name, s.Function, err), err)
			}
			return rsp, i + 1, watches, nil
		}
		if i == MaxIterations {
			break
		}
		w, err := e.satisfy(ctx, s, pol, reqs, req)
		if err != nil {
			return nil, i + 1, watches, err
		}
		watches = w
		req.Context = rsp.GetContext()
		prev = reqs
	}
	msg := fmt.Sprintf("requirements of pipeline step %q didn't stabilize after %d iterations", s.Name, MaxIterations)
	return nil, MaxIterations + 1, watches, stepError(s, msg, ErrUnstable)
}

// prepare validates the step and builds its first request.
func (e *Executor) prepare(ctx context.Context, s Step, observed, desired *fnv1.State, fctx *structpb.Struct) (*fnv1.RunFunctionRequest, *policy, error) {
	invalid := func(format string, a ...any) error {
		err := fmt.Errorf(format, a...)
		return stepError(s, err.Error(), fmt.Errorf("%w: %w", ErrInvalidStep, err))
	}
	if s.Name == "" {
		return nil, nil, invalid("pipeline step of function %q has no name", s.Function)
	}
	if s.Function == "" {
		return nil, nil, invalid("pipeline step %q names no function", s.Name)
	}
	pol, err := compilePolicy(s.AllowedExtraResources)
	if err != nil {
		return nil, nil, invalid("pipeline step %q has invalid allowedExtraResources: %w", s.Name, err)
	}
	req := &fnv1.RunFunctionRequest{Observed: observed, Desired: desired, Context: fctx}
	if len(s.Input) > 0 && string(s.Input) != "null" {
		if req.Input, err = jsonToStruct(s.Input); err != nil {
			return nil, nil, invalid("input of pipeline step %q is not a JSON object: %w", s.Name, err)
		}
	}
	for _, c := range s.Credentials {
		switch c.Source {
		case CredentialSourceNone:
			continue
		case CredentialSourceSecret:
		default:
			return nil, nil, invalid("credential %q of pipeline step %q has unknown source %q", c.Name, s.Name, c.Source)
		}
		if c.SecretRef == nil {
			return nil, nil, invalid("credential %q of pipeline step %q has source Secret but no secretRef", c.Name, s.Name)
		}
		if e.credentials == nil {
			return nil, nil, invalid("credential %q of pipeline step %q needs a Secret, but this executor cannot read Secrets", c.Name, s.Name)
		}
		data, err := e.credentials.FetchCredential(ctx, *c.SecretRef)
		if err != nil {
			msg := fmt.Sprintf("cannot fetch credential %q of pipeline step %q from Secret %s/%s: %v", c.Name, s.Name, c.SecretRef.Namespace, c.SecretRef.Name, err)
			return nil, nil, stepError(s, msg, fmt.Errorf("%w: %w", ErrFetch, err))
		}
		if req.Credentials == nil {
			req.Credentials = map[string]*fnv1.Credentials{}
		}
		req.Credentials[c.Name] = &fnv1.Credentials{Source: &fnv1.Credentials_CredentialData{
			CredentialData: &fnv1.CredentialData{Data: data},
		}}
	}
	return req, pol, nil
}

// capabilities lists what this Executor supports.
func (e *Executor) capabilities() []fnv1.Capability {
	c := []fnv1.Capability{
		fnv1.Capability_CAPABILITY_CAPABILITIES,
		fnv1.Capability_CAPABILITY_REQUIRED_RESOURCES,
		fnv1.Capability_CAPABILITY_CREDENTIALS,
		fnv1.Capability_CAPABILITY_CONDITIONS,
	}
	if e.schemas != nil {
		c = append(c, fnv1.Capability_CAPABILITY_REQUIRED_SCHEMAS)
	}
	return c
}

// Tag returns the tag of req: the lower-case hex SHA-256 of its deterministic
// protobuf encoding with meta.tag empty. Equal requests have equal tags. It
// briefly modifies req.Meta, so req must not be used concurrently.
func Tag(req *fnv1.RunFunctionRequest) (string, error) {
	m := req.GetMeta()
	if m.GetTag() != "" {
		req.Meta = &fnv1.RequestMeta{Capabilities: m.GetCapabilities()}
		defer func() { req.Meta = m }()
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("cannot encode request: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// fatal returns the first fatal result of rsp, or nil.
func fatal(rsp *fnv1.RunFunctionResponse) *fnv1.Result {
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			return r
		}
	}
	return nil
}

func orEmpty(r *fnv1.Requirements) *fnv1.Requirements {
	if r == nil {
		return &fnv1.Requirements{}
	}
	return r
}

func target(t fnv1.Target) ResultTarget {
	if t == fnv1.Target_TARGET_COMPOSITE_AND_CLAIM {
		return TargetCompositeAndClaim
	}
	return TargetComposite
}

// results converts a response's results.
func results(step string, rsp *fnv1.RunFunctionResponse) []Result {
	out := make([]Result, 0, len(rsp.GetResults()))
	for _, r := range rsp.GetResults() {
		res := Result{Step: step, Severity: SeverityWarning, Reason: r.GetReason(), Message: r.GetMessage(), Target: target(r.GetTarget())}
		switch r.GetSeverity() { //nolint:exhaustive // Warning is the default severity, as set above.
		case fnv1.Severity_SEVERITY_FATAL:
			res.Severity = SeverityFatal
		case fnv1.Severity_SEVERITY_NORMAL:
			res.Severity = SeverityNormal
		}
		if res.Reason == "" {
			res.Reason = DefaultResultReason
		}
		out = append(out, res)
	}
	return out
}

// systemConditions are the condition types Loom owns; functions cannot set
// them.
var systemConditions = map[string]bool{"Ready": true, "Synced": true, "Healthy": true, "UpToDate": true, "Responsive": true} //nolint:gochecknoglobals // Treated as a constant.

// conditions converts a response's conditions, dropping system types.
func conditions(step string, rsp *fnv1.RunFunctionResponse) []Condition {
	var out []Condition
	for _, c := range rsp.GetConditions() {
		if systemConditions[c.GetType()] {
			continue
		}
		cond := Condition{Step: step, Type: c.GetType(), Status: corev1.ConditionUnknown, Reason: c.GetReason(), Message: c.GetMessage(), Target: target(c.GetTarget())}
		switch c.GetStatus() { //nolint:exhaustive // Unknown is the default status, as set above.
		case fnv1.Status_STATUS_CONDITION_TRUE:
			cond.Status = corev1.ConditionTrue
		case fnv1.Status_STATUS_CONDITION_FALSE:
			cond.Status = corev1.ConditionFalse
		}
		out = append(out, cond)
	}
	return out
}
