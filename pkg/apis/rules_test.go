package apis_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/yaml"

	"github.com/loomxr/loom/pkg/xcrd/crdvalidation"
)

// TestValidationRules runs objects through the generated CRDs' validation
// (schema and CEL rules, with transition rules on updates), as the API server
// would, and checks which fields it rejects.
func TestValidationRules(t *testing.T) {
	crds := readCRDs(t, crdDir)

	const xrd = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xdbs.example.org
spec:
  group: example.org
  names: {kind: XDB, plural: xdbs}
  claimNames: {kind: DB, plural: dbs}
  versions:
  - {name: v1, served: true, referenceable: true}
`
	cases := map[string]struct {
		reason  string
		kind    string
		version string
		obj     string
		old     string
		want    []string
	}{
		"XRDValid": {
			reason: "A plain v1 XRD is valid; scope defaults to LegacyCluster.",
			kind:   "apiextensions.crossplane.io/CompositeResourceDefinition", version: "v1",
			obj: xrd,
		},
		"XRDClaimsOnNamespaced": {
			reason: "Claims are only offered for LegacyCluster composite resources.",
			kind:   "apiextensions.crossplane.io/CompositeResourceDefinition", version: "v1",
			obj:  xrd + "  scope: Namespaced\n",
			want: []string{"spec"},
		},
		"XRDConnectionSecretKeysOnCluster": {
			reason: "Connection secret keys are only for LegacyCluster composite resources.",
			kind:   "apiextensions.crossplane.io/CompositeResourceDefinition", version: "v1",
			obj: `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xdbs.example.org}
spec:
  group: example.org
  scope: Cluster
  names: {kind: XDB, plural: xdbs}
  connectionSecretKeys: [password]
  versions: [{name: v1, served: true, referenceable: true}]
`,
			want: []string{"spec"},
		},
		"XRDUnknownScope": {
			reason: "The scope is one of three values (and CEL rules are not evaluated on an invalid object).",
			kind:   "apiextensions.crossplane.io/CompositeResourceDefinition", version: "v1",
			obj:  xrd + "  scope: Galaxy\n",
			want: []string{"spec.scope", "<nil>"},
		},
		"XRDUppercasePlural": {
			reason: "Plural names must be lowercase.",
			kind:   "apiextensions.crossplane.io/CompositeResourceDefinition", version: "v1",
			obj: `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: XDBs.example.org}
spec:
  group: example.org
  names: {kind: XDB, plural: XDBs}
  versions: [{name: v1, served: true, referenceable: true}]
`,
			want: []string{"spec.names"},
		},
		"XRDGroupImmutable": {
			reason: "The group cannot change.",
			kind:   "apiextensions.crossplane.io/CompositeResourceDefinition", version: "v1",
			old: xrd,
			obj: `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xdbs.example.org}
spec:
  group: example.com
  names: {kind: XDB, plural: xdbs}
  claimNames: {kind: DB, plural: dbs}
  versions: [{name: v1, served: true, referenceable: true}]
`,
			want: []string{"spec.group"},
		},
		"XRDClaimNamesNotRemovable": {
			reason: "Claim names cannot be removed once set.",
			kind:   "apiextensions.crossplane.io/CompositeResourceDefinition", version: "v1",
			old: xrd,
			obj: `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xdbs.example.org}
spec:
  group: example.org
  names: {kind: XDB, plural: xdbs}
  versions: [{name: v1, served: true, referenceable: true}]
`,
			want: []string{"spec"},
		},
		"XRDWebhookConversionNeedsWebhook": {
			reason: "A Webhook conversion strategy needs a webhook.",
			kind:   "apiextensions.crossplane.io/CompositeResourceDefinition", version: "v1",
			obj:  xrd + "  conversion: {strategy: Webhook}\n",
			want: []string{"spec.conversion"},
		},
		"XRDServiceAccountRef": {
			reason: "A service account reference names namespace and name.",
			kind:   "apiextensions.crossplane.io/CompositeResourceDefinition", version: "v1",
			obj:  xrd + "  serviceAccountRef: {name: composer}\n",
			want: []string{"spec.serviceAccountRef.namespace", "<nil>"},
		},
		"FunctionMutualTLS": {
			reason: "A Function with both TLS secrets is valid.",
			kind:   "loom.dev/Function", version: "v1alpha1",
			obj: `
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: function-patch-and-transform}
spec:
  endpoint: dns:///function-patch-and-transform.functions:9443
  tls:
    caSecretRef: {namespace: functions, name: ca}
    clientSecretRef: {namespace: loom-system, name: renderer-client}
  timeout: 30s
  maxConcurrency: 8
`,
		},
		"FunctionInsecure": {
			reason: "A Function may be plaintext when insecure is set explicitly.",
			kind:   "loom.dev/Function", version: "v1alpha1",
			obj: `
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: dev}
spec: {endpoint: "127.0.0.1:9443", insecure: true}
`,
		},
		"FunctionTLSRequired": {
			reason: "Without insecure, mutual TLS material is required.",
			kind:   "loom.dev/Function", version: "v1alpha1",
			obj: `
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: fn}
spec:
  endpoint: "127.0.0.1:9443"
  tls: {caSecretRef: {namespace: functions, name: ca}}
`,
			want: []string{"spec"},
		},
		"FunctionInsecureExcludesTLS": {
			reason: "insecure and tls are mutually exclusive.",
			kind:   "loom.dev/Function", version: "v1alpha1",
			obj: `
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: fn}
spec:
  endpoint: "127.0.0.1:9443"
  insecure: true
  tls:
    caSecretRef: {namespace: functions, name: ca}
    clientSecretRef: {namespace: loom-system, name: client}
`,
			want: []string{"spec"},
		},
		"ReferenceRuleValid": {
			reason: "A rule with a name reference, an ACK-style list reference and a selector is valid.",
			kind:   "loom.dev/ReferenceRule", version: "v1alpha1",
			obj: `
apiVersion: loom.dev/v1alpha1
kind: ReferenceRule
metadata: {name: nodepools}
spec:
  for: {apiVersion: nop.crossplane.io/v1alpha1, kind: NodePool}
  references:
  - valueField: spec.forProvider.cluster
    referenceField: spec.forProvider.clusterRef
    selectorField: spec.forProvider.clusterSelector
    target: {apiVersion: nop.crossplane.io/v1alpha1, kind: GKECluster}
    fromFieldPath: status.atProvider.id
    waitFor: {conditionType: Ready}
    policy: {resolve: Always, resolution: Required}
  - valueField: spec.forProvider.subnetIds
    referenceField: spec.forProvider.subnetRefs
    referenceShape: From
    list: true
    target: {apiVersion: nop.crossplane.io/v1alpha1, kind: Subnetwork}
    fromFieldPath: metadata.name
`,
		},
		"ReferenceRuleDuplicateValueField": {
			reason: "References are keyed by value field.",
			kind:   "loom.dev/ReferenceRule", version: "v1alpha1",
			obj: `
apiVersion: loom.dev/v1alpha1
kind: ReferenceRule
metadata: {name: dup}
spec:
  for: {apiVersion: v1, kind: ConfigMap}
  references:
  - {valueField: data.a, referenceField: data.aRef, target: {apiVersion: v1, kind: Secret}, fromFieldPath: metadata.name}
  - {valueField: data.a, referenceField: data.bRef, target: {apiVersion: v1, kind: Secret}, fromFieldPath: metadata.name}
`,
			want: []string{"spec.references[1]"},
		},
		"ReferenceRuleBadPolicy": {
			reason: "Policies are those of crossplane-runtime.",
			kind:   "loom.dev/ReferenceRule", version: "v1alpha1",
			obj: `
apiVersion: loom.dev/v1alpha1
kind: ReferenceRule
metadata: {name: bad}
spec:
  for: {apiVersion: v1, kind: ConfigMap}
  references:
  - valueField: data.a
    referenceField: data.aRef
    referenceShape: Pointer
    target: {apiVersion: v1, kind: Secret}
    fromFieldPath: metadata.name
    policy: {resolve: Sometimes}
`,
			want: []string{"spec.references[0].policy.resolve", "spec.references[0].referenceShape"},
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			crd, ok := crds[tc.kind]
			if !ok {
				t.Fatalf("no CRD for %s", tc.kind)
			}
			v, err := crdvalidation.NewValidator(crd, tc.version)
			if err != nil {
				t.Fatal(err)
			}
			obj, old := map[string]any{}, map[string]any(nil)
			if err := yaml.Unmarshal([]byte(tc.obj), &obj); err != nil {
				t.Fatal(err)
			}
			if tc.old != "" {
				old = map[string]any{}
				if err := yaml.Unmarshal([]byte(tc.old), &old); err != nil {
					t.Fatal(err)
				}
			}
			r := v.Validate(t.Context(), obj, old)
			if len(r.Pruned) > 0 {
				t.Errorf("%s\nunknown fields: %v", tc.reason, r.Pruned)
			}
			var got []string
			for _, e := range r.Errs {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("%s\nrejected fields: -want, +got:\n%s\nerrors: %v", tc.reason, diff, r.Errs)
			}
		})
	}
}
