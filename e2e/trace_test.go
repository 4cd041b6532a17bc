//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/stack"
)

// The trace tests use kinds of their own: a TraceDB claim (XTraceDB XR)
// whose Compositions compose NopResources, in namespace trace-e2e.
const (
	traceGroup     = "trace.e2e.loom.dev"
	traceNamespace = "trace-e2e"
)

var (
	traceClaimGVK = schema.GroupVersionKind{Group: traceGroup, Version: "v1alpha1", Kind: "TraceDB"}
	traceXRGVK    = schema.GroupVersionKind{Group: traceGroup, Version: "v1alpha1", Kind: "XTraceDB"}
)

// traceKinds are the roles, namespaces, XRD, reference rule and
// Compositions of the trace tests:
//
//   - trace-ok composes a server NopResource with connection details for
//     every key of the XRD; its map transform knows sizes small and large
//     only, so a claim of size medium fails to render (a failing transform);
//   - trace-nokey lacks the endpoint connection detail (a missing key);
//   - trace-waiting adds a network that never becomes Ready, which the
//     server selects through the trace-e2e reference rule (an unresolved
//     reference);
//   - trace-fn runs a pipeline whose function cannot be reached.
const traceKinds = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:trace-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [trace.e2e.loom.dev]
  resources: [xtracedbs, tracedbs]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:trace-e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [trace.e2e.loom.dev]
  resources: [xtracedbs]
  verbs: [get, list, patch, delete]
- apiGroups: [trace.e2e.loom.dev]
  resources: [xtracedbs/status]
  verbs: [patch]
- apiGroups: [trace.e2e.loom.dev]
  resources: [tracedbs]
  verbs: [list, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:trace-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [trace.e2e.loom.dev]
  resources: [tracedbs]
  verbs: [get, update, patch]
- apiGroups: [trace.e2e.loom.dev]
  resources: [tracedbs/status, xtracedbs/status]
  verbs: [get, patch]
- apiGroups: [trace.e2e.loom.dev]
  resources: [xtracedbs]
  verbs: [get, create, patch, delete]
- apiGroups: [nop.crossplane.io]
  resources: [nopresources]
  verbs: [get, list, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:secrets:trace-e2e
  labels: {loom.dev/aggregate-to-secrets: "true"}
rules:
- apiGroups: [trace.e2e.loom.dev]
  resources: [xtracedbs, tracedbs]
  verbs: [get]
- apiGroups: [trace.e2e.loom.dev]
  resources: [xtracedbs/status, tracedbs/status]
  verbs: [patch]
---
apiVersion: v1
kind: Namespace
metadata: {name: trace-e2e}
---
apiVersion: v1
kind: Namespace
metadata: {name: trace-e2e-system}
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xtracedbs.trace.e2e.loom.dev
spec:
  group: trace.e2e.loom.dev
  names: {kind: XTraceDB, plural: xtracedbs}
  claimNames: {kind: TraceDB, plural: tracedbs}
  connectionSecretKeys: [username, password, endpoint]
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              parameters:
                type: object
                properties:
                  size: {type: string}
---
apiVersion: loom.dev/v1alpha1
kind: ReferenceRule
metadata:
  name: trace-e2e
spec:
  for:
    apiVersion: nop.crossplane.io/v1alpha1
    kind: NopResource
  references:
  - valueField: spec.forProvider.fields.traceNetwork
    referenceField: spec.forProvider.fields.traceNetworkRef
    selectorField: spec.forProvider.fields.traceNetworkSelector
    target: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    fromFieldPath: status.atProvider.fields.selfLink
    waitFor: {conditionType: Ready}
---
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: trace-e2e-unreachable}
spec: {endpoint: "127.0.0.1:1", insecure: true}
---
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: trace-fn
spec:
  compositeTypeRef: {apiVersion: trace.e2e.loom.dev/v1alpha1, kind: XTraceDB}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: trace-e2e-unreachable}
`

// traceServer is the server template of the trace Compositions; endpoint
// is its connection detail of the endpoint key, or "".
func traceServer(endpoint, extraFields string) string {
	s := `  - name: server
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider:
          conditionAfter:
          - {time: 1s, conditionType: Ready, conditionStatus: "True"}
          connectionDetails:
          - {name: password, value: nop-password}
          fields:
            tier: unknown
` + extraFields + `        writeConnectionSecretToRef: {namespace: trace-e2e-system}
    patches:
    - fromFieldPath: spec.parameters.size
      toFieldPath: spec.forProvider.fields.tier
      transforms:
      - type: map
        map: {small: tier-s, large: tier-l}
    - fromFieldPath: metadata.uid
      toFieldPath: spec.writeConnectionSecretToRef.name
      transforms:
      - type: string
        string: {fmt: "%s-server"}
    connectionDetails:
    - {name: password, fromConnectionSecretKey: password}
    - {name: username, type: FromValue, value: admin}
`
	if endpoint != "" {
		s += "    - {name: endpoint, type: FromValue, value: \"" + endpoint + "\"}\n"
	}
	return s
}

// traceComposition is a Resources-mode Composition of XTraceDB.
func traceComposition(name string, resources ...string) string {
	return `apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: ` + name + `
spec:
  compositeTypeRef: {apiVersion: trace.e2e.loom.dev/v1alpha1, kind: XTraceDB}
  writeConnectionSecretsToNamespace: trace-e2e-system
  resources:
` + strings.Join(resources, "")
}

// traceNetwork is a composed network that never becomes Ready.
const traceNetwork = `  - name: network
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      metadata:
        labels: {trace.e2e.loom.dev/role: network}
      spec:
        forProvider:
          conditionAfter:
          - {time: 0s, conditionType: Ready, conditionStatus: "False", conditionReason: Creating}
          fields: {selfLink: networks/trace}
`

// traceManifests returns every manifest of the trace tests' kinds.
func traceManifests() []string {
	return []string{
		traceKinds,
		traceComposition("trace-ok", traceServer("db.trace.example:3306", "")),
		traceComposition("trace-nokey", traceServer("", "")),
		traceComposition("trace-waiting", traceNetwork, traceServer("db.trace.example:3306",
			"            traceNetworkSelector: {matchControllerRef: true, matchLabels: {trace.e2e.loom.dev/role: network}}\n")),
	}
}

// traceClaim is a TraceDB claim of the given size using the Composition.
func traceClaim(name, composition, size string) string {
	return fmt.Sprintf(`apiVersion: trace.e2e.loom.dev/v1alpha1
kind: TraceDB
metadata:
  name: %s
  namespace: trace-e2e
spec:
  compositionRef: {name: %s}
  parameters: {size: %s}
  writeConnectionSecretToRef: {name: %s-conn}
`, name, composition, size, name)
}

// traceInstalled installs the trace tests' kinds once per package run, on
// the shared stack. They stay until the stack stops: deleting an XRD
// between tests would race with the next test applying it.
var traceInstalled struct {
	once sync.Once
	err  error
}

func traceSetup(t *testing.T) *framework.Env {
	t.Helper()
	env := framework.StartStack(t)
	traceInstalled.once.Do(func() {
		traceInstalled.err = installTraceKinds(t.Context(), env.Stack)
	})
	if traceInstalled.err != nil {
		t.Fatalf("cannot install the trace tests' kinds: %v", traceInstalled.err)
	}
	return env
}

// installTraceKinds applies traceManifests to s.
func installTraceKinds(ctx context.Context, s *stack.Stack) error {
	var objs []*unstructured.Unstructured
	for _, doc := range traceManifests() {
		o, err := stack.DecodeManifests([]byte(doc))
		if err != nil {
			return err
		}
		objs = append(objs, o...)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err := s.ApplyObjects(ctx, objs...)
	return err
}

// traceBuffer is a bytes.Buffer safe for a writer and a reader at once.
type traceBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *traceBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *traceBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// traceClaims returns the client of TraceDB claims in the test namespace.
func traceClaims(d dynamic.Interface) dynamic.ResourceInterface {
	return d.Resource(traceClaimGVK.GroupVersion().WithResource("tracedbs")).Namespace(traceNamespace)
}

// traceXRs returns the client of XTraceDBs.
func traceXRs(d dynamic.Interface) dynamic.ResourceInterface {
	return d.Resource(traceXRGVK.GroupVersion().WithResource("xtracedbs"))
}

// traceBoundXR returns the XR of a claim, or an error until it has one.
func traceBoundXR(ctx context.Context, d dynamic.Interface, claim string) (*unstructured.Unstructured, error) {
	cm, err := traceClaims(d).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	name, _, _ := unstructured.NestedString(cm.Object, "spec", "resourceRef", "name")
	if name == "" {
		return nil, fmt.Errorf("claim %s has no composite resource yet", claim)
	}
	return traceXRs(d).Get(ctx, name, metav1.GetOptions{})
}

// traceLoomctl returns the path of the loomctl binary `make build` made.
func traceLoomctl(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LOOM_BIN_DIR")
	if dir == "" {
		root, err := stack.FindRepoRoot(".")
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "bin")
	}
	p := filepath.Join(dir, "loomctl")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("cannot find loomctl (run `make build`): %v", err)
	}
	return p
}

// traceRun runs `loomctl trace` with args against the stack.
func traceRun(ctx context.Context, bin string, env *framework.Env, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"trace", "--kubeconfig=" + env.Stack.AdminKubeconfig()}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("loomctl trace %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// traceLine returns the first line of out that contains every part.
func traceLine(out string, parts ...string) (string, bool) {
	for _, l := range strings.Split(out, "\n") {
		ok := true
		for _, p := range parts {
			if !strings.Contains(l, p) {
				ok = false
				break
			}
		}
		if ok {
			return l, true
		}
	}
	return "", false
}

// TestTrace runs `loomctl trace` on claims held back in three ways and
// checks that the output names, on one screen, the resource and the cause
// of each: a failing transform, an unresolved reference and a missing
// connection key; and on a claim that became Ready.
func TestTrace(t *testing.T) {
	env := traceSetup(t)
	bin := traceLoomctl(t)
	ctx := t.Context()

	cases := map[string]struct {
		reason      string
		claim       string
		composition string
		size        string
		// want are lines of the output, each given by parts it contains.
		want [][]string
	}{
		"FailingTransform": {
			reason:      "A map transform without the claim's size fails the server template: the XR is not synced and says which patch failed.",
			claim:       "trace-transform",
			composition: "trace-ok",
			size:        "medium",
			want: [][]string{
				{"TraceDB/trace-transform (trace-e2e)", "False"},
				{"XTraceDB/trace-transform-", "False", "ReconcileError", `template "server"`, "medium"},
			},
		},
		"FailingFunctionStep": {
			reason:      "The pipeline's only step cannot reach its function: the XR is not synced and names the step and the function.",
			claim:       "trace-function",
			composition: "trace-fn",
			size:        "small",
			want: [][]string{
				{"TraceDB/trace-function (trace-e2e)"},
				{"XTraceDB/trace-function-", "False", `"compose"`, "trace-e2e-unreachable"},
			},
		},
		"UnresolvedReference": {
			reason:      "The server selects a network that never becomes Ready: its row says which field waits for what.",
			claim:       "trace-reference",
			composition: "trace-waiting",
			size:        "small",
			want: [][]string{
				{"TraceDB/trace-reference (trace-e2e)"},
				{"NopResource/trace-reference-", "traceNetwork", "NopResource", "Ready"},
				{"NopResource/trace-reference-", "False", "Creating"},
			},
		},
		"MissingConnectionKey": {
			reason:      "The Composition does not provide the endpoint key the XRD declares: the XR's connection condition names it.",
			claim:       "trace-nokey",
			composition: "trace-nokey",
			size:        "small",
			want: [][]string{
				{"TraceDB/trace-nokey (trace-e2e)"},
				{"MissingKeys", "endpoint"},
			},
		},
		"Ready": {
			reason:      "A claim whose XR and composed resources are ready shows them Available.",
			claim:       "trace-ready",
			composition: "trace-ok",
			size:        "small",
			want: [][]string{
				{"TraceDB/trace-ready (trace-e2e)", "True", "True", "Available"},
				{"XTraceDB/trace-ready-", "True", "True", "Available"},
				{"NopResource/trace-ready-", "True", "True", "Available"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			framework.ApplyYAML(t, traceClaim(tc.claim, tc.composition, tc.size))
			var out string
			framework.Eventually(t, 2*time.Minute, func() error {
				var err error
				if out, err = traceRun(ctx, bin, env, "tracedb/"+tc.claim, "-n", traceNamespace); err != nil {
					return err
				}
				var missing []string
				for _, parts := range tc.want {
					if _, ok := traceLine(out, parts...); !ok {
						missing = append(missing, strings.Join(parts, " … "))
					}
				}
				if len(missing) > 0 {
					return fmt.Errorf("%s\noutput lacks lines with:\n  %s\noutput:\n%s", tc.reason, strings.Join(missing, "\n  "), out)
				}
				return nil
			})
			if n := strings.Count(out, "\n"); n > 40 {
				t.Errorf("the trace takes %d lines, more than a screen:\n%s", n, out)
			}
			t.Logf("loomctl trace tracedb/%s:\n%s", tc.claim, out)

			// The same trace from the XR's side, and as JSON.
			xr, err := traceBoundXR(ctx, env.Dynamic, tc.claim)
			if err != nil {
				t.Fatal(err)
			}
			wide, err := traceRun(ctx, bin, env, "xtracedbs.trace.e2e.loom.dev/"+xr.GetName(), "-o", "wide")
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := traceLine(wide, "XTraceDB/"+xr.GetName()); !ok || strings.Contains(wide, "TraceDB/"+tc.claim+" ") {
				t.Errorf("the XR's trace does not start at the XR:\n%s", wide)
			}
			js, err := traceRun(ctx, bin, env, "tracedb/"+tc.claim, "-n", traceNamespace, "-o", "json")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(js, `"kind": "TraceDB"`) || !strings.Contains(js, `"children"`) {
				t.Errorf("JSON output lacks the claim or its children:\n%s", js)
			}
		})
	}
}

// TestTraceWatch checks that `loomctl trace --watch` prints the trace again
// when it changes: a claim that becomes Ready is printed at least twice,
// the last time Available. The claim is created paused, so that the first
// print shows it before it is Ready however fast Loom is, and unpaused once
// that print is out.
func TestTraceWatch(t *testing.T) {
	env := traceSetup(t)
	bin := traceLoomctl(t)
	claim := traceClaim("trace-watch", "trace-ok", "large")
	claim = strings.Replace(claim, "  namespace: trace-e2e\n", "  namespace: trace-e2e\n  annotations: {crossplane.io/paused: \"true\"}\n", 1)
	framework.ApplyYAML(t, claim)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// Wait for the claim to exist, so that the first print is not an error.
	framework.Eventually(t, time.Minute, func() error {
		_, err := traceClaims(env.Dynamic).Get(ctx, "trace-watch", metav1.GetOptions{})
		return err
	})
	cmd := exec.CommandContext(ctx, bin, "trace", "--kubeconfig="+env.Stack.AdminKubeconfig(),
		"tracedb/trace-watch", "-n", traceNamespace, "--watch", "--interval=200ms")
	out := &traceBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	framework.Eventually(t, time.Minute, func() error {
		if !strings.Contains(out.String(), "NAME") {
			return fmt.Errorf("no trace printed yet:\n%s", out.String())
		}
		return nil
	})
	patch := []byte(`{"metadata":{"annotations":{"crossplane.io/paused":null}}}`)
	if _, err := traceClaims(env.Dynamic).Patch(ctx, "trace-watch", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		s := out.String()
		if strings.Count(s, "NAME") < 2 {
			return fmt.Errorf("printed the trace fewer than twice:\n%s", s)
		}
		last := s[strings.LastIndex(s, "NAME"):]
		if _, ok := traceLine(last, "TraceDB/trace-watch (trace-e2e)", "True", "True", "Available"); !ok {
			return errors.New("the last trace is not Ready yet:\n" + last)
		}
		return nil
	})
}
