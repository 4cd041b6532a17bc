package xcrd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/stack"
	"github.com/loomxr/loom/pkg/stack/stacktest"
	"github.com/loomxr/loom/pkg/testing/poll"
	"github.com/loomxr/loom/pkg/xcrd"
)

// startAPIServer starts the local control plane with Loom's CRDs installed
// (deploy/helm/loom/crds; Start fails unless every one becomes Established)
// and no Loom service. It skips the test when the control-plane binaries
// have not been built (`make control-plane`).
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	return stacktest.ControlPlane(t, stack.Options{ExtraCRDDirs: []string{}}).RESTConfig()
}

func toUnstructured(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestOnAPIServer proves on a real kube-apiserver what the offline tests
// prove with its code: Loom's CRDs load, Crossplane manifests apply to them
// unchanged under strict field validation, and the CRDs pkg/xcrd generates
// load, serve objects with every injected field, and print Crossplane's
// columns.
func TestOnAPIServer(t *testing.T) {
	rc := startAPIServer(t)
	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(rc)
	ext := apiextensionsclient.NewForConfigOrDie(rc)

	t.Run("CrossplaneManifestsApplyStrictly", func(t *testing.T) {
		files, err := filepath.Glob("../apis/testdata/crossplane/*.yaml")
		if err != nil || len(files) == 0 {
			t.Fatalf("no manifests: %v", err)
		}
		objs, err := stack.ReadManifests(files...)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			gvr := schema.GroupVersionResource{Group: o.GroupVersionKind().Group, Version: o.GroupVersionKind().Version, Resource: strings.ToLower(o.GetKind()) + "s"}
			_, err := dyn.Resource(gvr).Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
			if err != nil {
				t.Errorf("%s %s: the API server rejects it: %v", o.GetKind(), o.GetName(), err)
			}
		}
	})

	t.Run("XRDRules", func(t *testing.T) {
		xrd := toUnstructured(t, `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xwidgets.example.org}
spec:
  group: example.org
  scope: Namespaced
  names: {kind: XWidget, plural: xwidgets}
  claimNames: {kind: Widget, plural: widgets}
  versions: [{name: v1, served: true, referenceable: true}]
`)
		gvr := v1.SchemeGroupVersion.WithResource("compositeresourcedefinitions")
		_, err := dyn.Resource(gvr).Create(ctx, xrd, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !kerrors.IsInvalid(err) || !strings.Contains(err.Error(), "claimNames are only supported when scope is LegacyCluster") {
			t.Errorf("a Namespaced XRD offering claims must be rejected by its CEL rule, got: %v", err)
		}
	})

	t.Run("GeneratedCRDs", func(t *testing.T) {
		legacy := xrd("", true)
		namespaced := xrd(v1.CompositeResourceScopeNamespaced, false)
		namespaced.Name = "xqueues.example.org"
		namespaced.Spec.Names = extv1.CustomResourceDefinitionNames{Kind: "XQueue", Plural: "xqueues"}

		var crds []*extv1.CustomResourceDefinition
		for _, gen := range []func() (*extv1.CustomResourceDefinition, error){
			func() (*extv1.CustomResourceDefinition, error) { return xcrd.ForCompositeResource(legacy) },
			func() (*extv1.CustomResourceDefinition, error) { return xcrd.ForCompositeResourceClaim(legacy) },
			func() (*extv1.CustomResourceDefinition, error) { return xcrd.ForCompositeResource(namespaced) },
		} {
			crd, err := gen()
			if err != nil {
				t.Fatal(err)
			}
			// The XRD does not exist here; the owner reference would make
			// the garbage collector delete the CRD.
			crd.OwnerReferences = nil
			if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
				t.Fatalf("the API server rejects generated CRD %s: %v", crd.Name, err)
			}
			crds = append(crds, crd)
		}
		for _, crd := range crds {
			waitEstablished(t, ext, crd.Name)
		}

		xrGVR := schema.GroupVersionResource{Group: "example.org", Version: "v1", Resource: "xdatabases"}
		xr := toUnstructured(t, `
apiVersion: example.org/v1
kind: XDatabase
metadata: {name: db-x2k9q}
spec:
  parameters: {size: small, storageGB: 20}
  compositionRef: {name: c}
  compositionRevisionRef: {name: c-1}
  compositionRevisionSelector: {matchLabels: {channel: stable}}
  claimRef: {apiVersion: example.org/v1, kind: Database, namespace: default, name: db}
  resourceRefs: [{apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: db-x2k9q-1}]
  writeConnectionSecretToRef: {name: db-conn, namespace: crossplane-system}
  reclaimPolicy: Retain
`)
		created, err := dyn.Resource(xrGVR).Create(ctx, xr, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		if err != nil {
			t.Fatalf("cannot create a composite resource with every injected field: %v", err)
		}
		if got, _, _ := unstructured.NestedString(created.Object, "spec", "compositionUpdatePolicy"); got != "Automatic" {
			t.Errorf("compositionUpdatePolicy: want the default Automatic, got %q", got)
		}
		status := map[string]any{
			"conditions": []any{
				map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": "2026-01-01T00:00:00Z"},
				map[string]any{"type": "Ready", "status": "False", "reason": "Creating", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			},
			"loom":                fullLoomStatus(t, 1),
			"watchedResourceRefs": []any{map[string]any{"apiVersion": "apiextensions.crossplane.io/v1beta1", "kind": "EnvironmentConfig", "name": "env", "step": "fetch"}},
		}
		if err := unstructured.SetNestedField(created.Object, status, "status"); err != nil {
			t.Fatal(err)
		}
		updated, err := dyn.Resource(xrGVR).UpdateStatus(ctx, created, metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict})
		if err != nil {
			t.Fatalf("cannot write the status subresource: %v", err)
		}
		if diff := cmp.Diff(normalize(t, status), normalize(t, updated.Object["status"])); diff != "" {
			t.Errorf("status as stored: -want, +got:\n%s", diff)
		}

		// kubectl get prints the user's columns, then Crossplane's.
		var table metav1.Table
		c, err := rest.HTTPClientFor(rc)
		if err != nil {
			t.Fatal(err)
		}
		req, err := newTableRequest(ctx, rc.Host+"/apis/example.org/v1/xdatabases")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close() //nolint:errcheck // Read-only.
		if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, c := range table.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		want := []string{"Name", "SIZE", "SYNCED", "READY", "COMPOSITION", "COMPOSITIONREVISION", "AGE"}
		if diff := cmp.Diff(want, cols); diff != "" {
			t.Errorf("printer columns: -want, +got:\n%s", diff)
		}
		if len(table.Rows) != 1 || !slices.Contains(table.Rows[0].Cells, any("c")) {
			t.Errorf("the COMPOSITION column shows spec.compositionRef.name: %v", table.Rows)
		}

		claim := toUnstructured(t, `
apiVersion: example.org/v1
kind: Database
metadata: {name: db, namespace: default}
spec:
  parameters: {size: small}
  resourceRef: {apiVersion: example.org/v1, kind: XDatabase, name: db-x2k9q}
  writeConnectionSecretToRef: {name: db-conn}
`)
		claimGVR := schema.GroupVersionResource{Group: "example.org", Version: "v1", Resource: "databases"}
		c2, err := dyn.Resource(claimGVR).Namespace("default").Create(ctx, claim, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		if err != nil {
			t.Fatalf("cannot create a claim: %v", err)
		}
		if got, _, _ := unstructured.NestedString(c2.Object, "spec", "compositeDeletePolicy"); got != "Background" {
			t.Errorf("compositeDeletePolicy: want the default Background, got %q", got)
		}

		queue := toUnstructured(t, `
apiVersion: example.org/v1
kind: XQueue
metadata: {name: q, namespace: default}
spec:
  parameters: {size: small}
  crossplane:
    compositionRef: {name: c}
    resourceRefs: [{apiVersion: v1, kind: ConfigMap, name: q-1}]
`)
		qGVR := schema.GroupVersionResource{Group: "example.org", Version: "v1", Resource: "xqueues"}
		if _, err := dyn.Resource(qGVR).Namespace("default").Create(ctx, queue, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
			t.Fatalf("cannot create a namespaced composite resource: %v", err)
		}
		bad := queue.DeepCopy()
		bad.SetName("q2")
		if err := unstructured.SetNestedField(bad.Object, map[string]any{"apiVersion": "v1", "kind": "X", "namespace": "n", "name": "c"}, "spec", "claimRef"); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(qGVR).Namespace("default").Create(ctx, bad, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); !kerrors.IsBadRequest(err) && !kerrors.IsInvalid(err) {
			t.Errorf("a namespaced composite resource has no claimRef; strict validation must reject it, got: %v", err)
		}
	})
}

// normalize round-trips v through JSON so that numbers compare equal
// whatever Go type holds them.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// newTableRequest asks for a list as kubectl get does: as a server-side
// printed Table.
func newTableRequest(ctx context.Context, url string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	return req, nil
}

func waitEstablished(t *testing.T, ext apiextensionsclient.Interface, name string) {
	t.Helper()
	poll.Until(t, time.Minute, func() error {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("CRD %s is not Established: %w", name, err)
		}
		if !xcrd.IsEstablished(crd.Status) {
			return fmt.Errorf("CRD %s is not Established: %v", name, crd.Status.Conditions)
		}
		return nil
	}, poll.Every(100*time.Millisecond))
}
