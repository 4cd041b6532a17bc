package fn

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

// store is an in-memory ResourceFetcher standing in for the API server. It
// records every selector it is asked for.
type store struct {
	objs []map[string]any

	mu      sync.Mutex
	fetched []Selector
}

func (s *store) FetchResources(_ context.Context, sel Selector) ([]map[string]any, error) {
	s.mu.Lock()
	s.fetched = append(s.fetched, sel)
	s.mu.Unlock()
	var out []map[string]any
	for _, o := range s.objs {
		md, _ := o["metadata"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		ns, name := namespacedName(o)
		if o["apiVersion"] != sel.APIVersion || o["kind"] != sel.Kind {
			continue
		}
		if (sel.Namespace != "" && ns != sel.Namespace) || (sel.Name != "" && name != sel.Name) {
			continue
		}
		match := true
		for k, v := range sel.MatchLabels {
			if labels[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, o)
		}
	}
	return out, nil
}

func (s *store) selectors() []Selector {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Selector(nil), s.fetched...)
}

func envConfig(name string, labels map[string]any, data map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "apiextensions.crossplane.io/v1beta1",
		"kind":       "EnvironmentConfig",
		"metadata":   map[string]any{"name": name, "labels": labels},
		"data":       data,
	}
}

// environments are returned out of order on purpose: the Executor sorts.
func environments() *store {
	return &store{objs: []map[string]any{
		envConfig("b", map[string]any{"env": "prod"}, map[string]any{"size": "large", "tier": "gold"}),
		envConfig("c", map[string]any{"env": "dev"}, map[string]any{"region": "us"}),
		envConfig("a", map[string]any{"env": "prod"}, map[string]any{"region": "eu", "size": "small"}),
	}}
}

func observedXR() State {
	return State{Composite: Resource{Object: map[string]any{
		"apiVersion": "example.org/v1alpha1",
		"kind":       "XThing",
		"metadata":   map[string]any{"name": "thing-1"},
		"spec":       map[string]any{"size": int64(3)},
	}}}
}

// input builds a test function's input.
func input(t *testing.T, spec map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"apiVersion": "testfn.loom.dev/v1alpha1", "kind": "Input", "spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// functions starts both test functions and returns a Client resolving them
// (and a few variants) by name.
func functions(t *testing.T) *Client {
	t.Helper()
	compose := startFunction(t, &composeFromEnv)
	read := startFunction(t, &readContext)
	slow := compose
	slow.Timeout = 500 * time.Millisecond
	c := NewClient(StaticResolver{
		"compose-from-env": compose,
		"read-context":     read,
		"slow":             slow,
		"unreachable":      {Endpoint: freeAddress(t), TLS: testPKI(t).clientTLS()},
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// fieldsOf returns spec.forProvider.fields of every desired composed resource.
func fieldsOf(s State) map[string]any {
	out := map[string]any{}
	for name, r := range s.Resources {
		spec, _ := r.Object["spec"].(map[string]any)
		fp, _ := spec["forProvider"].(map[string]any)
		out[name] = fp["fields"]
	}
	return out
}

func calls(o Outcome) []int {
	var out []int
	for _, s := range o.Steps {
		out = append(out, s.Calls)
	}
	return out
}

func TestRunWithTestFunctions(t *testing.T) {
	client := functions(t)

	prod := map[string]any{"env": "prod"}
	merged := map[string]any{"region": "eu", "size": "large", "tier": "gold"}
	withIndex := func(m map[string]any, i int64) map[string]any {
		m = maps.Clone(m)
		m["index"] = i
		return m
	}
	envSel := Selector{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", MatchLabels: map[string]string{"env": "prod"}}
	composeResult := func(n, found int) Result {
		return Result{Step: "compose", Severity: SeverityNormal, Reason: DefaultResultReason, Target: TargetCompositeAndClaim,
			Message: "composed " + strconv.Itoa(n) + " NopResources from " + strconv.Itoa(found) + " EnvironmentConfigs"}
	}
	found := func(n int) Condition {
		return Condition{Step: "compose", Type: "EnvironmentFound", Status: corev1.ConditionTrue, Reason: "Found",
			Message: "found " + strconv.Itoa(n) + " EnvironmentConfigs", Target: TargetCompositeAndClaim}
	}

	type want struct {
		fields     map[string]any
		calls      []int
		results    []Result
		conditions []Condition
		watches    []Watch
		fetched    []Selector
		ttl        time.Duration
	}
	cases := map[string]struct {
		reason string
		steps  []Step
		want   want
	}{
		"TwoStepsStabilizeAfterTwoCalls": {
			reason: "The first step requires EnvironmentConfigs by label, gets them (sorted) on its second call and stops there; the second reads the first's context.",
			steps: []Step{
				{Name: "compose", Function: "compose-from-env", Input: input(t, map[string]any{"labels": prod, "count": 2})},
				{Name: "read", Function: "read-context", Input: input(t, map[string]any{})},
			},
			want: want{
				fields: map[string]any{
					"nop-0": withIndex(merged, 0),
					"nop-1": withIndex(merged, 1),
					"from-context": map[string]any{"context": map[string]any{
						"requirement":  "environment",
						"found":        int64(2),
						"environments": []any{"a", "b"},
						"fields":       merged,
						"composed":     int64(2),
					}},
				},
				calls: []int{2, 1},
				results: []Result{
					composeResult(2, 2),
					{Step: "read", Severity: SeverityNormal, Reason: DefaultResultReason, Target: TargetComposite,
						Message: `composed "from-context" from context key "testfn.loom.dev/compose-from-env"`},
				},
				conditions: []Condition{found(2)},
				fetched:    []Selector{envSel},
				ttl:        time.Minute,
			},
		},
		"Watch": {
			reason: "A requirement named with the watch prefix is fetched and returned as a watch.",
			steps: []Step{
				{Name: "compose", Function: "compose-from-env", Input: input(t, map[string]any{"labels": prod, "watch": true})},
			},
			want: want{
				fields:     map[string]any{"nop-0": withIndex(merged, 0)},
				calls:      []int{2},
				results:    []Result{composeResult(1, 2)},
				conditions: []Condition{found(2)},
				watches: []Watch{{Step: "compose", Requirement: "loom.dev/watch/environment", Selector: envSel, Matched: []ObjectRef{
					{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", Name: "a"},
					{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", Name: "b"},
				}}},
				fetched: []Selector{envSel},
				ttl:     time.Minute,
			},
		},
		"DeprecatedExtraResources": {
			reason: "Requirements in the deprecated extra_resources field are answered in the request's extra_resources.",
			steps: []Step{
				{Name: "compose", Function: "compose-from-env", Input: input(t, map[string]any{"labels": prod, "deprecated": true})},
			},
			want: want{
				fields:     map[string]any{"nop-0": withIndex(merged, 0)},
				calls:      []int{2},
				results:    []Result{composeResult(1, 2)},
				conditions: []Condition{found(2)},
				fetched:    []Selector{envSel},
				ttl:        time.Minute,
			},
		},
		"NameMatchesNothing": {
			reason: "A requirement by a name that does not exist is answered with an empty entry, which the function sees as resolved.",
			steps: []Step{
				{Name: "compose", Function: "compose-from-env", Input: input(t, map[string]any{
					"require": map[string]any{"apiVersion": "apiextensions.crossplane.io/v1beta1", "kind": "EnvironmentConfig", "name": "missing"},
				})},
			},
			want: want{
				fields:  map[string]any{"nop-0": map[string]any{"index": int64(0)}},
				calls:   []int{2},
				results: []Result{composeResult(1, 0)},
				conditions: []Condition{{Step: "compose", Type: "EnvironmentFound", Status: corev1.ConditionFalse, Reason: "NotFound",
					Message: "no EnvironmentConfig matched", Target: TargetCompositeAndClaim}},
				fetched: []Selector{{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", Name: "missing"}},
				ttl:     time.Minute,
			},
		},
		"AllowedByLabelRegex": {
			reason: "A requirement that allowedExtraResources allows is fetched as usual.",
			steps: []Step{
				{Name: "compose", Function: "compose-from-env", Input: input(t, map[string]any{"labels": prod}),
					AllowedExtraResources: []AllowedResource{{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", LabelRegexes: map[string]string{"env": "prod|staging"}}}},
			},
			want: want{
				fields:     map[string]any{"nop-0": withIndex(merged, 0)},
				calls:      []int{2},
				results:    []Result{composeResult(1, 2)},
				conditions: []Condition{found(2)},
				fetched:    []Selector{envSel},
				ttl:        time.Minute,
			},
		},
		"ShortestTTL": {
			reason: "The pipeline TTL is the shortest non-zero TTL of its steps.",
			steps: []Step{
				{Name: "compose", Function: "compose-from-env", Input: input(t, map[string]any{"labels": prod, "behaviour": map[string]any{"ttl": "45s"}})},
				{Name: "read", Function: "read-context", Input: input(t, map[string]any{"behaviour": map[string]any{"ttl": "0s"}})},
			},
			want: want{
				fields: map[string]any{
					"nop-0": withIndex(merged, 0),
					"from-context": map[string]any{"context": map[string]any{
						"requirement": "environment", "found": int64(2), "environments": []any{"a", "b"}, "fields": merged, "composed": int64(1),
					}},
				},
				calls: []int{2, 1},
				results: []Result{composeResult(1, 2), {Step: "read", Severity: SeverityNormal, Reason: DefaultResultReason, Target: TargetComposite,
					Message: `composed "from-context" from context key "testfn.loom.dev/compose-from-env"`}},
				conditions: []Condition{found(2)},
				fetched:    []Selector{envSel},
				ttl:        45 * time.Second,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := environments()
			e := NewExecutor(client, WithResourceFetcher(s))
			out, err := e.Run(t.Context(), tc.steps, observedXR())
			if err != nil {
				t.Fatalf("%s\nRun(...): unexpected error: %v", tc.reason, err)
			}
			got := want{
				fields: fieldsOf(out.Desired), calls: calls(out), results: out.Results, conditions: out.Conditions,
				watches: out.Watches, fetched: s.selectors(), ttl: out.TTL,
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nRun(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRunFailuresWithTestFunctions(t *testing.T) {
	client := functions(t)
	prod := map[string]any{"env": "prod"}
	denyProd := []AllowedResource{{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", LabelRegexes: map[string]string{"env": "dev|staging"}}}

	type want struct {
		msg       string // exact message, or prefix when prefix is true
		prefix    bool
		is        error
		transient bool
		calls     int
		fetched   int
		results   int
	}
	cases := map[string]struct {
		reason string
		step   Step
		want   want
	}{
		"NeverStabilizes": {
			reason: "A function that changes its requirements on every call is stopped after 5 iterations (6 calls).",
			step:   Step{Name: "compose", Function: "compose-from-env", Input: input(t, map[string]any{"labels": prod, "behaviour": map[string]any{"unstable": true}})},
			want: want{
				msg: `requirements of pipeline step "compose" didn't stabilize after 5 iterations`,
				is:  ErrUnstable, calls: 6, fetched: 5,
			},
		},
		"Denied": {
			reason: "A requirement outside allowedExtraResources fails the step, and nothing is fetched.",
			step:   Step{Name: "compose", Function: "compose-from-env", Input: input(t, map[string]any{"labels": prod}), AllowedExtraResources: denyProd},
			want: want{
				msg: `pipeline step "compose" required resources that its allowedExtraResources do not allow: "environment" (resources; apiextensions.crossplane.io/v1beta1 EnvironmentConfig with labels env=prod)`,
				is:  ErrDenied, calls: 1,
			},
		},
		"DeniedEmptyPolicy": {
			reason: "An empty (non-nil) allowedExtraResources allows nothing.",
			step:   Step{Name: "compose", Function: "compose-from-env", Input: input(t, map[string]any{"labels": prod}), AllowedExtraResources: []AllowedResource{}},
			want: want{
				msg: `pipeline step "compose" required resources that its allowedExtraResources do not allow: "environment" (resources; apiextensions.crossplane.io/v1beta1 EnvironmentConfig with labels env=prod)`,
				is:  ErrDenied, calls: 1,
			},
		},
		"Fatal": {
			reason: "A Fatal result stops the pipeline with an error naming the step; the result is still returned.",
			step:   Step{Name: "compose", Function: "compose-from-env", Input: input(t, map[string]any{"behaviour": map[string]any{"fatal": "boom"}})},
			want:   want{msg: `pipeline step "compose" returned a fatal result: boom`, is: ErrFatalResult, calls: 1, results: 1},
		},
		"Timeout": {
			reason: "A function that does not answer within its timeout fails the step with a transient error.",
			step:   Step{Name: "compose", Function: "slow", Input: input(t, map[string]any{"behaviour": map[string]any{"sleep": "1m"}})},
			want: want{
				msg: `cannot run pipeline step "compose" (function "slow"): function timed out: no answer within `, prefix: true,
				is: ErrTimeout, transient: true, calls: 1,
			},
		},
		"Unreachable": {
			reason: "A function nobody listens for fails the step with a transient error.",
			step:   Step{Name: "compose", Function: "unreachable", Input: input(t, map[string]any{})},
			want: want{
				msg: `cannot run pipeline step "compose" (function "unreachable"): function is unreachable: `, prefix: true,
				is: ErrUnreachable, transient: true, calls: 1,
			},
		},
		"BadTag": {
			reason: "A response that does not echo the request's tag is malformed, and transient.",
			step:   Step{Name: "compose", Function: "compose-from-env", Input: input(t, map[string]any{"behaviour": map[string]any{"badTag": true}})},
			want: want{
				msg: `cannot run pipeline step "compose" (function "compose-from-env"): malformed function response: response tag "not-the-request-tag" does not echo the request's tag`,
				is:  ErrMalformedResponse, transient: true, calls: 1,
			},
		},
		"BadInput": {
			reason: "Input that is not a JSON object is an invalid step, permanent, and the function is never called.",
			step:   Step{Name: "compose", Function: "compose-from-env", Input: []byte(`[1,2]`)},
			want: want{
				msg: `input of pipeline step "compose" is not a JSON object: `, prefix: true,
				is: ErrInvalidStep,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := environments()
			e := NewExecutor(client, WithResourceFetcher(s))
			out, err := e.Run(t.Context(), []Step{tc.step}, observedXR())
			if err == nil {
				t.Fatalf("%s\nRun(...): want error, got none", tc.reason)
			}
			var se *StepError
			if !errors.As(err, &se) || se.Step != tc.step.Name {
				t.Errorf("%s\nRun(...): want a *StepError naming step %q, got %#v", tc.reason, tc.step.Name, err)
			}
			got := want{
				msg: err.Error(), prefix: tc.want.prefix, is: tc.want.is, transient: IsTransient(err),
				calls: calls(out)[0], fetched: len(s.selectors()), results: len(out.Results),
			}
			if tc.want.prefix && strings.HasPrefix(got.msg, tc.want.msg) {
				got.msg = tc.want.msg
			}
			if !errors.Is(err, tc.want.is) {
				got.is = err
			}
			if IsPermanent(err) == IsTransient(err) {
				t.Errorf("%s\nIsPermanent and IsTransient agree on %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
				t.Errorf("%s\nRun(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCacheWithTestFunctions(t *testing.T) {
	client := functions(t)
	var called atomic.Int32
	counting := RunnerFn(func(ctx context.Context, function string, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
		called.Add(1)
		return client.RunFunction(ctx, function, req)
	})
	now := time.Now()
	var clock atomic.Int64
	cache := NewCache(counting, WithCacheClock(func() time.Time { return now.Add(time.Duration(clock.Load())) }))
	e := NewExecutor(cache, WithResourceFetcher(environments()))
	steps := []Step{
		{Name: "compose", Function: "compose-from-env", Input: input(t, map[string]any{"labels": map[string]any{"env": "prod"}})},
		{Name: "read", Function: "read-context", Input: input(t, map[string]any{})},
	}

	first, err := e.Run(t.Context(), steps, observedXR())
	if err != nil {
		t.Fatal(err)
	}
	if got := called.Load(); got != 3 {
		t.Fatalf("first run: want 3 calls (2 + 1), got %d", got)
	}
	second, err := e.Run(t.Context(), steps, observedXR())
	if err != nil {
		t.Fatal(err)
	}
	if got := called.Load(); got != 3 {
		t.Errorf("second run within the TTL: want no more calls, got %d in all", got)
	}
	if hits, _ := cache.Stats(); hits != 3 {
		t.Errorf("second run: want 3 cache hits, got %d", hits)
	}
	if diff := cmp.Diff(first.Desired, second.Desired); diff != "" {
		t.Errorf("cached run: desired state differs: -first, +second:\n%s", diff)
	}

	changed := observedXR()
	changed.Composite.Object["spec"] = map[string]any{"size": int64(4)}
	if _, err := e.Run(t.Context(), steps, changed); err != nil {
		t.Fatal(err)
	}
	if got := called.Load(); got != 6 {
		t.Errorf("run with a changed XR: want 3 more calls (new tags), got %d in all", got)
	}

	clock.Store(int64(2 * time.Minute))
	if _, err := e.Run(t.Context(), steps, observedXR()); err != nil {
		t.Fatal(err)
	}
	if got := called.Load(); got != 9 {
		t.Errorf("run after the 1m TTL: want 3 more calls, got %d in all", got)
	}
}
