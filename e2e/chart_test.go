//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/loomxr/loom/pkg/natsauth"
	"github.com/loomxr/loom/pkg/stack"
)

// The chart tests render deploy/helm/loom with the Helm binary that `make
// chart-test` builds from the Go module proxy (tools/helm) and passes in
// LOOM_HELM; without it they skip. They check the rendered objects (replicas,
// RBAC scoping, security context, NATS settings), that the values schema
// refuses bad values, and that a real kube-apiserver accepts every object
// (server-side apply, dry run, strict field validation).

const (
	chartDir       = "../deploy/helm/loom"
	chartNamespace = "loom-system"
)

// chartKube is the Kubernetes release the chart is rendered for: the local
// control plane's (tools/go.mod writes it once).
func chartKube(t *testing.T) string {
	t.Helper()
	v, err := stack.KubernetesVersion("..")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var chartServices = []string{"watcher", "renderer", "binder", "secrets"}

// helmBinary returns the Helm binary to test with, or skips t.
func chartHelmBinary(t *testing.T) string {
	t.Helper()
	h := os.Getenv("LOOM_HELM")
	if h == "" {
		t.Skip("LOOM_HELM is not set: run `make chart-test`, which builds Helm and runs these tests")
	}
	return h
}

// helm runs the Helm binary with args and returns its standard output, or
// its error with standard error.
func chartHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chartHelmBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Helm must not read or write the user's configuration.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home, "KUBECONFIG="+filepath.Join(home, "none"))
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// renderChart renders the chart as release "loom" in chartNamespace with
// extra helm template arguments (-f FILE, --set K=V) and returns its objects.
func renderChart(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := chartHelm(t, append([]string{"template", "loom", chartDir, "--namespace", chartNamespace, "--kube-version", chartKube(t)}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := stack.DecodeManifests([]byte(out))
	if err != nil {
		t.Fatalf("cannot decode the rendered chart: %v", err)
	}
	return objs
}

// chartProduction is the argument that renders with the production values.
var chartProduction = []string{"-f", chartDir + "/values-production.yaml"}

// find returns the rendered object of kind and name, or fails t.
func chartFind(t *testing.T, objs []*unstructured.Unstructured, kind, name string, into any) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
				t.Fatalf("cannot convert %s %s: %v", kind, name, err)
			}
			return
		}
	}
	t.Fatalf("the chart renders no %s %s", kind, name)
}

// names returns the names of the rendered objects of kind, sorted.
func chartNames(objs []*unstructured.Unstructured, kind string) []string {
	var out []string
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o.GetName())
		}
	}
	sort.Strings(out)
	return out
}

func chartPtr[T any](v T) *T { return &v }

// container returns the only container of a Deployment.
func chartContainer(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("Deployment %s has %d containers, want 1", d.Name, n)
	}
	return d.Spec.Template.Spec.Containers[0]
}

// envOf returns a container's environment by name.
func chartEnv(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func TestChartDefaults(t *testing.T) {
	objs := renderChart(t)
	svcNames := []string{"loom-binder", "loom-renderer", "loom-secrets", "loom-watcher"}
	// The RBAC manager has a Deployment and a ServiceAccount, and no Service
	// or disruption budget (one replica, no traffic); the admission
	// component a Service for its webhooks.
	withManager := []string{"loom-admission", "loom-binder", "loom-rbac-manager", "loom-renderer", "loom-secrets", "loom-watcher"}
	for kind, want := range map[string][]string{
		"Deployment":          withManager,
		"ServiceAccount":      withManager,
		"Service":             append([]string{"loom-admission"}, svcNames...),
		"PodDisruptionBudget": svcNames,
		"ConfigMap":           {"loom-dashboard"},
		// The certificates of the admission webhooks and of the channel of
		// connection details.
		"Secret": {"loom-admission-tls", "loom-renderer-grpc", "loom-secrets-grpc"},
		// Opt-in, or only with autoscaling.
		"HorizontalPodAutoscaler": nil,
		"ServiceMonitor":          nil,
		"NetworkPolicy":           nil,
	} {
		if diff := cmp.Diff(want, chartNames(objs, kind)); diff != "" {
			t.Errorf("%s objects: -want, +got:\n%s", kind, diff)
		}
	}

	for _, s := range chartServices {
		t.Run(s, func(t *testing.T) {
			var d appsv1.Deployment
			chartFind(t, objs, "Deployment", "loom-"+s, &d)
			if diff := cmp.Diff(chartPtr(int32(1)), d.Spec.Replicas); diff != "" {
				t.Errorf("replicas: -want, +got:\n%s", diff)
			}
			spec := d.Spec.Template.Spec
			if spec.ServiceAccountName != "loom-"+s {
				t.Errorf("serviceAccountName %q, want loom-%s", spec.ServiceAccountName, s)
			}
			chartCheckSecurity(t, spec)
			c := chartContainer(t, &d)
			if c.Image != "ghcr.io/loomxr/loom-"+s+":0.1.0" {
				t.Errorf("image %q, want ghcr.io/loomxr/loom-%s:0.1.0", c.Image, s)
			}

			// Probes on the port the service runtime serves (LOOM_HEALTH_ADDR).
			env := chartEnv(c)
			if env["LOOM_HEALTH_ADDR"].Value != ":8081" {
				t.Errorf("LOOM_HEALTH_ADDR %q, want :8081", env["LOOM_HEALTH_ADDR"].Value)
			}
			wantPorts := []corev1.ContainerPort{{Name: "health", ContainerPort: 8081, Protocol: corev1.ProtocolTCP}}
			if s == "secrets" {
				wantPorts = append(wantPorts, corev1.ContainerPort{Name: "grpc", ContainerPort: 9443, Protocol: corev1.ProtocolTCP})
			}
			if diff := cmp.Diff(wantPorts, c.Ports); diff != "" {
				t.Errorf("ports: -want, +got:\n%s", diff)
			}
			for name, p := range map[string]struct {
				probe *corev1.Probe
				path  string
			}{"liveness": {c.LivenessProbe, "/healthz"}, "readiness": {c.ReadinessProbe, "/readyz"}, "startup": {c.StartupProbe, "/healthz"}} {
				if p.probe == nil || p.probe.HTTPGet == nil {
					t.Errorf("%s probe: none", name)
					continue
				}
				if p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "health" {
					t.Errorf("%s probe: GET %s on %s, want %s on health", name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
				}
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("resources %v: want a CPU request and a memory limit", c.Resources)
			}
			// One NATS user per service, its password from its own key.
			chartCheckNATSEnv(t, c, map[string]string{
				"LOOM_NATS_URL":       "nats://nats.nats.svc.cluster.local:4222",
				"LOOM_BUS_REPLICAS":   "1",
				"LOOM_BUS_PARTITIONS": "32",
				"LOOM_NATS_USER":      natsauth.User(s),
			}, &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "loom-nats"}, Key: s})
			// The state plane is on: the watcher writes the object mirror,
			// the workers read through it.
			if v := map[string]string{"watcher": "LOOM_WATCHER_MIRROR", "binder": "LOOM_MIRROR", "renderer": "LOOM_MIRROR", "secrets": "LOOM_MIRROR"}[s]; v != "" && env[v].Value != "true" {
				t.Errorf("%s %q, want true (the state plane on by default)", v, env[v].Value)
			}

			var pdb policyv1.PodDisruptionBudget
			chartFind(t, objs, "PodDisruptionBudget", "loom-"+s, &pdb)
			if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
			}
			if !chartSelects(pdb.Spec.Selector, d.Spec.Template.Labels) || !chartSelects(d.Spec.Selector, d.Spec.Template.Labels) {
				t.Errorf("the PodDisruptionBudget or the Deployment does not select the service's pods")
			}
			for _, tsc := range spec.TopologySpreadConstraints {
				if !chartSelects(tsc.LabelSelector, d.Spec.Template.Labels) {
					t.Errorf("topology spread on %s does not select the service's pods", tsc.TopologyKey)
				}
			}
			if len(spec.TopologySpreadConstraints) != 2 {
				t.Errorf("%d topology spread constraints, want zone and host", len(spec.TopologySpreadConstraints))
			}
		})
	}

	var cm corev1.ConfigMap
	chartFind(t, objs, "ConfigMap", "loom-dashboard", &cm)
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, want grafana_dashboard: \"1\"", cm.Labels)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []any  `json:"panels"`
	}
	if err := json.Unmarshal([]byte(cm.Data["loom.json"]), &dash); err != nil || dash.Title == "" || len(dash.Panels) == 0 {
		t.Errorf("dashboard loom.json: title %q, %d panels, error %v; want a dashboard", dash.Title, len(dash.Panels), err)
	}
}

// checkSecurity checks the secure pod defaults: non-root, read-only root
// file system, no capabilities, no privilege escalation, RuntimeDefault
// seccomp.
func chartCheckSecurity(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and RuntimeDefault seccomp", psc)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Errorf("pod shares a host namespace")
	}
	for _, c := range spec.Containers {
		want := &corev1.SecurityContext{
			AllowPrivilegeEscalation: chartPtr(false),
			ReadOnlyRootFilesystem:   chartPtr(true),
			RunAsNonRoot:             chartPtr(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
		if diff := cmp.Diff(want, c.SecurityContext); diff != "" {
			t.Errorf("container %s securityContext: -want, +got:\n%s", c.Name, diff)
		}
	}
}

// checkNATSEnv checks a container's NATS settings: values by variable, and
// the Secret key of the password (nil: no password at all).
func chartCheckNATSEnv(t *testing.T, c corev1.Container, want map[string]string, password *corev1.SecretKeySelector) {
	t.Helper()
	env := chartEnv(c)
	for k, v := range want {
		if got, ok := env[k]; !ok || got.Value != v {
			t.Errorf("%s = %q (set: %t), want %q", k, got.Value, ok, v)
		}
	}
	var got *corev1.SecretKeySelector
	if p, ok := env["LOOM_NATS_PASSWORD"]; ok {
		if p.Value != "" || p.ValueFrom == nil {
			t.Errorf("LOOM_NATS_PASSWORD is a literal value, want a Secret reference")
		} else {
			got = p.ValueFrom.SecretKeyRef
		}
	}
	if diff := cmp.Diff(password, got); diff != "" {
		t.Errorf("LOOM_NATS_PASSWORD from: -want, +got:\n%s", diff)
	}
}

func chartSelects(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(l))
}

func TestChartProduction(t *testing.T) {
	objs := renderChart(t, chartProduction...)
	cases := map[string]struct {
		replicas *int32 // nil: the HorizontalPodAutoscaler decides
		min, max int32
	}{
		"watcher":  {replicas: chartPtr(int32(2))},
		"renderer": {min: 3, max: 12},
		"binder":   {min: 2, max: 8},
		"secrets":  {min: 2, max: 6},
	}
	for s, tc := range cases {
		t.Run(s, func(t *testing.T) {
			var d appsv1.Deployment
			chartFind(t, objs, "Deployment", "loom-"+s, &d)
			if diff := cmp.Diff(tc.replicas, d.Spec.Replicas); diff != "" {
				t.Errorf("replicas: -want, +got:\n%s", diff)
			}
			if tc.replicas == nil {
				var h autoscalingv2.HorizontalPodAutoscaler
				chartFind(t, objs, "HorizontalPodAutoscaler", "loom-"+s, &h)
				if h.Spec.ScaleTargetRef.Name != d.Name || h.Spec.ScaleTargetRef.Kind != "Deployment" {
					t.Errorf("the HorizontalPodAutoscaler scales %s %s, want Deployment %s", h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name, d.Name)
				}
				if got := [2]int32{*h.Spec.MinReplicas, h.Spec.MaxReplicas}; got != [2]int32{tc.min, tc.max} {
					t.Errorf("HorizontalPodAutoscaler min, max = %v, want %v", got, [2]int32{tc.min, tc.max})
				}
			}
			chartCheckSecurity(t, d.Spec.Template.Spec)
			c := chartContainer(t, &d)
			chartCheckNATSEnv(t, c, map[string]string{
				"LOOM_NATS_URL":     "tls://nats.nats.svc.cluster.local:4222",
				"LOOM_BUS_REPLICAS": "3",
				"LOOM_NATS_TLS_CA":  "/etc/loom/nats-tls/ca.crt",
			}, &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "loom-nats"}, Key: s})

			var np networkingv1.NetworkPolicy
			chartFind(t, objs, "NetworkPolicy", "loom-"+s, &np)
			if !chartSelects(&np.Spec.PodSelector, d.Spec.Template.Labels) {
				t.Errorf("the NetworkPolicy does not select the service's pods")
			}
			var nats bool
			for _, e := range np.Spec.Egress {
				for _, p := range e.Ports {
					if p.Port != nil && p.Port.IntValue() == 4222 && len(e.To) == 1 && e.To[0].NamespaceSelector != nil {
						nats = true
					}
				}
			}
			if !nats {
				t.Errorf("the NetworkPolicy lets no traffic reach NATS on 4222 in its namespace")
			}
		})
	}
	if diff := cmp.Diff([]string{"loom-binder", "loom-renderer", "loom-secrets", "loom-watcher"}, chartNames(objs, "ServiceMonitor")); diff != "" {
		t.Errorf("ServiceMonitors: -want, +got:\n%s", diff)
	}
	sm := chartFindUnstructured(t, objs, "ServiceMonitor", "loom-renderer")
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != "health" || eps[0].(map[string]any)["path"] != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %v, want /metrics on port health", eps)
	}
}

func chartFindUnstructured(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("the chart renders no %s %s", kind, name)
	return nil
}

// TestChartNATS renders the NATS settings each way they can be given.
func TestChartNATS(t *testing.T) {
	secret := func(name, key string) *corev1.SecretKeySelector {
		return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
	}
	cases := map[string]struct {
		reason   string
		args     []string
		env      map[string]string
		absent   []string
		password *corev1.SecretKeySelector
		volumes  map[string][]string // secret volume name -> the keys it mounts
	}{
		"URLAndReplicas": {
			reason:   "Several URLs and three stream replicas reach every service.",
			args:     []string{"--set", "nats.url=nats://a:4222\\,nats://b:4222", "--set", "nats.streamReplicas=3", "--set", "nats.partitions=64"},
			env:      map[string]string{"LOOM_NATS_URL": "nats://a:4222,nats://b:4222", "LOOM_BUS_REPLICAS": "3", "LOOM_BUS_PARTITIONS": "64"},
			password: secret("loom-nats", "binder"),
		},
		"UserAndSecret": {
			reason:   "The user name and the Secret can be changed; the key stays the service's name.",
			args:     []string{"--set", "nats.auth.users.binder=binder-prod", "--set", "nats.auth.secretName=nats-users"},
			env:      map[string]string{"LOOM_NATS_USER": "binder-prod"},
			password: secret("nats-users", "binder"),
		},
		"NoAuth": {
			reason: "Without authentication there are no credentials at all.",
			args:   []string{"--set", "nats.auth.mode=none"},
			absent: []string{"LOOM_NATS_USER", "LOOM_NATS_PASSWORD", "LOOM_NATS_CREDS"},
		},
		"Creds": {
			reason:  "A credentials file: each pod mounts only its own service's key.",
			args:    []string{"--set", "nats.auth.mode=creds"},
			env:     map[string]string{"LOOM_NATS_CREDS": "/etc/loom/nats/nats.creds"},
			absent:  []string{"LOOM_NATS_USER", "LOOM_NATS_PASSWORD"},
			volumes: map[string][]string{"nats-creds": {"binder.creds"}},
		},
		"MutualTLS": {
			reason:   "TLS with a client certificate mounts the CA, certificate and key.",
			args:     []string{"--set", "nats.tls.enabled=true", "--set", "nats.tls.clientCertificate=true"},
			env:      map[string]string{"LOOM_NATS_TLS_CA": "/etc/loom/nats-tls/ca.crt", "LOOM_NATS_TLS_CERT": "/etc/loom/nats-tls/tls.crt", "LOOM_NATS_TLS_KEY": "/etc/loom/nats-tls/tls.key"},
			password: secret("loom-nats", "binder"),
			volumes:  map[string][]string{"nats-tls": {"ca.crt", "tls.crt", "tls.key"}},
		},
		"TLSWithoutClientCertificate": {
			reason:   "TLS alone mounts only the CA.",
			args:     []string{"--set", "nats.tls.enabled=true"},
			env:      map[string]string{"LOOM_NATS_TLS_CA": "/etc/loom/nats-tls/ca.crt"},
			absent:   []string{"LOOM_NATS_TLS_CERT", "LOOM_NATS_TLS_KEY"},
			password: secret("loom-nats", "binder"),
			volumes:  map[string][]string{"nats-tls": {"ca.crt"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := renderChart(t, tc.args...)
			var d appsv1.Deployment
			chartFind(t, objs, "Deployment", "loom-binder", &d)
			c := chartContainer(t, &d)
			chartCheckNATSEnv(t, c, tc.env, tc.password)
			env := chartEnv(c)
			for _, k := range tc.absent {
				if _, ok := env[k]; ok {
					t.Errorf("%s\n%s is set", tc.reason, k)
				}
			}
			got := map[string][]string{}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Secret == nil {
					continue
				}
				for _, it := range v.Secret.Items {
					got[v.Name] = append(got[v.Name], it.Key)
				}
				if len(v.Secret.Items) == 0 {
					got[v.Name] = []string{"(every key)"}
				}
			}
			want := tc.volumes
			if want == nil {
				want = map[string][]string{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nSecret volumes: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// rbacFile reads the roles of files/rbac/<name>.yaml as the stack does.
func chartRBACFile(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := stack.ReadManifests(filepath.Join(chartDir, "files", "rbac", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestChartRBAC checks that the chart grants each service exactly the roles
// of its file in files/rbac (the ones the local stack applies and the
// end-to-end tests run with), and what that means for Secrets.
func TestChartRBAC(t *testing.T) {
	objs := renderChart(t)
	roles := map[string]rbacv1.ClusterRole{}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" {
			var r rbacv1.ClusterRole
			chartFind(t, objs, "ClusterRole", o.GetName(), &r)
			roles[r.Name] = r
		}
	}
	bound := map[string][]string{} // service account -> ClusterRoles
	for _, o := range objs {
		if o.GetKind() == "RoleBinding" {
			t.Errorf("RoleBinding %s: the services' files hold ClusterRoles only", o.GetName())
		}
		if o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		var b rbacv1.ClusterRoleBinding
		chartFind(t, objs, "ClusterRoleBinding", o.GetName(), &b)
		if _, ok := roles[b.RoleRef.Name]; !ok {
			t.Errorf("ClusterRoleBinding %s binds ClusterRole %s, which the chart does not install", b.Name, b.RoleRef.Name)
		}
		for _, s := range b.Subjects {
			if s.Kind != "ServiceAccount" || s.Namespace != chartNamespace {
				t.Errorf("ClusterRoleBinding %s binds %s %s/%s, want a ServiceAccount in %s", b.Name, s.Kind, s.Namespace, s.Name, chartNamespace)
			}
			bound[s.Name] = append(bound[s.Name], b.RoleRef.Name)
		}
	}

	for _, s := range append(slices.Clone(chartServices), "rbac-manager") {
		t.Run(s, func(t *testing.T) {
			// The file's roles, installed as they are and bound to the service.
			var want []string
			for _, f := range chartRBACFile(t, s) {
				want = append(want, f.GetName())
				var fr rbacv1.ClusterRole
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(f.Object, &fr); err != nil {
					t.Fatal(err)
				}
				got, ok := roles[fr.Name]
				if !ok {
					t.Errorf("ClusterRole %s of files/rbac/%s.yaml is not installed", fr.Name, s)
					continue
				}
				if fr.AggregationRule != nil {
					// The aggregation controller owns the rules.
					fr.Rules = nil
				}
				if diff := cmp.Diff(fr.Rules, got.Rules); diff != "" {
					t.Errorf("ClusterRole %s rules differ from files/rbac/%s.yaml: -want, +got:\n%s", fr.Name, s, diff)
				}
				if diff := cmp.Diff(fr.AggregationRule, got.AggregationRule); diff != "" {
					t.Errorf("ClusterRole %s aggregation differs from files/rbac/%s.yaml: -want, +got:\n%s", fr.Name, s, diff)
				}
				for k, v := range fr.Labels {
					if got.Labels[k] != v {
						t.Errorf("ClusterRole %s lost label %s=%s", fr.Name, k, v)
					}
				}
			}
			sort.Strings(want)
			got := slices.Clone(bound["loom-"+s])
			sort.Strings(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ClusterRoles bound to loom-%s: -want, +got:\n%s", s, diff)
			}
		})
	}

	// What each service may do with Secrets, through its roles and the roles
	// aggregated into them (as installed by the chart).
	secretVerbs := func(sa string) []string {
		var verbs []string
		for _, name := range bound[sa] {
			for _, r := range chartEffectiveRules(roles, roles[name]) {
				if (slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, "*")) &&
					(slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "*")) {
					verbs = append(verbs, r.Verbs...)
				}
			}
		}
		sort.Strings(verbs)
		return slices.Compact(verbs)
	}
	for sa, want := range map[string][]string{
		"loom-watcher":  nil,
		"loom-binder":   nil,
		"loom-renderer": {"get"},
	} {
		if diff := cmp.Diff(want, secretVerbs(sa)); diff != "" {
			t.Errorf("%s: verbs on Secrets: -want, +got:\n%s", sa, diff)
		}
	}
	// The secrets service alone lists, watches and writes them.
	for _, v := range []string{"get", "list", "watch", "create", "update"} {
		if !slices.Contains(secretVerbs("loom-secrets"), v) {
			t.Errorf("loom-secrets: may not %s Secrets (verbs: %v)", v, secretVerbs("loom-secrets"))
		}
	}
	// Composed kinds come through aggregated roles, not wildcards.
	for _, sa := range []string{"loom-watcher", "loom-binder", "loom-renderer"} {
		for _, name := range bound[sa] {
			for _, r := range chartEffectiveRules(roles, roles[name]) {
				if slices.Contains(r.Resources, "*") || slices.Contains(r.Verbs, "*") || slices.Contains(r.APIGroups, "*") {
					t.Errorf("%s: ClusterRole %s grants a wildcard: %v", sa, name, r)
				}
			}
		}
	}
}

// effectiveRules returns a ClusterRole's rules, or for an aggregated one the
// rules of the roles among all that its selectors match.
func chartEffectiveRules(all map[string]rbacv1.ClusterRole, r rbacv1.ClusterRole) []rbacv1.PolicyRule {
	if r.AggregationRule == nil {
		return r.Rules
	}
	var out []rbacv1.PolicyRule
	for _, sel := range r.AggregationRule.ClusterRoleSelectors {
		for _, o := range all {
			if o.Name != r.Name && chartSelects(&sel, o.Labels) {
				out = append(out, chartEffectiveRules(all, o)...)
			}
		}
	}
	return out
}

// TestChartRBACOptions checks the opt-in RBAC (extra files installed
// without bindings) and the RBAC manager: on by default, the only identity
// with escalate, and that only on the ClusterRoles whose rules it keeps,
// which the chart installs with no rules; off on request, with nothing of
// it left.
func TestChartRBACOptions(t *testing.T) {
	objs := renderChart(t, "--set", "rbac.extraFiles={renderer-aggregate-example}")
	var example rbacv1.ClusterRole
	chartFind(t, objs, "ClusterRole", "loom:renderer:example", &example)
	if example.Labels["loom.dev/aggregate-to-renderer"] != "true" {
		t.Errorf("loom:renderer:example lost its aggregation label: %v", example.Labels)
	}
	for _, o := range objs {
		if o.GetKind() == "ClusterRoleBinding" && o.GetName() == "loom:renderer:example" {
			t.Errorf("an extra file's role is bound to a service account; it should only aggregate")
		}
	}

	// The roles the RBAC manager keeps: installed, labelled, empty, unbound.
	var kept []string
	for _, f := range chartRBACFile(t, "xrd-roles") {
		kept = append(kept, f.GetName())
		var r rbacv1.ClusterRole
		chartFind(t, objs, "ClusterRole", f.GetName(), &r)
		if len(r.Rules) > 0 {
			t.Errorf("ClusterRole %s is installed with rules %v; the RBAC manager owns them", r.Name, r.Rules)
		}
		for k, v := range f.GetLabels() {
			if r.Labels[k] != v {
				t.Errorf("ClusterRole %s lost label %s=%s", r.Name, k, v)
			}
		}
		for _, o := range objs {
			if o.GetKind() == "ClusterRoleBinding" && o.GetName() == r.Name {
				t.Errorf("ClusterRole %s is bound; it should only aggregate", r.Name)
			}
		}
	}
	if len(kept) != 7 {
		t.Errorf("files/rbac/xrd-roles.yaml holds %d ClusterRoles, want 7: %v", len(kept), kept)
	}
	// Escalate and bind: the RBAC manager alone, escalate only on those
	// names, never bind.
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		var r rbacv1.ClusterRole
		chartFind(t, objs, "ClusterRole", o.GetName(), &r)
		for _, rule := range r.Rules {
			for _, v := range []string{"escalate", "bind", "*"} {
				if !slices.Contains(rule.Verbs, v) || !slices.Contains(rule.APIGroups, "rbac.authorization.k8s.io") {
					continue
				}
				if r.Name != "loom-rbac-manager" || v != "escalate" {
					t.Errorf("ClusterRole %s grants %s on %v", r.Name, v, rule.Resources)
					continue
				}
				got := slices.Sorted(slices.Values(rule.ResourceNames))
				if diff := cmp.Diff(slices.Sorted(slices.Values(kept)), got); diff != "" {
					t.Errorf("the RBAC manager may escalate on: -want, +got:\n%s", diff)
				}
			}
		}
	}
	var b rbacv1.ClusterRoleBinding
	chartFind(t, objs, "ClusterRoleBinding", "loom-rbac-manager", &b)
	if len(b.Subjects) != 1 || b.Subjects[0].Name != "loom-rbac-manager" || b.RoleRef.Name != "loom-rbac-manager" {
		t.Errorf("loom-rbac-manager is bound to %v (role %s), want ClusterRole loom-rbac-manager for ServiceAccount loom-rbac-manager only", b.Subjects, b.RoleRef.Name)
	}
	var d appsv1.Deployment
	chartFind(t, objs, "Deployment", "loom-rbac-manager", &d)
	if d.Spec.Template.Spec.ServiceAccountName != "loom-rbac-manager" {
		t.Errorf("the RBAC manager runs as %q, want loom-rbac-manager", d.Spec.Template.Spec.ServiceAccountName)
	}
	chartCheckSecurity(t, d.Spec.Template.Spec)
	c := chartContainer(t, &d)
	if c.Image != "ghcr.io/loomxr/loom-rbac-manager:0.1.0" {
		t.Errorf("the RBAC manager's image is %q, want ghcr.io/loomxr/loom-rbac-manager:0.1.0", c.Image)
	}
	env := chartEnv(c)
	if _, ok := env["LOOM_NAMESPACE"]; !ok {
		t.Errorf("the RBAC manager is not told its namespace (LOOM_NAMESPACE), where the watcher's ServiceAccount is")
	}
	for k := range env {
		if strings.HasPrefix(k, "LOOM_NATS_") {
			t.Errorf("the RBAC manager, which does not use NATS, gets %s", k)
		}
	}

	// Disabled: no Deployment, ServiceAccount or role of it.
	objs = renderChart(t, "--set", "rbacManager.enabled=false")
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/component"] == "rbac-manager" || slices.Contains(kept, o.GetName()) {
			t.Errorf("rbacManager.enabled=false renders %s %s", o.GetKind(), o.GetName())
		}
	}

	// Without rbac.create, no RBAC at all; a disabled service gets nothing.
	objs = renderChart(t, "--set", "rbac.create=false", "--set", "services.secrets.enabled=false")
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		if got := chartNames(objs, kind); len(got) > 0 {
			t.Errorf("rbac.create=false renders %s %v", kind, got)
		}
	}
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/component"] == "secrets" {
			t.Errorf("services.secrets.enabled=false renders %s %s", o.GetKind(), o.GetName())
		}
	}
}

// TestChartSchema checks that values.schema.json refuses bad values before
// anything is rendered.
func TestChartSchema(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		want   string
	}{
		"AuthMode": {
			reason: "Only none, password and creds authenticate.",
			args:   []string{"--set", "nats.auth.mode=token"},
			want:   "mode",
		},
		"StreamReplicas": {
			reason: "JetStream allows one to five replicas.",
			args:   []string{"--set", "nats.streamReplicas=7"},
			want:   "streamReplicas",
		},
		"NATSURL": {
			reason: "The URL needs a NATS scheme.",
			args:   []string{"--set", "nats.url=localhost:4222"},
			want:   "url",
		},
		"UnknownService": {
			reason: "A typo in a service's name is not silently ignored.",
			args:   []string{"--set", "services.rendrer.replicas=3"},
			want:   "rendrer",
		},
		"NegativeReplicas": {
			reason: "Replicas cannot be negative.",
			args:   []string{"--set", "services.binder.replicas=-1"},
			want:   "replicas",
		},
		"Duration": {
			reason: "The drain period is a Go duration.",
			args:   []string{"--set", "drainPeriod=soon"},
			want:   "drainPeriod",
		},
		"TLSSecret": {
			reason: "TLS needs the Secret of the CA.",
			args:   []string{"--set", "nats.tls.enabled=true", "--set", "nats.tls.secretName="},
			want:   "secretName",
		},
		"MissingRBACFile": {
			reason: "An extra RBAC file must exist in the chart.",
			args:   []string{"--set", "rbac.extraFiles={no-such-file}"},
			want:   "no-such-file",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := chartHelm(t, append([]string{"template", "loom", chartDir, "--namespace", chartNamespace, "--kube-version", chartKube(t)}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nhelm template: error %v, want one mentioning %q", tc.reason, err, tc.want)
			}
		})
	}
}

// TestChartNotes checks that NOTES.txt tells the user how to check the
// installation.
func TestChartNotes(t *testing.T) {
	out, err := chartHelm(t, "install", "loom", chartDir, "--namespace", chartNamespace, "--dry-run=client")
	if err != nil {
		t.Fatal(err)
	}
	_, notes, ok := strings.Cut(out, "NOTES:")
	if !ok {
		t.Fatalf("helm install --dry-run printed no NOTES:\n%s", out)
	}
	for _, want := range []string{
		"rollout status deployment/$d",
		"loom-watcher loom-renderer loom-binder loom-secrets",
		"/readyz",
		"kubectl -n loom-system get secret loom-nats",
		"auth can-i list secrets --as=system:serviceaccount:loom-system:loom-secrets",
		"nats.streamReplicas=3",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, notes)
		}
	}
}

// TestChartServerSideDryRun applies every object the chart renders, with the
// default and the production values, to a real kube-apiserver (the local
// stack without services) as a server-side apply dry run with strict field
// validation: the API server must accept each one.
func TestChartServerSideDryRun(t *testing.T) {
	chartHelmBinary(t)
	ctx := t.Context()
	// No services: only the API server matters. The ServiceMonitor CRD
	// stands in for the Prometheus Operator's; KEDA's ScaledObject CRD is
	// KEDA's own (testdata/keda/README.md).
	opts := stack.Options{StateDir: t.TempDir(), Services: []string{}, ExtraCRDDirs: []string{"testdata/chart", "testdata/keda"}}
	if testing.Verbose() {
		opts.Log = os.Stderr
	}
	s, err := stack.Start(ctx, opts)
	if err != nil {
		t.Fatalf("cannot start the stack: %v", err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.Stop(cctx)
	})
	rc := s.RESTConfig()
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))

	// apply dry-runs o; nil means the API server accepted it.
	apply := func(o *unstructured.Unstructured) error {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("the API server does not serve it: %w", err)
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if o.GetNamespace() != "" {
			r = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		_, err = r.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
			DryRun:          []string{metav1.DryRunAll},
			FieldManager:    "loom-chart-test",
			Force:           chartPtr(true),
			FieldValidation: "Strict",
		})
		return err
	}

	for name, args := range map[string][]string{"Defaults": nil, "Production": chartProduction, "KEDA": chartKEDA} {
		t.Run(name, func(t *testing.T) {
			objs := renderChart(t, append(args, "--include-crds")...)
			if len(objs) < 20 {
				t.Fatalf("rendered %d objects, want the whole chart", len(objs))
			}
			for _, o := range objs {
				if err := apply(o); err != nil {
					t.Errorf("%s %s/%s: refused: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
		})
	}

	// The check can fail: a misspelt field is refused.
	objs := renderChart(t)
	bad := chartFindUnstructured(t, objs, "Deployment", "loom-renderer").DeepCopy()
	if err := unstructured.SetNestedField(bad.Object, int64(1), "spec", "template", "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if err := apply(bad); err == nil {
		t.Errorf("a Deployment with spec.template.spec.replicas was accepted; strict validation is off")
	}
	// And KEDA's schema is enforced: a trigger without its type is refused.
	badSO := chartFindUnstructured(t, renderChart(t, chartKEDA...), "ScaledObject", "loom-binder").DeepCopy()
	triggers, _, _ := unstructured.NestedSlice(badSO.Object, "spec", "triggers")
	delete(triggers[0].(map[string]any), "type")
	if err := unstructured.SetNestedSlice(badSO.Object, triggers, "spec", "triggers"); err != nil {
		t.Fatal(err)
	}
	if err := apply(badSO); err == nil {
		t.Errorf("a ScaledObject trigger without a type was accepted; KEDA's schema is not enforced")
	}
}

// chartKEDA renders with backlog-driven scaling of the renderer, binder and
// secrets services.
var chartKEDA = []string{
	"--set", "keda.natsServerMonitoringEndpoint=nats.nats.svc.cluster.local:8222",
	"--set", "services.renderer.keda.enabled=true",
	"--set", "services.binder.keda.enabled=true",
	"--set", "services.secrets.keda.enabled=true",
}

// TestChartKEDA renders the opt-in ScaledObjects: one per service with KEDA
// on, scaling its Deployment, with one nats-jetstream trigger per consumer
// of its work stream (every partition, urgent, normal and overflow lanes:
// the resync lane is background work, left out); the Deployment leaves
// its replica count to KEDA; and refuses KEDA together with the CPU HPA, or
// without the NATS monitoring endpoint.
func TestChartKEDA(t *testing.T) {
	if objs := renderChart(t); len(chartNames(objs, "ScaledObject")) != 0 {
		t.Errorf("default values render ScaledObjects %v; want none (KEDA is opt-in)", chartNames(objs, "ScaledObject"))
	}
	objs := renderChart(t, append(chartKEDA, "--set", "nats.partitions=4")...)
	if diff := cmp.Diff([]string{"loom-binder", "loom-renderer", "loom-secrets"}, chartNames(objs, "ScaledObject")); diff != "" {
		t.Errorf("ScaledObjects (-want, +got):\n%s", diff)
	}
	so := chartFindUnstructured(t, objs, "ScaledObject", "loom-renderer")
	target, _, _ := unstructured.NestedString(so.Object, "spec", "scaleTargetRef", "name")
	maxField, _, _ := unstructured.NestedFieldNoCopy(so.Object, "spec", "maxReplicaCount")
	maxR := fmt.Sprint(maxField) // a JSON number: int64 or float64 depending on the decoder
	if target != "loom-renderer" || maxR != "10" {
		t.Errorf("renderer's ScaledObject scales %q up to %s; want loom-renderer up to 10", target, maxR)
	}
	triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
	var consumers []string
	for _, tr := range triggers {
		m := tr.(map[string]any)
		md := m["metadata"].(map[string]any)
		if m["type"] != "nats-jetstream" || md["stream"] != "LOOM_RENDERER" || md["account"] != "$G" ||
			md["natsServerMonitoringEndpoint"] != "nats.nats.svc.cluster.local:8222" || md["lagThreshold"] != "20" {
			t.Errorf("trigger %v; want nats-jetstream on stream LOOM_RENDERER, account $G, the given endpoint, lagThreshold 20", m)
		}
		consumers = append(consumers, md["consumer"].(string))
	}
	var want []string
	for p := range 4 {
		for _, lane := range []string{"", "-urgent", "-overflow"} {
			want = append(want, fmt.Sprintf("renderer-p%02d%s", p, lane))
		}
	}
	if diff := cmp.Diff(want, consumers); diff != "" {
		t.Errorf("triggers' consumers (-want, +got):\n%s", diff)
	}
	var d appsv1.Deployment
	chartFind(t, objs, "Deployment", "loom-renderer", &d)
	if d.Spec.Replicas != nil {
		t.Errorf("loom-renderer has replicas %d with KEDA on; want it left to KEDA", *d.Spec.Replicas)
	}
	if len(chartNames(objs, "HorizontalPodAutoscaler")) != 0 {
		t.Errorf("HPAs %v rendered beside the ScaledObjects", chartNames(objs, "HorizontalPodAutoscaler"))
	}

	for name, args := range map[string][]string{
		"WithTheCPUHPA":      append(slices.Clone(chartKEDA), "--set", "services.binder.autoscaling.enabled=true"),
		"WithoutAnEndpoint":  {"--set", "services.binder.keda.enabled=true"},
		"LagThresholdZero":   append(slices.Clone(chartKEDA), "--set", "services.binder.keda.lagThreshold=0"),
		"UnknownKEDASetting": append(slices.Clone(chartKEDA), "--set", "services.binder.keda.lag=5"),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := chartHelm(t, append([]string{"template", "loom", chartDir, "--namespace", chartNamespace}, args...)...); err == nil {
				t.Errorf("helm template %v succeeded; want it refused", args)
			}
		})
	}
}

// TestChartConnectionDetails renders the channel on which the renderer hands
// the secrets service the connection details of Pipeline XRs: gRPC with
// mutual TLS, with certificates the chart generates or the user gives.
func TestChartConnectionDetails(t *testing.T) {
	type want struct {
		// secrets are the Secrets the chart renders; nil: none.
		secrets []string
		// server and client are the Secrets the pods mount; "" for none
		// (the channel is off).
		server, client string
	}
	cases := map[string]struct {
		reason string
		args   []string
		want   want
	}{
		"Generated": {
			reason: "By default the chart generates a CA and both certificates.",
			want:   want{secrets: []string{"loom-renderer-grpc", "loom-secrets-grpc"}, server: "loom-secrets-grpc", client: "loom-renderer-grpc"},
		},
		"Given": {
			reason: "Certificates the user gives (cert-manager's, say) are mounted; the chart generates none.",
			args:   []string{"--set", "connectionDetails.tls.serverSecretName=secrets-cert", "--set", "connectionDetails.tls.clientSecretName=renderer-cert"},
			want:   want{server: "secrets-cert", client: "renderer-cert"},
		},
		"Disabled": {
			reason: "The channel can be turned off.",
			args:   []string{"--set", "connectionDetails.enabled=false"},
		},
		"NoSecretsService": {
			reason: "Without the secrets service there is nothing to call.",
			args:   []string{"--set", "services.secrets.enabled=false"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := renderChart(t, tc.args...)
			// The admission component's certificate is TestChartAdmission's.
			secrets := slices.DeleteFunc(chartNames(objs, "Secret"), func(n string) bool { return n == "loom-admission-tls" })
			if diff := cmp.Diff(tc.want.secrets, secrets, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nSecrets: -want, +got:\n%s", tc.reason, diff)
			}
			var r appsv1.Deployment
			chartFind(t, objs, "Deployment", "loom-renderer", &r)
			renv := chartEnv(chartContainer(t, &r))
			if tc.want.client == "" {
				if e, ok := renv["LOOM_RENDERER_SECRETS_ENDPOINT"]; ok {
					t.Errorf("%s\nthe renderer calls %q", tc.reason, e.Value)
				}
				if v := chartSecretVolume(r.Spec.Template.Spec, "connection-details"); v != "" {
					t.Errorf("%s\nthe renderer mounts Secret %s", tc.reason, v)
				}
			} else {
				for k, v := range map[string]string{
					"LOOM_RENDERER_SECRETS_ENDPOINT":      "loom-secrets.loom-system.svc:9443",
					"LOOM_RENDERER_SECRETS_TLS_CERT_FILE": "/etc/loom/connection-details/tls.crt",
					"LOOM_RENDERER_SECRETS_TLS_KEY_FILE":  "/etc/loom/connection-details/tls.key",
					"LOOM_RENDERER_SECRETS_CA_FILE":       "/etc/loom/connection-details/ca.crt",
				} {
					if renv[k].Value != v {
						t.Errorf("%s\nrenderer %s = %q, want %q", tc.reason, k, renv[k].Value, v)
					}
				}
				if got := chartSecretVolume(r.Spec.Template.Spec, "connection-details"); got != tc.want.client {
					t.Errorf("%s\nthe renderer mounts Secret %q, want %q", tc.reason, got, tc.want.client)
				}
			}
			if tc.want.server == "" {
				return
			}
			var d appsv1.Deployment
			chartFind(t, objs, "Deployment", "loom-secrets", &d)
			senv := chartEnv(chartContainer(t, &d))
			for k, v := range map[string]string{
				"LOOM_SECRETS_GRPC_ADDR":            ":9443",
				"LOOM_SECRETS_GRPC_TLS_CERT_FILE":   "/etc/loom/connection-details/tls.crt",
				"LOOM_SECRETS_GRPC_TLS_KEY_FILE":    "/etc/loom/connection-details/tls.key",
				"LOOM_SECRETS_GRPC_CLIENT_CA_FILE":  "/etc/loom/connection-details/ca.crt",
				"LOOM_SECRETS_GRPC_CLIENT_IDENTITY": "loom-renderer",
			} {
				if senv[k].Value != v {
					t.Errorf("%s\nsecrets %s = %q, want %q", tc.reason, k, senv[k].Value, v)
				}
			}
			if ns := senv["LOOM_SECRETS_NAMESPACE"].ValueFrom; ns == nil || ns.FieldRef == nil || ns.FieldRef.FieldPath != "metadata.namespace" {
				t.Errorf("%s\nLOOM_SECRETS_NAMESPACE is not the pod's namespace", tc.reason)
			}
			if got := chartSecretVolume(d.Spec.Template.Spec, "connection-details"); got != tc.want.server {
				t.Errorf("%s\nthe secrets service mounts Secret %q, want %q", tc.reason, got, tc.want.server)
			}
			var svc corev1.Service
			chartFind(t, objs, "Service", "loom-secrets", &svc)
			grpc := false
			for _, p := range svc.Spec.Ports {
				grpc = grpc || (p.Name == "grpc" && p.Port == 9443 && p.TargetPort.String() == "grpc")
			}
			if !grpc {
				t.Errorf("%s\nService loom-secrets has no port grpc 9443: %v", tc.reason, svc.Spec.Ports)
			}
			if tc.want.secrets != nil {
				chartCheckConnectionCerts(t, objs)
			}
		})
	}

	// Half a configuration is refused.
	_, err := chartHelm(t, "template", "loom", chartDir, "--namespace", chartNamespace, "--set", "connectionDetails.tls.serverSecretName=secrets-cert")
	if err == nil || !strings.Contains(err.Error(), "clientSecretName") {
		t.Errorf("a server certificate without a client certificate: error %v, want one naming clientSecretName", err)
	}

	// NetworkPolicies let the renderer, and only it, reach the channel.
	objs := renderChart(t, chartProduction...)
	var sec, ren networkingv1.NetworkPolicy
	chartFind(t, objs, "NetworkPolicy", "loom-secrets", &sec)
	chartFind(t, objs, "NetworkPolicy", "loom-renderer", &ren)
	var d appsv1.Deployment
	chartFind(t, objs, "Deployment", "loom-renderer", &d)
	var rendererIn bool
	for _, in := range sec.Spec.Ingress {
		for _, p := range in.Ports {
			if p.Port != nil && p.Port.String() == "grpc" {
				rendererIn = len(in.From) == 1 && in.From[0].PodSelector != nil && chartSelects(in.From[0].PodSelector, d.Spec.Template.Labels)
			}
		}
	}
	if !rendererIn {
		t.Errorf("the secrets service's NetworkPolicy does not admit the renderer, alone, on port grpc")
	}
	var secretsOut bool
	for _, e := range ren.Spec.Egress {
		for _, p := range e.Ports {
			if p.Port != nil && p.Port.IntValue() == 9443 && len(e.To) == 1 && e.To[0].PodSelector != nil && e.To[0].PodSelector.MatchLabels["app.kubernetes.io/component"] == "secrets" {
				secretsOut = true
			}
		}
	}
	if !secretsOut {
		t.Errorf("the renderer's NetworkPolicy does not let it reach the secrets service on 9443")
	}
}

// chartSecretVolume returns the Secret of a pod's volume name, or "".
func chartSecretVolume(spec corev1.PodSpec, name string) string {
	for _, v := range spec.Volumes {
		if v.Name == name && v.Secret != nil {
			return v.Secret.SecretName
		}
	}
	return ""
}

// chartCheckConnectionCerts checks the certificates the chart generated:
// both sides trust one CA; the secrets service's certificate serves its
// Service's name; the renderer's is a client certificate for
// loom-renderer.
func chartCheckConnectionCerts(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	cert := func(secret, key string) *x509.Certificate {
		var s corev1.Secret
		chartFind(t, objs, "Secret", secret, &s)
		b, _ := pem.Decode(s.Data[key])
		if b == nil {
			t.Fatalf("Secret %s: %s is not PEM", secret, key)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("Secret %s: %s: %v", secret, key, err)
		}
		return c
	}
	ca := cert("loom-secrets-grpc", "ca.crt")
	if !ca.Equal(cert("loom-renderer-grpc", "ca.crt")) {
		t.Errorf("the secrets service and the renderer trust different CAs")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := cert("loom-secrets-grpc", "tls.crt").Verify(x509.VerifyOptions{Roots: roots, DNSName: "loom-secrets.loom-system.svc", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the secrets service's certificate does not serve loom-secrets.loom-system.svc: %v", err)
	}
	client := cert("loom-renderer-grpc", "tls.crt")
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil || client.Subject.CommonName != "loom-renderer" {
		t.Errorf("the renderer's certificate (%q) is not a client certificate for loom-renderer: %v", client.Subject.CommonName, err)
	}
}
