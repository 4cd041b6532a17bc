package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

func init() { register(newMigrateCommand) }

func newMigrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Move a platform from Crossplane v1 to Loom",
	}
	cmd.AddCommand(newMigrateCheckCommand())
	return cmd
}

// migrateCheckFlags are the flags of `loomctl migrate check`.
type migrateCheckFlags struct {
	output              string
	kubeconfig          string
	stateDir            string
	crossplaneNamespace string
	timeout             time.Duration
}

// errMigrateBlocked is returned when a check failed: the switch would break
// something. The report has been printed.
var errMigrateBlocked = errors.New("the switch to Loom would break something (see the checks that FAIL)")

func newMigrateCheckCommand() *cobra.Command {
	f := &migrateCheckFlags{}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "List what Loom will not carry over from a Crossplane v1 cluster, or needs first",
		Long: `Read a cluster that runs Crossplane v1 and list, with counts, what Loom adopts
(claims, composite resources, composed resources, CompositionRevisions) and
what it will not carry over or needs from the operator before the switch:

  functions           Composition functions (Pipeline mode) without a loom.dev
                      Function that gives Loom their endpoint
  composed-rbac       kinds of composed resources that no ClusterRole
                      aggregated into Loom's renderer or watcher covers
  secret-stores       composite resources that publish connection details to
                      an external secret store (publishConnectionDetailsTo),
                      which Loom does not do
  crossplane-running  Crossplane core still running: two engines would fight
                      over the same objects

It exits non-zero when a check FAILs. It only reads. The kubeconfig comes
from --kubeconfig, else $KUBECONFIG, else the local stack started by
'loomctl dev up', else ~/.kube/config.`,
		Example: `  loomctl migrate check
  loomctl migrate check --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.output, "output", "o", "", "output format: json (default a table)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, else the local stack's, else ~/.kube/config)")
	fl.StringVar(&f.stateDir, "state-dir", "", "state folder of the local stack, to find its kubeconfig (default <repo>/.loom)")
	fl.StringVar(&f.crossplaneNamespace, "crossplane-namespace", "crossplane-system", "namespace of Crossplane core's Deployment")
	fl.DurationVar(&f.timeout, "timeout", 2*time.Minute, "how long reading the cluster may take")
	return cmd
}

func (f *migrateCheckFlags) run(ctx context.Context, out io.Writer) error {
	if f.output != outputDefault && f.output != outputJSON {
		return fmt.Errorf("unknown output format %q: want json", f.output)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	rc, err := (&traceFlags{kubeconfig: f.kubeconfig, stateDir: f.stateDir}).restConfig()
	if err != nil {
		return err
	}
	rc.UserAgent = "loomctl-migrate"
	c, err := newKubeMigrateClient(rc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	rep, err := checkMigration(ctx, c, f.crossplaneNamespace)
	if err != nil {
		return err
	}
	if err := printMigrateReport(out, rep, f.output); err != nil {
		return err
	}
	if !rep.OK {
		return errMigrateBlocked
	}
	return nil
}

// Statuses of a migration check.
const (
	checkOK   = "OK"
	checkWarn = "WARN"
	checkFail = "FAIL"
)

// A MigrateCheck is one thing `loomctl migrate check` looked at.
type MigrateCheck struct {
	// Name identifies the check (functions, composed-rbac, ...).
	Name string `json:"name"`
	// Status is OK, WARN (carried over, but worth knowing) or FAIL (the
	// switch would break it).
	Status string `json:"status"`
	// Count is how many things the check found wanting.
	Count int `json:"count"`
	// Message says what to do, deterministically.
	Message string `json:"message"`
	// Items names what was found wanting, sorted.
	Items []string `json:"items,omitempty"`
}

// A MigrateReport is what `loomctl migrate check` prints.
type MigrateReport struct {
	// OK is false when a check FAILed.
	OK bool `json:"ok"`
	// Adopt counts what Loom takes over as it is, by kind of object.
	Adopt  map[string]int `json:"adopt"`
	Checks []MigrateCheck `json:"checks"`
}

// migrateClient reads a cluster for checkMigration. It is the seam the
// unit tests replace; the command's test runs it on a real API server.
type migrateClient interface {
	// List returns the objects of a kind (all namespaces); none if the
	// kind is not served.
	List(ctx context.Context, gvk schema.GroupVersionKind) ([]unstructured.Unstructured, error)
	// Resource returns the resource (plural) of a kind, and false if the
	// cluster does not serve it.
	Resource(gvk schema.GroupVersionKind) (string, bool)
}

// Kinds checkMigration reads.
var (
	xrdGVK         = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositeResourceDefinition"}
	compositionGVK = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "Composition"}
	revisionGVK    = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositionRevision"}
	loomFnGVK      = schema.GroupVersionKind{Group: "loom.dev", Version: "v1alpha1", Kind: "Function"}
	clusterRoleGVK = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}
	deploymentGVK  = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
)

// The rights the renderer and the watcher need on every composed kind (see
// deploy/helm/loom/files/rbac).
var composedRights = map[string][]string{ //nolint:gochecknoglobals // Treated as a constant.
	"renderer": {"get", "create", "patch", "delete"},
	"watcher":  {"get", "list", "watch"},
}

// checkMigration reads the cluster through c and reports what Loom adopts
// and what it would not carry over. It only reads.
func checkMigration(ctx context.Context, c migrateClient, crossplaneNamespace string) (*MigrateReport, error) {
	rep := &MigrateReport{OK: true, Adopt: map[string]int{}}
	xrds, err := c.List(ctx, xrdGVK)
	if err != nil {
		return nil, err
	}
	comps, err := c.List(ctx, compositionGVK)
	if err != nil {
		return nil, err
	}
	revs, err := c.List(ctx, revisionGVK)
	if err != nil {
		return nil, err
	}
	rep.Adopt["CompositeResourceDefinition"] = len(xrds)
	rep.Adopt["Composition"] = len(comps)
	rep.Adopt["CompositionRevision"] = len(revs)

	// Claims, XRs and the composed resources the XRs reference.
	composed := map[schema.GroupVersionKind]int{}
	var stores []string
	for _, x := range xrds {
		for _, which := range []string{"names", "claimNames"} {
			kind, _, _ := unstructured.NestedString(x.Object, "spec", which, "kind")
			if kind == "" {
				continue
			}
			group, _, _ := unstructured.NestedString(x.Object, "spec", "group")
			objs, err := c.List(ctx, schema.GroupVersionKind{Group: group, Version: referenceableVersion(&x), Kind: kind})
			if err != nil {
				return nil, err
			}
			label := "claims"
			if which == "names" {
				label = "composite resources"
			}
			rep.Adopt[label] += len(objs)
			if which != "names" {
				continue
			}
			for _, o := range objs {
				if _, ok, _ := unstructured.NestedMap(o.Object, "spec", "publishConnectionDetailsTo"); ok {
					stores = append(stores, o.GetKind()+"/"+o.GetName())
				}
				refs, _, _ := unstructured.NestedSlice(o.Object, "spec", "resourceRefs")
				for _, r := range refs {
					m, _ := r.(map[string]any)
					av, _ := m["apiVersion"].(string)
					k, _ := m["kind"].(string)
					if gv, err := schema.ParseGroupVersion(av); err == nil && k != "" {
						composed[gv.WithKind(k)]++
						rep.Adopt["composed resources"]++
					}
				}
			}
		}
	}

	// Kinds the Compositions compose (Resources mode), whether or not any
	// exists yet, and the functions of Pipeline mode.
	fnUsers := map[string][]string{}
	for _, comp := range comps {
		mode, _, _ := unstructured.NestedString(comp.Object, "spec", "mode")
		if mode == "Pipeline" {
			steps, _, _ := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
			for _, s := range steps {
				m, _ := s.(map[string]any)
				name, _, _ := unstructured.NestedString(m, "functionRef", "name")
				if name != "" && !slices.Contains(fnUsers[name], comp.GetName()) {
					fnUsers[name] = append(fnUsers[name], comp.GetName())
				}
			}
			continue
		}
		res, _, _ := unstructured.NestedSlice(comp.Object, "spec", "resources")
		for _, r := range res {
			m, _ := r.(map[string]any)
			av, _, _ := unstructured.NestedString(m, "base", "apiVersion")
			k, _, _ := unstructured.NestedString(m, "base", "kind")
			if gv, err := schema.ParseGroupVersion(av); err == nil && k != "" {
				if _, ok := composed[gv.WithKind(k)]; !ok {
					composed[gv.WithKind(k)] = 0
				}
			}
		}
	}

	fns, err := c.List(ctx, loomFnGVK)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, f := range fns {
		have[f.GetName()] = true
	}
	var missing []string
	for name, users := range fnUsers {
		if !have[name] {
			sort.Strings(users)
			missing = append(missing, fmt.Sprintf("%s (used by %s)", name, strings.Join(users, ", ")))
		}
	}
	rep.add(failIf(MigrateCheck{Name: "functions", Items: sorted(missing)},
		"every function the Compositions use has a loom.dev Function",
		"create a loom.dev Function (spec.endpoint) for each function: Loom calls functions at an endpoint, it does not install packages"))

	roles, err := c.List(ctx, clusterRoleGVK)
	if err != nil {
		return nil, err
	}
	var uncovered []string
	for gvk, n := range composed {
		res, ok := c.Resource(gvk)
		if !ok {
			uncovered = append(uncovered, fmt.Sprintf("%s (%d): the cluster does not serve this kind", gvkString(gvk), n))
			continue
		}
		var lacking []string
		for _, svc := range []string{"renderer", "watcher"} {
			if !rolesCover(roles, "loom.dev/aggregate-to-"+svc, gvk.Group, res, composedRights[svc]) {
				lacking = append(lacking, svc+" ("+strings.Join(composedRights[svc], ", ")+")")
			}
		}
		if len(lacking) > 0 {
			uncovered = append(uncovered, fmt.Sprintf("%s (%d): no aggregated ClusterRole grants %s", gvkString(gvk), n, strings.Join(lacking, "; ")))
		}
	}
	rep.add(failIf(MigrateCheck{Name: "composed-rbac", Items: sorted(uncovered)},
		"every composed kind is covered by the ClusterRoles aggregated into Loom's renderer and watcher",
		"add ClusterRoles labelled loom.dev/aggregate-to-renderer and loom.dev/aggregate-to-watcher for these kinds (deploy/helm/loom/files/rbac/*-aggregate-example.yaml)"))

	rep.add(failIf(MigrateCheck{Name: "secret-stores", Items: sorted(stores)},
		"no composite resource publishes to an external secret store",
		"Loom writes connection details to Kubernetes Secrets only (writeConnectionSecretToRef); move these composite resources off publishConnectionDetailsTo first"))

	running, err := crossplaneRunning(ctx, c, crossplaneNamespace)
	if err != nil {
		return nil, err
	}
	rep.add(failIf(MigrateCheck{Name: "crossplane-running", Items: running},
		"Crossplane core is not running",
		"scale Crossplane core to zero before starting Loom's services (kubectl -n "+crossplaneNamespace+" scale deployment crossplane --replicas=0)"))
	return rep, nil
}

// crossplaneRunning names Crossplane core's Deployments in ns that have
// replicas.
func crossplaneRunning(ctx context.Context, c migrateClient, ns string) ([]string, error) {
	ds, err := c.List(ctx, deploymentGVK)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range ds {
		if d.GetNamespace() != ns || d.GetName() != "crossplane" {
			continue
		}
		replicas, ok, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
		if !ok || replicas > 0 {
			out = append(out, fmt.Sprintf("Deployment %s/%s (%d replicas)", d.GetNamespace(), d.GetName(), max(replicas, 1)))
		}
	}
	return out, nil
}

// failIf completes c: OK with okMessage when it found nothing, else FAIL
// with fix.
func failIf(c MigrateCheck, okMessage, fix string) MigrateCheck {
	c.Count = len(c.Items)
	if c.Count == 0 {
		c.Status, c.Message = checkOK, okMessage
		return c
	}
	c.Status, c.Message = checkFail, fix
	return c
}

func (r *MigrateReport) add(c MigrateCheck) {
	if c.Status == checkFail {
		r.OK = false
	}
	r.Checks = append(r.Checks, c)
}

// referenceableVersion returns the XRD's referenceable version (the one its
// XRs are stored and served in).
func referenceableVersion(xrd *unstructured.Unstructured) string {
	vs, _, _ := unstructured.NestedSlice(xrd.Object, "spec", "versions")
	first := ""
	for _, v := range vs {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if first == "" {
			first = name
		}
		if ref, _ := m["referenceable"].(bool); ref {
			return name
		}
	}
	return first
}

// rolesCover reports whether the ClusterRoles labelled label=true together
// grant verbs on group/resource.
func rolesCover(roles []unstructured.Unstructured, label, group, resource string, verbs []string) bool {
	granted := map[string]bool{}
	for _, r := range roles {
		if r.GetLabels()[label] != "true" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(r.Object, "rules")
		for _, rule := range rules {
			m, _ := rule.(map[string]any)
			if !matches(m["apiGroups"], group) || !matches(m["resources"], resource) {
				continue
			}
			vs, _ := m["verbs"].([]any)
			for _, v := range vs {
				if s, ok := v.(string); ok {
					granted[s] = true
				}
			}
		}
	}
	for _, v := range verbs {
		if !granted[v] && !granted["*"] {
			return false
		}
	}
	return true
}

func matches(list any, want string) bool {
	l, _ := list.([]any)
	for _, v := range l {
		if s, ok := v.(string); ok && (s == want || s == "*") {
			return true
		}
	}
	return false
}

func gvkString(gvk schema.GroupVersionKind) string {
	return gvk.Kind + "." + gvk.Group + "/" + gvk.Version
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}

// printMigrateReport prints rep as a table or, with output json, as JSON.
func printMigrateReport(w io.Writer, rep *MigrateReport, output string) error {
	if output == outputJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ADOPTED AS THEY ARE\tCOUNT")
	kinds := make([]string, 0, len(rep.Adopt))
	for k := range rep.Adopt {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(tw, "%s\t%d\n", k, rep.Adopt[k])
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tCOUNT\tDETAIL")
	for _, c := range rep.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", c.Name, c.Status, c.Count, c.Message)
		for _, it := range c.Items {
			fmt.Fprintf(tw, "\t\t\t- %s\n", it)
		}
	}
	return tw.Flush()
}

// kubeMigrateClient is migrateClient on a real API server.
type kubeMigrateClient struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newKubeMigrateClient(rc *rest.Config) (*kubeMigrateClient, error) {
	dyn, mapper, err := dynamicClients(rc)
	if err != nil {
		return nil, err
	}
	return &kubeMigrateClient{dyn: dyn, mapper: mapper}, nil
}

func (c *kubeMigrateClient) Resource(gvk schema.GroupVersionKind) (string, bool) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return "", false
	}
	return m.Resource.Resource, true
}

func (c *kubeMigrateClient) List(ctx context.Context, gvk schema.GroupVersionKind) ([]unstructured.Unstructured, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot find the resource of %s: %w", gvkString(gvk), err)
	}
	var out []unstructured.Unstructured
	opts := metav1.ListOptions{Limit: 500}
	for {
		l, err := c.dyn.Resource(m.Resource).List(ctx, opts)
		if kerrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cannot list %s: %w", m.Resource.Resource, err)
		}
		out = append(out, l.Items...)
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}
