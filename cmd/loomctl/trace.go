package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/loomxr/loom/pkg/stack"
)

func init() { register(newTraceCommand) }

// traceFlags are the flags of `loomctl trace`.
type traceFlags struct {
	namespace  string
	output     string
	watch      bool
	interval   time.Duration
	kubeconfig string
	stateDir   string
	timeout    time.Duration
}

func newTraceCommand() *cobra.Command {
	f := &traceFlags{}
	cmd := &cobra.Command{
		Use:   "trace KIND/NAME",
		Short: "Explain why a claim or composite resource is not ready",
		Long: `Show a claim or composite resource (XR) as a tree: the claim, its XR, and the
XR's composed resources (nested XRs included), each with its Synced and Ready
conditions and, for anything not ready, why: the failing patch or function
step (the XR's Synced condition and Loom's status.loom summary), the
references a composed resource waits for and on what (the binder's
ReferencesResolved condition), and the connection keys that are missing (the
secrets service's ConnectionDetailsReady condition).

KIND is a kind, a resource name or a short name, optionally with its group
(xpostgresqlinstances.database.example.org). The kubeconfig comes from
--kubeconfig, else $KUBECONFIG, else the local stack started by
'loomctl dev up' (<state-dir>/stack.json), else ~/.kube/config.`,
		Example: `  loomctl trace postgresqlinstance/my-db -n team-a
  loomctl trace XPostgreSQLInstance/my-db-x7k2p -o wide
  loomctl trace postgresqlinstance/my-db -n team-a --watch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.namespace, "namespace", "n", "default", "namespace of a claim (ignored for cluster-scoped kinds)")
	fl.StringVarP(&f.output, "output", "o", "", "output format: wide or json (default a table)")
	fl.BoolVarP(&f.watch, "watch", "w", false, "keep watching, printing the trace again whenever it changes")
	fl.DurationVar(&f.interval, "interval", 2*time.Second, "how often --watch reads the objects again")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "admin kubeconfig (default $KUBECONFIG, else the local stack's, else ~/.kube/config)")
	fl.StringVar(&f.stateDir, "state-dir", "", "state folder of the local stack, to find its kubeconfig (default <repo>/.loom)")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long reading the trace may take (each time, with --watch)")
	return cmd
}

func (f *traceFlags) run(ctx context.Context, out io.Writer, arg string) error {
	switch f.output {
	case outputDefault, outputWide, outputJSON:
	default:
		return fmt.Errorf("unknown output format %q: want wide or json", f.output)
	}
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || kind == "" || name == "" {
		return fmt.Errorf("cannot parse %q: want KIND/NAME", arg)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	rc, err := f.restConfig()
	if err != nil {
		return err
	}
	c, err := newKubeTraceClient(rc)
	if err != nil {
		return err
	}
	gvk, namespaced, err := c.kindFor(kind)
	if err != nil {
		return err
	}
	ns := f.namespace
	if !namespaced {
		ns = ""
	}
	read := func() ([]byte, error) {
		rctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		n, err := buildTrace(rctx, c, gvk, ns, name)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		err = printTrace(&b, n, f.output)
		return b.Bytes(), err
	}
	b, err := read()
	if err != nil {
		return err
	}
	if _, err := out.Write(b); err != nil {
		return err
	}
	if !f.watch {
		return nil
	}
	return watchTrace(ctx, out, f.interval, b, read)
}

// watchTrace reads the trace every interval and prints it whenever it
// differs from the last one printed, until ctx ends. A failed read is
// printed once, and the watch goes on.
func watchTrace(ctx context.Context, out io.Writer, interval time.Duration, last []byte, read func() ([]byte, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		b, err := read()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if err.Error() != lastErr {
				fmt.Fprintf(out, "\n%s cannot read the trace: %v\n", time.Now().Format(time.TimeOnly), err)
				lastErr = err.Error()
			}
			continue
		}
		lastErr = ""
		if bytes.Equal(b, last) {
			continue
		}
		if _, err := fmt.Fprintf(out, "\n%s\n%s", time.Now().Format(time.TimeOnly), b); err != nil {
			return err
		}
		last = b
	}
}

// restConfig finds the admin kubeconfig: the flag, $KUBECONFIG, the local
// stack, or the default loading rules.
func (f *traceFlags) restConfig() (*rest.Config, error) {
	path := f.kubeconfig
	if path == "" && os.Getenv("KUBECONFIG") == "" {
		path = localStackKubeconfig(f.stateDir)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cannot load kubeconfig: %w", err)
	}
	rc.UserAgent = "loomctl-trace"
	rc.QPS, rc.Burst = 50, 100
	return rc, nil
}

// localStackKubeconfig returns the admin kubeconfig of the local stack
// running in stateDir (default <repo>/.loom), or "" if none runs there.
func localStackKubeconfig(stateDir string) string {
	if stateDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return ""
		}
		root, err := stack.FindRepoRoot(wd)
		if err != nil {
			return ""
		}
		stateDir = filepath.Join(root, ".loom")
	}
	info, err := stack.ReadInfo(stateDir)
	if err != nil {
		return ""
	}
	return info.Kubeconfig
}

// kubeTraceClient reads objects of any kind with a dynamic client.
type kubeTraceClient struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newKubeTraceClient(rc *rest.Config) (*kubeTraceClient, error) {
	dyn, mapper, err := dynamicClients(rc)
	if err != nil {
		return nil, err
	}
	return &kubeTraceClient{dyn: dyn, mapper: mapper}, nil
}

// dynamicClients returns a dynamic client of rc and a REST mapper that
// learns kinds through discovery (cached) and expands short names.
func dynamicClients(rc *rest.Config) (dynamic.Interface, meta.RESTMapper, error) {
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot create dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot create discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(disc)
	return dyn, restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil), nil
}

// kindFor resolves what a user typed (a kind, resource or short name,
// optionally with a group) to a kind, and whether it is namespaced.
func (c *kubeTraceClient) kindFor(arg string) (schema.GroupVersionKind, bool, error) {
	gvr, gr := schema.ParseResourceArg(strings.ToLower(arg))
	var gvk schema.GroupVersionKind
	var err error
	if gvr != nil {
		gvk, err = c.mapper.KindFor(*gvr)
	}
	if gvr == nil || err != nil {
		gvk, err = c.mapper.KindFor(gr.WithVersion(""))
	}
	if err != nil {
		return gvk, false, fmt.Errorf("cannot find the kind %q: %w", arg, err)
	}
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return gvk, false, fmt.Errorf("cannot find the resource of %s: %w", gvk, err)
	}
	return gvk, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func (c *kubeTraceClient) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("cannot find the resource of %s: %w", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	return c.dyn.Resource(m.Resource).Get(ctx, name, metav1.GetOptions{})
}

var xrdGVR = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1", Resource: "compositeresourcedefinitions"}

func (c *kubeTraceClient) Definitions(ctx context.Context) ([]*unstructured.Unstructured, error) {
	l, err := c.dyn.Resource(xrdGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	return out, nil
}

var _ traceClient = (*kubeTraceClient)(nil)
