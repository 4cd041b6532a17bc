package xcrd_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	loomv1alpha1 "github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
	"github.com/loomxr/loom/pkg/xcrd"
	"github.com/loomxr/loom/pkg/xcrd/crdvalidation"
)

// These tests run the generated CRDs through the API server's own CRD
// validation, and objects through its pruning, defaulting, schema and CEL
// validation, offline.

const userSchema = `{
  "type": "object",
  "properties": {
    "spec": {
      "type": "object",
      "required": ["parameters"],
      "x-kubernetes-validations": [{"rule": "self.parameters.size != 'huge'", "message": "size must not be huge"}],
      "properties": {
        "parameters": {
          "type": "object",
          "properties": {
            "size": {"type": "string", "enum": ["small", "large", "huge"]},
            "storageGB": {"type": "integer", "minimum": 1}
          }
        }
      }
    },
    "status": {
      "type": "object",
      "properties": {"address": {"type": "string"}}
    }
  }
}`

func xrd(scope v1.CompositeResourceScope, claim bool) *v1.CompositeResourceDefinition {
	x := &v1.CompositeResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "xdatabases.example.org", UID: "f2b0a3e4-0000-4000-8000-000000000001"},
		Spec: v1.CompositeResourceDefinitionSpec{
			Group: "example.org",
			Scope: scope,
			Names: extv1.CustomResourceDefinitionNames{Kind: "XDatabase", Plural: "xdatabases"},
			Versions: []v1.CompositeResourceDefinitionVersion{
				{
					Name: "v1alpha1", Served: true, Deprecated: ptr.To(true), DeprecationWarning: ptr.To("use v1"),
					Schema: &v1.CompositeResourceValidation{OpenAPIV3Schema: runtime.RawExtension{Raw: []byte(userSchema)}},
				},
				{
					Name: "v1", Served: true, Referenceable: true,
					Schema:                   &v1.CompositeResourceValidation{OpenAPIV3Schema: runtime.RawExtension{Raw: []byte(userSchema)}},
					AdditionalPrinterColumns: []extv1.CustomResourceColumnDefinition{{Name: "SIZE", Type: "string", JSONPath: ".spec.parameters.size"}},
					Subresources: &v1.CompositeResourceSubresources{Scale: &extv1.CustomResourceSubresourceScale{
						SpecReplicasPath: ".spec.parameters.storageGB", StatusReplicasPath: ".status.replicas",
					}},
				},
			},
			Conversion: &extv1.CustomResourceConversion{Strategy: extv1.NoneConverter},
		},
	}
	if claim {
		x.Spec.ClaimNames = &extv1.CustomResourceDefinitionNames{Kind: "Database", Plural: "databases"}
	}
	return x
}

func generate(t *testing.T, x *v1.CompositeResourceDefinition, claim bool) *extv1.CustomResourceDefinition {
	t.Helper()
	gen := xcrd.ForCompositeResource
	if claim {
		gen = xcrd.ForCompositeResourceClaim
	}
	crd, err := gen(x)
	if err != nil {
		t.Fatalf("cannot generate CRD: %v", err)
	}
	return crd
}

func TestGeneratedCRDsAreValid(t *testing.T) {
	cases := map[string]struct {
		reason string
		xrd    *v1.CompositeResourceDefinition
		claim  bool
	}{
		"LegacyComposite": {reason: "The LegacyCluster composite resource CRD is valid.", xrd: xrd("", true)},
		"LegacyClaim":     {reason: "The claim CRD is valid.", xrd: xrd("", true), claim: true},
		"Namespaced":      {reason: "The Namespaced composite resource CRD is valid.", xrd: xrd(v1.CompositeResourceScopeNamespaced, false)},
		"Cluster":         {reason: "The Cluster composite resource CRD is valid.", xrd: xrd(v1.CompositeResourceScopeCluster, false)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs, err := crdvalidation.CRD(t.Context(), generate(t, tc.xrd, tc.claim))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(field.ErrorList(nil), errs); diff != "" {
				t.Errorf("%s\nThe API server would reject the CRD: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// toMap round-trips a value through JSON, as an API client would send it.
func toMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func fullLoomStatus(t *testing.T, n int) map[string]any {
	t.Helper()
	st := loomv1alpha1.CompositeStatus{OmittedResources: 3}
	for range n {
		st.Resources = append(st.Resources, loomv1alpha1.ComposedResourceSummary{
			ResourceName: "db", APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource",
			Name: "xdb-1-db", Namespace: "default", Ready: "False", Reason: "Creating", Message: "waiting for the database",
		})
	}
	return toMap(t, st)
}

func xr(t *testing.T, name string, spec map[string]any, status map[string]any) map[string]any {
	t.Helper()
	return map[string]any{
		"apiVersion": "example.org/v1",
		"kind":       "XDatabase",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
		"status":     status,
	}
}

func TestLegacyCompositeResourceObjects(t *testing.T) {
	crd := generate(t, xrd("", true), false)
	v, err := crdvalidation.NewValidator(crd, "v1")
	if err != nil {
		t.Fatal(err)
	}

	full := map[string]any{
		"parameters":                  map[string]any{"size": "small", "storageGB": int64(20)},
		"compositionRef":              map[string]any{"name": "c"},
		"compositionSelector":         map[string]any{"matchLabels": map[string]any{"a": "b"}},
		"compositionRevisionRef":      map[string]any{"name": "c-1"},
		"compositionRevisionSelector": map[string]any{"matchLabels": map[string]any{"channel": "stable"}},
		"compositionUpdatePolicy":     "Manual",
		"claimRef":                    map[string]any{"apiVersion": "example.org/v1", "kind": "Database", "namespace": "default", "name": "db"},
		"resourceRefs":                []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "namespace": "default"}},
		"writeConnectionSecretToRef":  map[string]any{"name": "s", "namespace": "crossplane-system"},
		"publishConnectionDetailsTo":  map[string]any{"name": "s", "configRef": map[string]any{"name": "vault"}, "metadata": map[string]any{"labels": map[string]any{"a": "b"}, "type": "Opaque"}},
		"reclaimPolicy":               "Retain",
	}
	status := map[string]any{
		"address": "db.example.org",
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": int64(2),
		}},
		"connectionDetails":   map[string]any{"lastPublishedTime": "2026-01-01T00:00:00Z"},
		"claimConditionTypes": []any{"DatabaseReady"},
		"loom":                fullLoomStatus(t, 2),
		"watchedResourceRefs": []any{toMap(t, loomv1alpha1.WatchedResourceRef{APIVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", Name: "env", Namespace: "ns", Step: "fetch"})},
	}

	cases := map[string]struct {
		reason     string
		obj        map[string]any
		old        map[string]any
		wantPruned []string
		wantErrs   []string
		wantPolicy string
	}{
		"EveryFieldKnown": {
			reason:     "Every injected field and Loom's status fields, set as the Go types marshal them, are known: nothing is pruned, nothing invalid.",
			obj:        xr(t, "xdb-1", full, status),
			wantPolicy: "Manual",
		},
		"UpdatePolicyDefaulted": {
			reason:     "compositionUpdatePolicy defaults to the XRD's default (Automatic).",
			obj:        xr(t, "xdb-1", map[string]any{"parameters": map[string]any{"size": "small"}}, nil),
			wantPolicy: "Automatic",
		},
		"UnknownFieldPruned": {
			reason:     "Fields the schema does not know are pruned, not stored.",
			obj:        xr(t, "xdb-1", map[string]any{"parameters": map[string]any{"size": "small"}, "colour": "blue"}, nil),
			wantPruned: []string{"spec.colour"},
			wantPolicy: "Automatic",
		},
		"NameTooLong": {
			reason:     "Composite resource names are label values: at most 63 characters.",
			obj:        xr(t, strings.Repeat("x", 64), map[string]any{"parameters": map[string]any{"size": "small"}}, nil),
			wantErrs:   []string{"metadata.name", "<nil>"},
			wantPolicy: "Automatic",
		},
		"UserRulesApply": {
			reason:     "The user's required fields and CEL rules are enforced.",
			obj:        xr(t, "xdb-1", map[string]any{"parameters": map[string]any{"size": "huge"}}, nil),
			wantErrs:   []string{"spec"},
			wantPolicy: "Automatic",
		},
		"UserRequired": {
			reason:     "The user's required spec fields are enforced; CEL rules are then skipped, as in the API server.",
			obj:        xr(t, "xdb-1", map[string]any{}, nil),
			wantErrs:   []string{"spec.parameters", "<nil>"},
			wantPolicy: "Automatic",
		},
		"SummaryBounded": {
			reason:     "status.loom.resources holds at most 100 entries.",
			obj:        xr(t, "xdb-1", map[string]any{"parameters": map[string]any{"size": "small"}}, map[string]any{"loom": fullLoomStatus(t, 101)}),
			wantErrs:   []string{"status.loom.resources", "<nil>"},
			wantPolicy: "Automatic",
		},
		"BadReclaimPolicy": {
			reason:     "reclaimPolicy is Delete or Retain.",
			obj:        xr(t, "xdb-1", map[string]any{"parameters": map[string]any{"size": "small"}, "reclaimPolicy": "Keep"}, nil),
			wantErrs:   []string{"spec.reclaimPolicy", "<nil>"},
			wantPolicy: "Automatic",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := v.Validate(t.Context(), tc.obj, tc.old)
			if diff := cmp.Diff(tc.wantPruned, r.Pruned, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\npruned: -want, +got:\n%s", tc.reason, diff)
			}
			var gotErrs []string
			for _, e := range r.Errs {
				gotErrs = append(gotErrs, e.Field)
			}
			if diff := cmp.Diff(tc.wantErrs, gotErrs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nerror fields: -want, +got:\n%s\nerrors: %v", tc.reason, diff, r.Errs)
			}
			spec, _ := r.Object["spec"].(map[string]any)
			if diff := cmp.Diff(tc.wantPolicy, spec["compositionUpdatePolicy"]); diff != "" {
				t.Errorf("%s\ncompositionUpdatePolicy: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestClaimObjects(t *testing.T) {
	x := xrd("", true)
	x.Spec.DefaultCompositeDeletePolicy = ptr.To(v1.CompositeDeleteForeground)
	v, err := crdvalidation.NewValidator(generate(t, x, true), "v1")
	if err != nil {
		t.Fatal(err)
	}
	claim := map[string]any{
		"apiVersion": "example.org/v1",
		"kind":       "Database",
		"metadata":   map[string]any{"name": "db", "namespace": "default"},
		"spec": map[string]any{
			"parameters":                 map[string]any{"size": "small"},
			"resourceRef":                map[string]any{"apiVersion": "example.org/v1", "kind": "XDatabase", "name": "db-x2k9q"},
			"writeConnectionSecretToRef": map[string]any{"name": "db-conn"},
			"compositionUpdatePolicy":    "Automatic",
			"reclaimPolicy":              "Retain",
		},
		"status": map[string]any{"loom": fullLoomStatus(t, 1), "watchedResourceRefs": []any{}},
	}
	r := v.Validate(t.Context(), claim, nil)
	if len(r.Errs) != 0 {
		t.Errorf("A claim with the claim fields set must be valid: %v", r.Errs)
	}
	if diff := cmp.Diff([]string{"status.watchedResourceRefs"}, r.Pruned); diff != "" {
		t.Errorf("watchedResourceRefs belongs to the composite resource only and is pruned from claims: -want, +got:\n%s", diff)
	}
	spec, _ := r.Object["spec"].(map[string]any)
	if diff := cmp.Diff("Foreground", spec["compositeDeletePolicy"]); diff != "" {
		t.Errorf("compositeDeletePolicy defaults to the XRD's defaultCompositeDeletePolicy: -want, +got:\n%s", diff)
	}
}

func TestNamespacedCompositeResourceObjects(t *testing.T) {
	v, err := crdvalidation.NewValidator(generate(t, xrd(v1.CompositeResourceScopeNamespaced, false), false), "v1")
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{
		"apiVersion": "example.org/v1",
		"kind":       "XDatabase",
		"metadata":   map[string]any{"name": "db", "namespace": "team-a"},
		"spec": map[string]any{
			"parameters": map[string]any{"size": "small"},
			"crossplane": map[string]any{
				"compositionRef": map[string]any{"name": "c"},
				"resourceRefs":   []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "namespace": "elsewhere"}},
			},
			"claimRef": map[string]any{"apiVersion": "example.org/v1", "kind": "Database", "namespace": "default", "name": "db"},
		},
	}
	r := v.Validate(t.Context(), obj, nil)
	if len(r.Errs) != 0 {
		t.Errorf("A namespaced composite resource with machinery under spec.crossplane must be valid: %v", r.Errs)
	}
	want := []string{"spec.claimRef", "spec.crossplane.resourceRefs[0].namespace"}
	if diff := cmp.Diff(want, r.Pruned); diff != "" {
		t.Errorf("Namespaced composite resources have no claimRef and no namespace in resourceRefs: -want, +got:\n%s", diff)
	}
}
