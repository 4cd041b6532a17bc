// Package fn runs Composition Functions: the steps of a Composition in mode
// Pipeline. It speaks Crossplane's FunctionRunnerService (proto/fn/v1, with
// the v1beta1 fallback), so any function built with Crossplane's function SDK
// works unchanged.
//
// # Parts
//
//   - Client reaches functions over gRPC: one connection per function,
//     mutual TLS (TLS 1.2+, client certificate, private CA) unless the
//     function's Target is explicitly Insecure, a per-call timeout, a
//     per-function concurrency cap, and the v1 → v1beta1 fallback on
//     Unimplemented. A Resolver maps a function name to its Target;
//     TargetFromFunction builds one from a loom.dev Function.
//   - Cache is a Runner in front of the Client that serves a response again
//     for a request with the same tag while the response's TTL lasts.
//   - Executor runs a pipeline: Run(ctx, steps, observed) returns the
//     desired state, results, conditions, the pipeline TTL and the watch
//     requests, or a *StepError naming the failed step. StepsFromPipeline
//     converts a Composition's spec.pipeline into Steps.
//
// A renderer wires them as:
//
//	client := fn.NewClient(resolver)
//	exec := fn.NewExecutor(fn.NewCache(client),
//		fn.WithResourceFetcher(resources),
//		fn.WithCredentialFetcher(secrets),
//		fn.WithStepObserver(recordDuration))
//	out, err := exec.Run(ctx, steps, fn.State{Composite: xr, Resources: composed})
//
// # One run
//
// Every step receives the observed state as it was when Run started, the
// desired state and context the previous step returned (the first step: empty
// desired state, empty context or WithPipelineContext), its input, and its
// credentials (Secret data read through the CredentialFetcher). The request's
// meta.tag is the hex SHA-256 of the request's deterministic encoding; the
// response must echo it. The pipeline TTL is the shortest non-zero TTL any
// step returned. A Fatal result stops the pipeline with the error
// `pipeline step "<step>" returned a fatal result: <message>`; Warning and
// Normal results are returned for events.
//
// # Requirements (extra resources)
//
// When a step's response carries requirements different (proto.Equal) from
// the ones it returned last time (none, on the first call), the Executor
// fetches every required resource through the ResourceFetcher, by name or by
// labels, in a namespace or not, sorted by namespace/name, and calls the step
// again with them: the deprecated requirements.extra_resources are answered
// in request.extra_resources, requirements.resources in
// request.required_resources, requirements.schemas in
// request.required_schemas. A requirement that matches nothing is answered
// with an empty Resources entry. The context the step returned is passed to
// the next call. This repeats until the requirements stabilize, at most
// MaxIterations times (MaxIterations+1 calls); then the step fails with
// `requirements of pipeline step "<step>" didn't stabilize after 5
// iterations`. A Fatal result ends the loop at once.
//
// # allowedExtraResources (Loom only)
//
// A step may carry AllowedExtraResources. When it is non-nil, every
// requirement must be allowed by one of its entries (see AllowedResource);
// otherwise the step fails with ErrDenied, naming the step and each denied
// requirement, and nothing at all is fetched.
//
// # Watching extra resources (Loom only)
//
// A function asks Loom to watch the resources of a requirement by giving the
// requirement a name that starts with WatchPrefix ("loom.dev/watch/"), for
// example:
//
//	rsp.Requirements = &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{
//		"loom.dev/watch/environment": {ApiVersion: "apiextensions.crossplane.io/v1beta1",
//			Kind: "EnvironmentConfig", Match: &fnv1.ResourceSelector_MatchLabels{...}},
//	}}
//
// The requirement is fetched like any other (the function finds the result
// under the same name) and is also returned in Outcome.Watches, with its
// selector and the resources it matched: the renderer records the matched
// resources on the XR's status.watchedResourceRefs (Watch.Refs) and the
// selector in the watcher's key-value bucket (Watch.Request, package
// watchreq), so a change of a matching resource, or a new one, renders the XR
// again. Only requirements the step was allowed to make (and
// that were therefore fetched) become watches; a failing step still returns
// the watches of its earlier calls, so an XR waiting for a missing resource
// recovers when it appears. The name is opaque to Crossplane, so such a
// function still works there (without the watch).
//
// # Errors
//
// Unreachable functions, timeouts, malformed responses (tag not echoed, no
// desired state), gRPC errors from the function and failed fetches are
// transient: retry with backoff (IsTransient). Fatal results, denied or
// invalid requirements, unstable requirements and invalid steps are permanent
// for this input (IsPermanent): set a condition and wait for a change. Every
// *StepError's message names the step.
//
// # Observability
//
// Each step runs in one OpenTelemetry span ("fn.Step", attributes loom.step,
// loom.function, loom.calls) from the global tracer provider, and is reported
// to the WithStepObserver hook with its duration.
package fn
