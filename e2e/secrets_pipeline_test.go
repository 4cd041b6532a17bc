//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/stack"
)

// The Pipeline secrets tests: a Composition in mode Pipeline whose function
// (e2e/testfn/connection-details) returns connection details for the XR,
// which the renderer hands to the secrets service over mutual TLS.
const (
	fnSecretsGroup     = "fn.secrets.e2e.loom.dev"
	fnSecretsNamespace = "fn-secrets-e2e"
	fnSecretsSystem    = "fn-secrets-e2e-system"
	// fnSecretsFunction is the loom.dev Function of the test function.
	fnSecretsFunction = "e2e-connection-details"
)

var (
	fnSecretsClaimGVK = schema.GroupVersionKind{Group: fnSecretsGroup, Version: "v1alpha1", Kind: "FnDB"}
	fnSecretsXRGVK    = schema.GroupVersionKind{Group: fnSecretsGroup, Version: "v1alpha1", Kind: "XFnDB"}
)

// fnSecretsKinds are the roles, namespaces and XRD of the Pipeline secrets
// tests. The XRD publishes db-password and endpoint only.
const fnSecretsKinds = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:secrets:fn-secrets-e2e
  labels: {loom.dev/aggregate-to-secrets: "true"}
rules:
- apiGroups: [fn.secrets.e2e.loom.dev]
  resources: [xfndbs, fndbs]
  verbs: [get]
- apiGroups: [fn.secrets.e2e.loom.dev]
  resources: [xfndbs/status, fndbs/status]
  verbs: [patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:fn-secrets-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [fn.secrets.e2e.loom.dev]
  resources: [xfndbs, fndbs]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:fn-secrets-e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [fn.secrets.e2e.loom.dev]
  resources: [xfndbs]
  verbs: [get, list, patch, delete]
- apiGroups: [fn.secrets.e2e.loom.dev]
  resources: [xfndbs/status]
  verbs: [patch]
- apiGroups: [fn.secrets.e2e.loom.dev]
  resources: [fndbs]
  verbs: [list, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:fn-secrets-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [fn.secrets.e2e.loom.dev]
  resources: [fndbs]
  verbs: [get, update, patch]
- apiGroups: [fn.secrets.e2e.loom.dev]
  resources: [fndbs/status, xfndbs/status]
  verbs: [get, patch]
- apiGroups: [fn.secrets.e2e.loom.dev]
  resources: [xfndbs]
  verbs: [get, create, patch, delete]
---
apiVersion: v1
kind: Namespace
metadata: {name: fn-secrets-e2e}
---
apiVersion: v1
kind: Namespace
metadata: {name: fn-secrets-e2e-system}
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xfndbs.fn.secrets.e2e.loom.dev
spec:
  group: fn.secrets.e2e.loom.dev
  names: {kind: XFnDB, plural: xfndbs}
  claimNames: {kind: FnDB, plural: fndbs}
  connectionSecretKeys: [db-password, endpoint]
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
`

// fnSecretsEndpoint is the fixed connection detail the function returns.
const fnSecretsEndpoint = "db.fn.example:5432"

// fnSecretsComposition is the Pipeline Composition: its function composes
// NopResource db, whose Secret holds password (initially password) and
// username, and returns db-password (db's observed password), endpoint and
// unlisted (which the XRD filters out). Its TTL is an hour: anything that
// reaches the claim sooner is event driven.
func fnSecretsComposition(password string) string {
	return fmt.Sprintf(`
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xfndbs
spec:
  compositeTypeRef: {apiVersion: fn.secrets.e2e.loom.dev/v1alpha1, kind: XFnDB}
  mode: Pipeline
  writeConnectionSecretsToNamespace: fn-secrets-e2e-system
  pipeline:
  - step: details
    functionRef: {name: %s}
    input:
      apiVersion: testfn.loom.dev/v1alpha1
      kind: Input
      spec:
        secretNamespace: fn-secrets-e2e-system
        secretData: {password: %q, username: fn-admin}
        copy: {db-password: password}
        fixed: {endpoint: %q, unlisted: not-published}
        behaviour: {ttl: 1h}
`, fnSecretsFunction, password, fnSecretsEndpoint)
}

// fnSecretsInstall builds and serves the connection-details function over
// mutual TLS until t ends, and installs the function, the kinds and the
// Composition (whose db password starts as password) on env's stack.
func fnSecretsInstall(t *testing.T, env *framework.Env, password string) {
	t.Helper()
	pki := framework.NewFunctionPKI(t)
	addr := framework.ServeFunction(t, framework.BuildFunction(t, "connection-details"), pki.ServerDir(t))
	framework.CreateFunctionSecrets(t, env, "loom-system", "e2e-fn-secrets-ca", "e2e-fn-secrets-client", pki)
	function := fmt.Sprintf(`
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: %s}
spec:
  endpoint: "%s"
  tls:
    caSecretRef: {namespace: loom-system, name: e2e-fn-secrets-ca}
    clientSecretRef: {namespace: loom-system, name: e2e-fn-secrets-client}
`, fnSecretsFunction, addr)
	var objs []*unstructured.Unstructured
	for _, doc := range []string{function, fnSecretsKinds, fnSecretsComposition(password)} {
		o, err := stack.DecodeManifests([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := env.Stack.ApplyObjects(ctx, objs...); err != nil {
		t.Fatalf("cannot install the Pipeline secrets tests' kinds: %v", err)
	}
}

// fnSecretsClaim creates claim name, asking for Secret <name>-conn, and
// returns it; it is deleted when t ends.
func fnSecretsClaim(t *testing.T, env *framework.Env, name string) *unstructured.Unstructured {
	t.Helper()
	objs, err := stack.DecodeManifests([]byte(fmt.Sprintf(`
apiVersion: fn.secrets.e2e.loom.dev/v1alpha1
kind: FnDB
metadata: {name: %s, namespace: %s}
spec:
  compositionRef: {name: xfndbs}
  writeConnectionSecretToRef: {name: %s-conn}
`, name, fnSecretsNamespace, name)))
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
		err := env.Dynamic.Resource(fnSecretsClaimGVK.GroupVersion().WithResource("fndbs")).Namespace(fnSecretsNamespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !kerrors.IsNotFound(err) {
			t.Logf("cannot delete claim %s: %v", name, err)
		}
	})
	return applied[0]
}

// fnSecretsBoundXR waits for the claim's XR and returns it.
func fnSecretsBoundXR(t *testing.T, env *framework.Env, claim string) *unstructured.Unstructured {
	t.Helper()
	ctx := t.Context()
	var xr *unstructured.Unstructured
	framework.Eventually(t, 2*time.Minute, func() error {
		c, err := env.Dynamic.Resource(fnSecretsClaimGVK.GroupVersion().WithResource("fndbs")).Namespace(fnSecretsNamespace).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		name, _, _ := unstructured.NestedString(c.Object, "spec", "resourceRef", "name")
		if name == "" {
			return fmt.Errorf("claim %s is not bound yet", claim)
		}
		xr, err = env.Dynamic.Resource(fnSecretsXRGVK.GroupVersion().WithResource("xfndbs")).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	return xr
}

// fnSecretsRotate sets the password of the XR's composed db's connection
// Secret, as its provider would when rotating it.
func fnSecretsRotate(t *testing.T, env *framework.Env, xr *unstructured.Unstructured, password string) {
	t.Helper()
	ctx := t.Context()
	framework.Eventually(t, 30*time.Second, func() error {
		s, err := env.Kube.CoreV1().Secrets(fnSecretsSystem).Get(ctx, string(xr.GetUID())+"-db", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Data["password"] = []byte(password)
		_, err = env.Kube.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
}

// fnSecretsStaging is the XR's staging Secret in the secrets service's
// namespace.
func fnSecretsStaging(xr *unstructured.Unstructured) (namespace, name string) {
	return stack.Namespace, "loom-fn-" + string(xr.GetUID())
}

// TestSecretsPipeline runs a Pipeline Composition whose function returns
// connection details for the XR: the claim's Secret holds exactly what the
// function returned, filtered by the XRD's connectionSecretKeys, including
// a detail it copied from a composed resource's connection Secret; rotating
// that Secret reaches the claim's Secret without waiting for the
// function's hour-long TTL; deleting the claim removes the claim's, the
// XR's and the staging Secret.
func TestSecretsPipeline(t *testing.T) {
	env := framework.StartStack(t)
	ctx := t.Context()
	fnSecretsInstall(t, env, "initial-pw")

	claim := fnSecretsClaim(t, env, "fn-db")
	xr := fnSecretsBoundXR(t, env, "fn-db")
	want := map[string]string{"db-password": "initial-pw", "endpoint": fnSecretsEndpoint}
	start := time.Now()
	claimSecret := secretsWaitData(t, env, 3*time.Minute, fnSecretsNamespace, "fn-db-conn", want)
	t.Logf("claim Secret complete %s after the XR was found", time.Since(start).Round(time.Millisecond))
	if err := secretsControlledBy(claimSecret, claim); err != nil {
		t.Error(err)
	}
	xrSecret := secretsWaitData(t, env, 30*time.Second, fnSecretsSystem, string(xr.GetUID()), want)
	if err := secretsControlledBy(xrSecret, xr); err != nil {
		t.Error(err)
	}
	// The staging Secret holds everything the function returned, unfiltered.
	sns, sname := fnSecretsStaging(xr)
	staging := secretsWaitData(t, env, 10*time.Second, sns, sname,
		map[string]string{"db-password": "initial-pw", "endpoint": fnSecretsEndpoint, "unlisted": "not-published"})
	if err := secretsControlledBy(staging, xr); err != nil {
		t.Error(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		o, err := env.Dynamic.Resource(fnSecretsXRGVK.GroupVersion().WithResource("xfndbs")).Get(ctx, xr.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s, r, m := secretsCondition(o); s != "True" || r != "Published" {
			return fmt.Errorf("XR condition ConnectionDetailsReady is %s/%s (%s), want True/Published", s, r, m)
		}
		if s := conditionField(o, "Synced", "status"); s != "True" {
			return fmt.Errorf("XR is not Synced: %s", conditionField(o, "Synced", "message"))
		}
		return nil
	})

	// Rotate db's password: the renderer renders the XR again because the
	// secrets service saw the Secret change, the function copies the new
	// password, and it reaches the claim.
	start = time.Now()
	fnSecretsRotate(t, env, xr, "rotated-pw")
	want["db-password"] = "rotated-pw"
	secretsWaitData(t, env, 30*time.Second, fnSecretsNamespace, "fn-db-conn", want)
	t.Logf("rotated password reached the claim's Secret in %s", time.Since(start).Round(time.Millisecond))
	secretsWaitData(t, env, 5*time.Second, fnSecretsSystem, string(xr.GetUID()), want)

	// A key that disappears upstream disappears downstream.
	framework.Eventually(t, 30*time.Second, func() error {
		s, err := env.Kube.CoreV1().Secrets(fnSecretsSystem).Get(ctx, string(xr.GetUID())+"-db", metav1.GetOptions{})
		if err != nil {
			return err
		}
		delete(s.Data, "password")
		_, err = env.Kube.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	delete(want, "db-password")
	secretsWaitData(t, env, 30*time.Second, fnSecretsNamespace, "fn-db-conn", want)

	// Deleting the claim removes the claim's, the XR's and the staging Secret.
	start = time.Now()
	if err := env.Dynamic.Resource(fnSecretsClaimGVK.GroupVersion().WithResource("fndbs")).Namespace(fnSecretsNamespace).Delete(ctx, "fn-db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		for _, k := range [][2]string{{fnSecretsNamespace, "fn-db-conn"}, {fnSecretsSystem, string(xr.GetUID())}, {sns, sname}} {
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
	t.Logf("the Secrets were gone %s after the claim's deletion", time.Since(start).Round(time.Millisecond))
}

// TestSecretsPipelineNoEndpoint runs the Pipeline Composition on a stack
// whose renderer has no secrets endpoint: the XR's Synced condition and a
// Warning Event say why its connection details cannot be published, naming
// the flag.
func TestSecretsPipelineNoEndpoint(t *testing.T) {
	env := startSecretsStackWith(t, nil, "LOOM_RENDERER_SECRETS_ENDPOINT=")
	ctx := t.Context()
	fnSecretsInstall(t, env, "initial-pw")
	fnSecretsClaim(t, env, "fn-db-noendpoint")
	xr := fnSecretsBoundXR(t, env, "fn-db-noendpoint")
	framework.Eventually(t, 2*time.Minute, func() error {
		o, err := env.Dynamic.Resource(fnSecretsXRGVK.GroupVersion().WithResource("xfndbs")).Get(ctx, xr.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s, m := conditionField(o, "Synced", "status"), conditionField(o, "Synced", "message"); s != "False" || !strings.Contains(m, "--secrets-endpoint") {
			return fmt.Errorf("XR condition Synced is %s (%q), want False naming --secrets-endpoint", s, m)
		}
		evs, err := env.Kube.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + xr.GetName()})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Type == "Warning" && strings.Contains(e.Note, "--secrets-endpoint") {
				return nil
			}
		}
		return fmt.Errorf("no Warning event naming --secrets-endpoint about XR %s among %d events", xr.GetName(), len(evs.Items))
	})
}
