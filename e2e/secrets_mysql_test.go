//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/stack"
)

// The secrets tests run the seeds' MySQL scenario (examples/mysql) in their
// own API group and namespaces, so that they share the stack with other
// tests that may apply the examples.
const (
	secretsGroup     = "mysql.secrets.e2e.loom.dev"
	secretsNamespace = "secrets-e2e"
	secretsSystem    = "secrets-e2e-system"
)

var (
	secretsClaimGVK = schema.GroupVersionKind{Group: secretsGroup, Version: "v1alpha1", Kind: "MySQLInstance"}
	secretsXRGVK    = schema.GroupVersionKind{Group: secretsGroup, Version: "v1alpha1", Kind: "XMySQLInstance"}
	secretsNopGVK   = schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}
)

// secretsRoles give every service its rights on the test's kinds, as an
// installer of the XRD would (NopResources are covered by the example roles
// of deploy/helm/loom/files/rbac).
const secretsRoles = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:secrets:secrets-e2e
  labels: {loom.dev/aggregate-to-secrets: "true"}
rules:
- apiGroups: [mysql.secrets.e2e.loom.dev]
  resources: [xmysqlinstances, mysqlinstances]
  verbs: [get]
- apiGroups: [mysql.secrets.e2e.loom.dev]
  resources: [xmysqlinstances/status, mysqlinstances/status]
  verbs: [patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:secrets-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [mysql.secrets.e2e.loom.dev]
  resources: [xmysqlinstances, mysqlinstances]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:secrets-e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [mysql.secrets.e2e.loom.dev]
  resources: [xmysqlinstances]
  verbs: [get, list, patch, delete]
- apiGroups: [mysql.secrets.e2e.loom.dev]
  resources: [xmysqlinstances/status]
  verbs: [patch]
- apiGroups: [mysql.secrets.e2e.loom.dev]
  resources: [mysqlinstances]
  verbs: [list, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:secrets-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [mysql.secrets.e2e.loom.dev]
  resources: [mysqlinstances]
  verbs: [get, update, patch]
- apiGroups: [mysql.secrets.e2e.loom.dev]
  resources: [mysqlinstances/status, xmysqlinstances/status]
  verbs: [get, patch]
- apiGroups: [mysql.secrets.e2e.loom.dev]
  resources: [xmysqlinstances]
  verbs: [get, create, patch, delete]
---
apiVersion: v1
kind: Namespace
metadata: {name: secrets-e2e}
---
apiVersion: v1
kind: Namespace
metadata: {name: secrets-e2e-system}
`

// secretsExample reads a file of examples/mysql, moved to the test's group
// and namespaces.
func secretsExample(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile("../examples/mysql/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer(
		"database.example.org", secretsGroup,
		"crossplane-system", secretsSystem,
		"namespace: default", "namespace: "+secretsNamespace,
	).Replace(string(b))
}

// secretsNoEndpoint is the example's Composition without the endpoint
// connection detail, under another name: the XRD declares a key it cannot
// provide.
func secretsNoEndpoint(t *testing.T) string {
	t.Helper()
	c := secretsExample(t, "composition.yaml")
	detail := "    connectionDetails:\n    - name: endpoint\n      fromFieldPath: status.atProvider.fields.endpoint\n"
	if !strings.Contains(c, detail) {
		t.Fatalf("examples/mysql/composition.yaml no longer has the endpoint connection detail this test removes")
	}
	c = strings.Replace(c, detail, "", 1)
	return strings.Replace(c, "name: xmysqlinstances.azure."+secretsGroup, "name: no-endpoint."+secretsGroup, 1)
}

// secretsInstalled installs the secrets tests' kinds once per package run
// on the shared stack.
var secretsInstalled struct {
	once sync.Once
	err  error
}

// secretsSetup installs the roles, namespaces, XRD and Compositions once for
// the secrets tests of this package run. They stay until the stack stops:
// deleting an XRD between tests would race with the next test applying it.
func secretsSetup(t *testing.T) *framework.Env {
	t.Helper()
	env := framework.StartStack(t)
	secretsInstalled.once.Do(func() { secretsInstalled.err = secretsInstall(t, env.Stack) })
	if secretsInstalled.err != nil {
		t.Fatalf("cannot install the secrets tests' kinds: %v", secretsInstalled.err)
	}
	return env
}

// secretsInstall applies the roles, namespaces, XRD and Compositions of the
// secrets tests to s.
func secretsInstall(t *testing.T, s *stack.Stack) error {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range []string{secretsRoles, secretsExample(t, "definition.yaml"), secretsExample(t, "composition.yaml"), secretsNoEndpoint(t)} {
		o, err := stack.DecodeManifests([]byte(doc))
		if err != nil {
			return err
		}
		objs = append(objs, o...)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err := s.ApplyObjects(ctx, objs...)
	return err
}

// secretsClaim creates a MySQLInstance claim name in the test namespace
// from the example, with the Composition compositionRef if not empty, and
// returns it. The claim is deleted when t ends.
func secretsClaim(t *testing.T, env *framework.Env, name, compositionRef string) *unstructured.Unstructured {
	t.Helper()
	doc := secretsExample(t, "claim.yaml")
	doc = strings.Replace(doc, "name: my-db\n", "name: "+name+"\n", 1)
	doc = strings.Replace(doc, "name: my-db-conn", "name: "+name+"-conn", 1)
	if compositionRef != "" {
		doc = strings.Replace(doc, "spec:\n", "spec:\n  compositionRef:\n    name: "+compositionRef+"\n", 1)
	}
	objs, err := stack.DecodeManifests([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	applied, err := env.Stack.ApplyObjects(t.Context(), objs...)
	if err != nil {
		t.Fatalf("cannot create claim %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := env.Resource(applied[0])
		if err == nil {
			err = r.Delete(ctx, name, metav1.DeleteOptions{})
		}
		if err != nil && !kerrors.IsNotFound(err) {
			t.Logf("cannot delete claim %s: %v", name, err)
		}
	})
	return applied[0]
}

// secretsBoundXR waits for the claim's XR and returns it.
func secretsBoundXR(t *testing.T, env *framework.Env, claim string) *unstructured.Unstructured {
	t.Helper()
	ctx := t.Context()
	var xr *unstructured.Unstructured
	framework.Eventually(t, 2*time.Minute, func() error {
		cm, err := env.Dynamic.Resource(secretsClaimGVK.GroupVersion().WithResource("mysqlinstances")).Namespace(secretsNamespace).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		name, _, _ := unstructured.NestedString(cm.Object, "spec", "resourceRef", "name")
		if name == "" {
			return fmt.Errorf("claim %s is not bound yet", claim)
		}
		xr, err = env.Dynamic.Resource(secretsXRGVK.GroupVersion().WithResource("xmysqlinstances")).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	return xr
}

// secretsData returns the data of a Secret as strings, or an error that
// says why it is not there.
func secretsData(ctx context.Context, env *framework.Env, ns, name string) (*corev1.Secret, map[string]string, error) {
	s, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return s, out, nil
}

// secretsWaitData waits until Secret ns/name holds exactly want and returns
// it.
func secretsWaitData(t *testing.T, env *framework.Env, timeout time.Duration, ns, name string, want map[string]string) *corev1.Secret {
	t.Helper()
	var s *corev1.Secret
	framework.Eventually(t, timeout, func() error {
		var got map[string]string
		var err error
		s, got, err = secretsData(t.Context(), env, ns, name)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(want, got); diff != "" {
			// Key names only: the values are the test's own.
			return fmt.Errorf("Secret %s/%s has keys %v, want %v (or other values)", ns, name, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		return nil
	})
	return s
}

// secretsControlledBy checks that s is a connection Secret controlled by o.
func secretsControlledBy(s *corev1.Secret, o *unstructured.Unstructured) error {
	if s.Type != "connection.crossplane.io/v1alpha1" {
		return fmt.Errorf("Secret %s/%s has type %q", s.Namespace, s.Name, s.Type)
	}
	c := metav1.GetControllerOf(s)
	if c == nil || c.UID != o.GetUID() || c.Kind != o.GetKind() || c.Name != o.GetName() {
		return fmt.Errorf("Secret %s/%s is controlled by %v, want %s %s", s.Namespace, s.Name, c, o.GetKind(), o.GetName())
	}
	return nil
}

// secretsComposed returns the XR's composed resource of template tmpl.
func secretsComposed(ctx context.Context, env *framework.Env, xr *unstructured.Unstructured, tmpl string) (*unstructured.Unstructured, error) {
	nops := env.Dynamic.Resource(secretsNopGVK.GroupVersion().WithResource("nopresources"))
	xr, err := env.Dynamic.Resource(secretsXRGVK.GroupVersion().WithResource("xmysqlinstances")).Get(ctx, xr.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "resourceRefs")
	for _, r := range refs {
		name, _ := r.(map[string]any)["name"].(string)
		o, err := nops.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if o.GetAnnotations()["crossplane.io/composition-resource-name"] == tmpl {
			return o, nil
		}
	}
	return nil, fmt.Errorf("XR %s has no composed resource of template %q", xr.GetName(), tmpl)
}

// secretsCondition returns the XR's ConnectionDetailsReady condition.
func secretsCondition(o *unstructured.Unstructured) (status, reason, message string) {
	cs, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range cs {
		m, _ := c.(map[string]any)
		if m["type"] == "ConnectionDetailsReady" {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
		}
	}
	return status, reason, message
}

// TestSecretsMySQL runs the seeds' MySQL scenario through the whole of
// Loom: the claim's Secret holds username (FromValue), password (a renamed
// key of the server's Secret) and endpoint (FromFieldPath of the virtual
// network rule), and not port, which the XRD does not list; the XR's Secret
// holds the same, in the Composition's namespace under the XR's UID;
// rotating the server's password reaches the claim's Secret, and so does its
// removal; a Composition
// that cannot provide a declared key is reported on the XR; deleting the
// claim removes both Secrets.
func TestSecretsMySQL(t *testing.T) {
	env := secretsSetup(t)
	ctx := t.Context()
	xrs := env.Dynamic.Resource(secretsXRGVK.GroupVersion().WithResource("xmysqlinstances"))

	claim := secretsClaim(t, env, "orders-db", "")
	xr := secretsBoundXR(t, env, "orders-db")
	want := map[string]string{
		"username": "myadmin",
		"password": "nop-s3cr3t-password",
		"endpoint": xr.GetName() + ".mysql.database.azure.com:3306",
	}
	start := time.Now()
	claimSecret := secretsWaitData(t, env, 3*time.Minute, secretsNamespace, "orders-db-conn", want)
	t.Logf("claim Secret complete %s after the XR was found", time.Since(start).Round(time.Millisecond))
	if err := secretsControlledBy(claimSecret, claim); err != nil {
		t.Error(err)
	}

	// The XR's own Secret: the Composition's namespace, the XR's UID.
	xrSecret := secretsWaitData(t, env, 30*time.Second, secretsSystem, string(xr.GetUID()), want)
	if err := secretsControlledBy(xrSecret, xr); err != nil {
		t.Error(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		o, err := xrs.Get(ctx, xr.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ts, _, _ := unstructured.NestedString(o.Object, "status", "connectionDetails", "lastPublishedTime"); ts == "" {
			return errors.New("XR has no status.connectionDetails.lastPublishedTime")
		}
		if s, r, m := secretsCondition(o); s != "True" || r != "Published" {
			return fmt.Errorf("XR condition ConnectionDetailsReady is %s/%s (%s), want True/Published", s, r, m)
		}
		c, err := env.Dynamic.Resource(secretsClaimGVK.GroupVersion().WithResource("mysqlinstances")).Namespace(secretsNamespace).Get(ctx, "orders-db", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ts, _, _ := unstructured.NestedString(c.Object, "status", "connectionDetails", "lastPublishedTime"); ts == "" {
			return errors.New("claim has no status.connectionDetails.lastPublishedTime")
		}
		return nil
	})

	calls := secretsReportCalls(t, env, xr.GetName(), "creation", secretsCalls{})

	// Rotate the server's password as its provider would.
	server, err := secretsComposed(ctx, env, xr, "server")
	if err != nil {
		t.Fatal(err)
	}
	ref, _, _ := unstructured.NestedStringMap(server.Object, "spec", "writeConnectionSecretToRef")
	rotated := fmt.Sprintf("rotated-%d", time.Now().UnixNano())
	framework.Eventually(t, 30*time.Second, func() error {
		s, err := env.Kube.CoreV1().Secrets(ref["namespace"]).Get(ctx, ref["name"], metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Data["attribute.administrator_login_password"] = []byte(rotated)
		_, err = env.Kube.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	start = time.Now()
	want["password"] = rotated
	secretsWaitData(t, env, 30*time.Second, secretsNamespace, "orders-db-conn", want)
	t.Logf("rotated password reached the claim's Secret in %s", time.Since(start).Round(time.Millisecond))
	secretsWaitData(t, env, 5*time.Second, secretsSystem, string(xr.GetUID()), want)
	calls = secretsReportCalls(t, env, xr.GetName(), "rotation", calls)

	// A key that disappears upstream disappears downstream.
	framework.Eventually(t, 30*time.Second, func() error {
		s, err := env.Kube.CoreV1().Secrets(ref["namespace"]).Get(ctx, ref["name"], metav1.GetOptions{})
		if err != nil {
			return err
		}
		delete(s.Data, "attribute.administrator_login_password")
		_, err = env.Kube.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	delete(want, "password")
	secretsWaitData(t, env, 30*time.Second, secretsNamespace, "orders-db-conn", want)
	secretsWaitData(t, env, 5*time.Second, secretsSystem, string(xr.GetUID()), want)
	secretsReportCalls(t, env, xr.GetName(), "key removal", calls)

	// A Composition that cannot provide a key the XRD declares.
	start = time.Now()
	secretsClaim(t, env, "billing-db", "no-endpoint."+secretsGroup)
	billing := secretsBoundXR(t, env, "billing-db")
	framework.Eventually(t, 2*time.Minute, func() error {
		o, err := xrs.Get(ctx, billing.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		s, r, m := secretsCondition(o)
		if s != "False" || r != "MissingKeys" || !strings.Contains(m, "endpoint") {
			return fmt.Errorf("XR condition ConnectionDetailsReady is %s/%s (%q), want False/MissingKeys naming endpoint", s, r, m)
		}
		return nil
	})
	// Everything it can provide still reaches the claim.
	secretsWaitData(t, env, 2*time.Minute, secretsNamespace, "billing-db-conn", map[string]string{"username": "myadmin", "password": "nop-s3cr3t-password"})
	framework.Eventually(t, 30*time.Second, func() error {
		evs, err := env.Kube.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + billing.GetName()})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "MissingKeys" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, "endpoint") {
				return nil
			}
		}
		return fmt.Errorf("no Warning event MissingKeys about XR %s among %d events", billing.GetName(), len(evs.Items))
	})

	t.Logf("missing key reported and partial claim Secret complete in %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()

	// Deleting the claim removes both Secrets.
	if err := env.Dynamic.Resource(secretsClaimGVK.GroupVersion().WithResource("mysqlinstances")).Namespace(secretsNamespace).Delete(ctx, "orders-db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		for _, k := range [][2]string{{secretsNamespace, "orders-db-conn"}, {secretsSystem, string(xr.GetUID())}} {
			_, err := env.Kube.CoreV1().Secrets(k[0]).Get(ctx, k[1], metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("Secret %s/%s still exists", k[0], k[1])
			}
			if !kerrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
	t.Logf("both Secrets gone %s after the claim's deletion", time.Since(start).Round(time.Millisecond))
}

// secretsHandled matches the secrets service's debug line per handled XR.
var secretsHandled = regexp.MustCompile(`msg="Handled composite resource" .*name=(\S+) .*reads=(\d+) writes=(\d+)`)

// secretsCalls is what the secrets service's debug log says it did for one
// XR: handlings, API reads and API writes.
type secretsCalls struct{ handled, reads, writes int }

// secretsReportCalls logs the API requests the secrets service made for XR
// name since before (a previous return value), from its debug log (run
// with LOOM_LOG_LEVEL=debug; without it there is nothing to count), and
// returns the totals so far.
func secretsReportCalls(t *testing.T, env *framework.Env, name, phase string, before secretsCalls) secretsCalls {
	t.Helper()
	b, err := os.ReadFile(env.Stack.LogPath("secrets-0"))
	if err != nil {
		t.Logf("cannot read the secrets service's log: %v", err)
		return before
	}
	var c secretsCalls
	for _, m := range secretsHandled.FindAllStringSubmatch(string(b), -1) {
		if m[1] != name {
			continue
		}
		r, _ := strconv.Atoi(m[2])
		w, _ := strconv.Atoi(m[3])
		c = secretsCalls{c.handled + 1, c.reads + r, c.writes + w}
	}
	if c.handled == 0 {
		if before.handled == 0 && phase != "creation" {
			return c
		}
		t.Logf("no debug lines of the secrets service about XR %s (set LOOM_LOG_LEVEL=debug to count its API requests)", name)
		return c
	}
	t.Logf("secrets service, XR %s, %s: %d handlings, %d API reads, %d API writes", name, phase, c.handled-before.handled, c.reads-before.reads, c.writes-before.writes)
	return c
}
