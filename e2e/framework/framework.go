// Package framework is the small toolkit of Loom's end-to-end tests: one
// local stack (pkg/stack) shared by all the tests of a package, clients for
// it, polling with a deadline, and applying YAML.
//
// A test package wires it once in TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(framework.Run(m)) }
//
// and each test takes the shared stack:
//
//	func TestSomething(t *testing.T) {
//		env := framework.StartStack(t)
//		framework.ApplyYAML(t, `apiVersion: v1
//	kind: Namespace
//	metadata: {name: something}`)
//		framework.Eventually(t, time.Minute, func() error { ... })
//	}
//
// The stack starts on the first StartStack call (a package whose tests are
// all skipped starts none) and stops when Run returns. Tests share it, so
// they name their objects uniquely and must not rely on being alone.
// When a test fails, the stack's state folder (with every process's log in
// logs/) is kept and its path printed.
package framework

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/loomxr/loom/pkg/stack"
)

// StartTimeout bounds the start of the shared stack.
const StartTimeout = 5 * time.Minute

// PollInterval is how often Eventually calls its function.
const PollInterval = 100 * time.Millisecond

// Env is the running stack with clients that act as the cluster admin.
// Its clients are safe for concurrent use.
type Env struct {
	// Stack is the running stack: kubeconfigs, logs, and process control.
	Stack *stack.Stack

	// Config is the admin REST configuration. Copy it before changing it
	// (rest.CopyConfig).
	Config *rest.Config

	// Kube is a typed client for the built-in kinds.
	Kube kubernetes.Interface

	// Dynamic is a client for any kind, CRDs included.
	Dynamic dynamic.Interface

	// Mapper maps kinds to resources; it rediscovers kinds it does not
	// know yet, so it also sees CRDs created during a test.
	Mapper meta.RESTMapper
}

// shared is the package's stack; started once, stopped by Run.
var shared struct {
	once     sync.Once
	env      *Env
	err      error
	stateDir string
}

// Run runs the tests of a package and then stops the shared stack, if any
// test started it. It returns m.Run's exit code, for os.Exit. The stack's
// state folder is removed unless a test failed.
func Run(m *testing.M) int {
	code := m.Run()
	if shared.env != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := shared.env.Stack.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "framework: cannot stop the stack: %v\n", err)
			code = max(code, 1)
		}
		cancel()
	}
	if shared.stateDir != "" {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "framework: stack state and logs kept in %s\n", shared.stateDir)
		} else {
			_ = os.RemoveAll(shared.stateDir)
		}
	}
	return code
}

// StartStack returns the package's shared stack, starting it on the first
// call: the control plane, NATS, Loom's services and the test provider,
// from `make build control-plane` output. It fails t if the stack cannot
// start (and every later caller with the same error). With -v, the stack's
// progress lines go to stderr. StartStack is safe for concurrent use; the
// package's TestMain must call Run, which stops the stack.
func StartStack(t testing.TB) *Env {
	t.Helper()
	shared.once.Do(func() {
		shared.env, shared.err = start()
	})
	if shared.err != nil {
		t.Fatalf("cannot start the stack: %v", shared.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs: %s", filepath.Join(shared.env.Stack.StateDir(), "logs"))
		}
	})
	return shared.env
}

func start() (*Env, error) {
	dir, err := os.MkdirTemp("", "loom-e2e-")
	if err != nil {
		return nil, fmt.Errorf("cannot create a state folder: %w", err)
	}
	shared.stateDir = dir
	progress := io.Writer(io.Discard)
	if testing.Verbose() {
		progress = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{StateDir: dir, Log: progress})
	if err != nil {
		return nil, err
	}
	env, err := newEnv(s)
	if err != nil {
		_ = s.Stop(context.Background())
		return nil, err
	}
	return env, nil
}

func newEnv(s *stack.Stack) (*Env, error) {
	rc := rest.CopyConfig(s.RESTConfig())
	// Tests create objects in bursts; the client must not be what they
	// measure.
	rc.QPS, rc.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create discovery client: %w", err)
	}
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), dc, nil)
	return &Env{Stack: s, Config: rc, Kube: kube, Dynamic: dyn, Mapper: mapper}, nil
}

// Eventually calls f every PollInterval until it returns nil, and fails t
// with f's last error if that does not happen within timeout. f should
// return quickly; it is never called concurrently with itself. The context
// of t bounds the wait too.
func Eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	if err := poll(t.Context(), timeout, f); err != nil {
		t.Fatal(err)
	}
}

func poll(ctx context.Context, timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("condition not met within %s: %w", timeout, err)
		case <-tick.C:
		}
	}
}

// ApplyYAML server-side-applies the objects in docs (each a stream of YAML
// or JSON documents) to the shared stack as the admin, in dependency order
// (see stack.Stack.ApplyObjects: Namespaces and CRDs first, then XRDs and
// Compositions, waiting for the kinds they define), and returns them as
// stored. When t ends (a subtest ends before its parent) it deletes them,
// in reverse order, without waiting for them to go; objects already gone
// are fine. To change an object a test applied, apply the new version with
// Env.Stack.ApplyObjects, which deletes nothing. It fails t on any error.
func ApplyYAML(t testing.TB, docs ...string) []*unstructured.Unstructured {
	t.Helper()
	env := StartStack(t)
	var objs []*unstructured.Unstructured
	for _, d := range docs {
		o, err := stack.DecodeManifests([]byte(d))
		if err != nil {
			t.Fatalf("cannot decode YAML: %v", err)
		}
		objs = append(objs, o...)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	applied, err := env.Stack.ApplyObjects(ctx, objs...)
	t.Cleanup(func() { env.deleteAll(t, applied) })
	if err != nil {
		t.Fatalf("cannot apply YAML: %v", err)
	}
	return applied
}

// deleteAll deletes objs in reverse order, ignoring those already gone.
func (e *Env) deleteAll(t testing.TB, objs []*unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, o := range slices.Backward(objs) {
		ri, err := e.Resource(o)
		if err == nil {
			err = ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		}
		if err != nil && !kerrors.IsNotFound(err) {
			t.Logf("cannot delete %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// discoveryWait is how long Resource waits for the API server's discovery
// to serve a kind it does not know.
const discoveryWait = 10 * time.Second

// Resource returns the dynamic client for o's kind, in o's namespace when
// the kind is namespaced.
func (e *Env) Resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	m, err := e.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	for deadline := time.Now().Add(discoveryWait); meta.IsNoMatchError(err); {
		// A kind defined after the mapper last looked: the API server's
		// discovery serves a CustomResourceDefinition a moment after it
		// is Established, so look again for a while.
		meta.MaybeResetRESTMapper(e.Mapper)
		if m, err = e.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); !meta.IsNoMatchError(err) || time.Now().After(deadline) {
			break
		}
		<-time.After(200 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot map %s to a resource: %w", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return e.Dynamic.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	return e.Dynamic.Resource(m.Resource), nil
}

// APIRequests returns the API server's count of requests
// (apiserver_request_total) summed over every series whose labels include
// all of labels, for example {"resource": "nopresources", "subresource":
// "status", "verb": "PATCH"}. The count is cumulative since the API server
// started: compare two readings.
func (e *Env) APIRequests(ctx context.Context, labels map[string]string) (float64, error) {
	b, err := e.Kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("cannot get API server metrics: %w", err)
	}
	return sumCounter(b, "apiserver_request_total", labels)
}

// sumCounter sums the samples of metric in Prometheus text exposition
// format whose labels include all of want.
func sumCounter(text []byte, metric string, want map[string]string) (float64, error) {
	var sum float64
	for line := range strings.Lines(string(text)) {
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			return 0, fmt.Errorf("cannot parse metric line %q", line)
		}
		if !hasLabels(labels, want) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, fmt.Errorf("cannot parse value of metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}

// hasLabels reports whether a label set such as `code="200",verb="GET"`
// includes every label of want. Label values of apiserver_request_total
// hold no commas or quotes.
func hasLabels(labels string, want map[string]string) bool {
	for k, v := range want {
		if !strings.Contains(","+labels+",", ","+k+"=\""+v+"\",") {
			return false
		}
	}
	return true
}
