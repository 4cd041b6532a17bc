//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/bus"
)

var (
	badXRGVR    = schema.GroupVersionResource{Group: "badinput.e2e.loom.dev", Version: "v1alpha1", Resource: "xbads"}
	badClaimGVR = schema.GroupVersionResource{Group: "badinput.e2e.loom.dev", Version: "v1alpha1", Resource: "bads"}
)

// badInputKinds is the kind every bad-input case composes: an XR with a
// claim, whose Composition each case names.
const badInputKinds = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:renderer:badinput-e2e
  labels: {loom.dev/aggregate-to-renderer: "true"}
rules:
- apiGroups: [badinput.e2e.loom.dev]
  resources: [xbads]
  verbs: [get, list, patch, delete]
- apiGroups: [badinput.e2e.loom.dev]
  resources: [xbads/status]
  verbs: [patch]
- apiGroups: [badinput.e2e.loom.dev]
  resources: [bads]
  verbs: [list, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:watcher:badinput-e2e
  labels: {loom.dev/aggregate-to-watcher: "true"}
rules:
- apiGroups: [badinput.e2e.loom.dev]
  resources: [xbads, bads]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:binder:badinput-e2e
  labels: {loom.dev/aggregate-to-binder: "true"}
rules:
- apiGroups: [badinput.e2e.loom.dev]
  resources: [bads]
  verbs: [get, update, patch]
- apiGroups: [badinput.e2e.loom.dev]
  resources: [bads/status, xbads/status]
  verbs: [get, patch]
- apiGroups: [badinput.e2e.loom.dev]
  resources: [xbads]
  verbs: [get, create, patch, delete]
- apiGroups: [nop.crossplane.io]
  resources: [nopresources]
  verbs: [get, list, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: loom:secrets:badinput-e2e
  labels: {loom.dev/aggregate-to-secrets: "true"}
rules:
- apiGroups: [badinput.e2e.loom.dev]
  resources: [xbads, bads]
  verbs: [get]
- apiGroups: [badinput.e2e.loom.dev]
  resources: [xbads/status, bads/status]
  verbs: [get, patch]
---
apiVersion: v1
kind: Namespace
metadata: {name: badinput}
---
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xbads.badinput.e2e.loom.dev
spec:
  group: badinput.e2e.loom.dev
  names: {kind: XBad, plural: xbads}
  claimNames: {kind: Bad, plural: bads}
  defaultCompositionRef: {name: badinput-healthy}
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
                  text: {type: string}
                  blob: {type: string}
---
apiVersion: loom.dev/v1alpha1
kind: ReferenceRule
metadata:
  name: badinput-peer
spec:
  for: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
  references:
  - valueField: spec.forProvider.fields.badinputPeer
    referenceField: spec.forProvider.fields.badinputPeerRef
    selectorField: spec.forProvider.fields.badinputPeerSelector
    target: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
    fromFieldPath: status.atProvider.fields.id
    waitFor: {conditionType: Ready}
`

// badComposition is a Composition of kind XBad in mode Resources with the
// given resources (YAML, indented for spec.resources).
func badComposition(name, resources string) string {
	return fmt.Sprintf(`
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: %s
spec:
  compositeTypeRef: {apiVersion: badinput.e2e.loom.dev/v1alpha1, kind: XBad}
  resources:
%s`, name, resources)
}

// badPipeline is a Composition of kind XBad in mode Pipeline with one step
// named step of function fn with the given behaviour (YAML flow mapping).
func badPipeline(name, fn, spec string) string {
	return fmt.Sprintf(`
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: %s
spec:
  compositeTypeRef: {apiVersion: badinput.e2e.loom.dev/v1alpha1, kind: XBad}
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: %s}
    input:
      apiVersion: testfn.loom.dev/v1alpha1
      kind: Input
      spec: %s
`, name, fn, spec)
}

// readyNop is a NopResource template named name that turns Ready at once,
// with extra YAML lines appended to the template (patches, ...).
func readyNop(name, fields, extra string) string {
	return fmt.Sprintf(`  - name: %s
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      spec:
        forProvider:
          conditionAfter:
          - {time: 0s, conditionType: Ready, conditionStatus: "True"}
          fields: {id: %s%s}
%s`, name, name, fields, extra)
}

// neverReadyNop is a NopResource template that never turns Ready.
func neverReadyNop(name, labels, fields string) string {
	return fmt.Sprintf(`  - name: %s
    base:
      apiVersion: nop.crossplane.io/v1alpha1
      kind: NopResource
      metadata:
        labels: {%s}
      spec:
        forProvider:
          fields: {id: %s%s}
`, name, labels, name, fields)
}

// want is what a bad input must produce: a condition on the XR (or claim)
// and, unless EventReason is empty, a Warning Event about it. Message
// substrings name the object, the field or step, and the cause.
type want struct {
	CondType     string
	CondStatus   string
	CondReason   string
	CondMessage  []string
	EventReason  string
	EventMessage []string
}

// TestBadInput runs the bad-input corpus end to end: each case is a broken
// Composition, function, reference, XRD, object or bus message, and must
// produce an exact condition (type, status, reason, a message naming the
// object, the field or step, and the cause) and event. A healthy claim
// created after all of them must still become Ready.
func TestBadInput(t *testing.T) {
	env := framework.StartStack(t)
	ctx := t.Context()

	fatal := framework.StartFunction(t, "compose-from-env")
	// A port nothing listens on: the unreachable function.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := l.Addr().String()
	_ = l.Close()

	framework.ApplyYAML(t, badInputKinds, fmt.Sprintf(`
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: badinput-fn}
spec: {endpoint: "%[1]s", insecure: true}
---
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: badinput-fn-timeout}
spec: {endpoint: "%[1]s", insecure: true, timeout: 2s}
---
apiVersion: loom.dev/v1alpha1
kind: Function
metadata: {name: badinput-fn-unreachable}
spec: {endpoint: "%[2]s", insecure: true, timeout: 2s}
`, fatal, unreachable))

	// Compositions the API server itself refuses: their patch and transform
	// types are enums of the Composition's schema, as in Crossplane.
	t.Run("UnknownPatchType", func(t *testing.T) {
		err := applyErr(t, env, badComposition("badinput-unknown-patch", readyNop("nop", "", `    patches:
    - type: FromOuterSpace
      fromFieldPath: spec.parameters.size
      toFieldPath: spec.forProvider.fields.size
`)))
		wantAPIError(t, err, "Composition.apiextensions.crossplane.io \"badinput-unknown-patch\" is invalid", "spec.resources[0].patches[0].type", `Unsupported value: "FromOuterSpace"`)
	})
	// Compositions the admission webhook refuses: broken on their own,
	// whatever composite resource uses them (Crossplane refuses the regexp
	// too; a malformed field path it admits, to fail on every render).
	t.Run("MalformedFieldPath", func(t *testing.T) {
		err := applyErr(t, env, badComposition("badinput-fieldpath", readyNop("nop", "", `    patches:
    - fromFieldPath: spec.parameters[size
      toFieldPath: spec.forProvider.fields.size
`)))
		wantAPIError(t, err, `admission webhook "compositions.apiextensions.crossplane.io" denied the request`, `"badinput-fieldpath" is invalid`, "spec.resources[0].patches[0]", `invalid field path "spec.parameters[size"`)
	})
	t.Run("InvalidRegexp", func(t *testing.T) {
		err := applyErr(t, env, badComposition("badinput-regexp", readyNop("nop", "", `    patches:
    - fromFieldPath: spec.parameters.text
      toFieldPath: spec.forProvider.fields.text
      transforms:
      - type: string
        string: {type: Regexp, regexp: {match: "(unclosed"}}
`)))
		wantAPIError(t, err, `admission webhook "compositions.apiextensions.crossplane.io" denied the request`, `"badinput-regexp" is invalid`, "spec.resources[0].patches[0].transforms[0]", "missing closing )")
	})
	t.Run("UnknownTransformType", func(t *testing.T) {
		err := applyErr(t, env, badComposition("badinput-unknown-transform", readyNop("nop", "", `    patches:
    - fromFieldPath: spec.parameters.size
      toFieldPath: spec.forProvider.fields.size
      transforms:
      - type: reverse
`)))
		wantAPIError(t, err, "Composition.apiextensions.crossplane.io \"badinput-unknown-transform\" is invalid", "spec.resources[0].patches[0].transforms[0].type", `Unsupported value: "reverse"`)
	})

	cases := map[string]struct {
		reason string
		// docs are applied first (Compositions, ...).
		docs []string
		// composition the XR names; params its spec.parameters.
		composition string
		params      map[string]any
		want        want
	}{
		"MapMissingKey": {
			reason: "A map transform without the input's key names the template, the patch and the key.",
			docs: []string{badComposition("badinput-map", readyNop("nop", "", `    patches:
    - fromFieldPath: spec.parameters.size
      toFieldPath: spec.forProvider.fields.size
      transforms:
      - type: map
        map: {small: s, large: l}
`))},
			composition: "badinput-map",
			params:      map[string]any{"size": "huge"},
			want: want{CondType: "Synced", CondStatus: "False", CondReason: "ReconcileError",
				CondMessage: []string{`"nop"`, "spec.parameters.size", `"huge"`},
				EventReason: "ComposeResources", EventMessage: []string{`"nop"`, `"huge"`}},
		},
		"ConvertTypeMismatch": {
			reason: "Converting a string that is no number to int64 names the template and quotes the parse error.",
			docs: []string{badComposition("badinput-convert", readyNop("nop", "", `    patches:
    - fromFieldPath: spec.parameters.text
      toFieldPath: spec.forProvider.fields.count
      transforms:
      - type: convert
        convert: {toType: int64}
`))},
			composition: "badinput-convert",
			params:      map[string]any{"text": "twelve"},
			want: want{CondType: "Synced", CondStatus: "False", CondReason: "ReconcileError",
				CondMessage: []string{`"nop"`, `"twelve"`, "int64"},
				EventReason: "ComposeResources", EventMessage: []string{`"nop"`, `"twelve"`}},
		},
		"CompositionForAnotherKind": {
			reason: "An XR naming a Composition of another kind says which Composition and which kinds.",
			docs: []string{`
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: badinput-other-kind
spec:
  compositeTypeRef: {apiVersion: other.e2e.loom.dev/v1alpha1, kind: XOther}
  resources:
` + readyNop("nop", "", "")},
			composition: "badinput-other-kind",
			want: want{CondType: "Synced", CondStatus: "False", CondReason: "ReconcileError",
				CondMessage: []string{`Composition "badinput-other-kind"`, "is for XOther", "not XBad"},
				EventReason: "ComposeResources", EventMessage: []string{`"badinput-other-kind"`}},
		},
		"FunctionUnreachable": {
			reason:      "A step whose function does not answer names the step and the function and quotes the connection error.",
			docs:        []string{badPipeline("badinput-fn-unreachable", "badinput-fn-unreachable", "{}")},
			composition: "badinput-fn-unreachable",
			want: want{CondType: "Synced", CondStatus: "False", CondReason: "ReconcileError",
				CondMessage: []string{`"compose"`, "badinput-fn-unreachable", "connection refused"},
				EventReason: "ComposeResources", EventMessage: []string{`"compose"`}},
		},
		"FunctionTimeout": {
			reason:      "A step whose function answers after the Function's timeout names the step and says it timed out.",
			docs:        []string{badPipeline("badinput-fn-timeout", "badinput-fn-timeout", "{behaviour: {sleep: 30s}}")},
			composition: "badinput-fn-timeout",
			want: want{CondType: "Synced", CondStatus: "False", CondReason: "ReconcileError",
				CondMessage: []string{`"compose"`, `function "badinput-fn-timeout"`, "timed out"},
				EventReason: "ComposeResources", EventMessage: []string{`"compose"`}},
		},
		"FunctionFatal": {
			reason:      "A Fatal result names the step and quotes the function's message.",
			docs:        []string{badPipeline("badinput-fn-fatal", "badinput-fn", "{behaviour: {fatal: the database tier is sold out}}")},
			composition: "badinput-fn-fatal",
			want: want{CondType: "Synced", CondStatus: "False", CondReason: "ReconcileError",
				CondMessage: []string{`pipeline step "compose" returned a fatal result`, "the database tier is sold out"},
				EventReason: "ComposeResources", EventMessage: []string{`"compose"`, "the database tier is sold out"}},
		},
		"FunctionMalformedResponse": {
			reason:      "A response whose tag is not the request's names the step and the mismatch.",
			docs:        []string{badPipeline("badinput-fn-badtag", "badinput-fn", "{behaviour: {badTag: true}}")},
			composition: "badinput-fn-badtag",
			want: want{CondType: "Synced", CondStatus: "False", CondReason: "ReconcileError",
				CondMessage: []string{`"compose"`, "tag"},
				EventReason: "ComposeResources", EventMessage: []string{`"compose"`, "tag"}},
		},
		"FunctionUnstableRequirements": {
			reason:      "Requirements that change on every call stop after the iteration limit, naming the step.",
			docs:        []string{badPipeline("badinput-fn-unstable", "badinput-fn", "{behaviour: {unstable: true}}")},
			composition: "badinput-fn-unstable",
			want: want{CondType: "Synced", CondStatus: "False", CondReason: "ReconcileError",
				CondMessage: []string{`requirements of pipeline step "compose" didn't stabilize after 5 iterations`},
				EventReason: "ComposeResources", EventMessage: []string{`"compose"`, "stabilize"}},
		},
		"ReferenceMatchesNothing": {
			reason: "A selector that matches no resource names the composed resource, the field and what it waits for.",
			docs: []string{badComposition("badinput-ref-nothing",
				readyNop("nop", ", badinputPeerSelector: {matchControllerRef: true, matchLabels: {badinput.e2e.loom.dev/role: nobody}}", ""))},
			composition: "badinput-ref-nothing",
			want: want{CondType: "ReferencesResolved", CondStatus: "False", CondReason: "WaitingForReferences",
				CondMessage: []string{"NopResource", "spec.forProvider.fields.badinputPeerRef", "matching selector", "role=nobody"}},
		},
		"ReferenceNeverReady": {
			reason: "A selector whose target never turns Ready names the target and the condition it waits for.",
			docs: []string{badComposition("badinput-ref-unready",
				readyNop("nop", ", badinputPeerSelector: {matchControllerRef: true, matchLabels: {badinput.e2e.loom.dev/role: sleeper}}", "")+
					neverReadyNop("sleeper", "badinput.e2e.loom.dev/role: sleeper", ""))},
			composition: "badinput-ref-unready",
			want: want{CondType: "ReferencesResolved", CondStatus: "False", CondReason: "WaitingForReferences",
				CondMessage: []string{"spec.forProvider.fields.badinputPeer", "Ready"}},
		},
		"ReferenceCycle": {
			reason: "Two resources that wait for each other are reported as a cycle naming both.",
			docs: []string{badComposition("badinput-ref-cycle",
				neverReadyNop("left", "badinput.e2e.loom.dev/role: left", ", badinputPeerSelector: {matchControllerRef: true, matchLabels: {badinput.e2e.loom.dev/role: right}}")+
					neverReadyNop("right", "badinput.e2e.loom.dev/role: right", ", badinputPeerSelector: {matchControllerRef: true, matchLabels: {badinput.e2e.loom.dev/role: left}}"))},
			composition: "badinput-ref-cycle",
			want: want{CondType: "ReferencesResolved", CondStatus: "False", CondReason: "ReferenceError",
				CondMessage: []string{"form a cycle", "waits for"},
				EventReason: "ResolveReferences", EventMessage: []string{"form a cycle"}},
		},
		"ObjectTooLarge": {
			reason: "A composed resource over the API server's size limit names the template and quotes the API server's refusal.",
			docs: []string{badComposition("badinput-too-large", readyNop("nop", "", `    patches:
    - {fromFieldPath: spec.parameters.blob, toFieldPath: spec.forProvider.fields.a}
    - {fromFieldPath: spec.parameters.blob, toFieldPath: spec.forProvider.fields.b}
    - {fromFieldPath: spec.parameters.blob, toFieldPath: spec.forProvider.fields.c}
    - {fromFieldPath: spec.parameters.blob, toFieldPath: spec.forProvider.fields.d}
`))},
			composition: "badinput-too-large",
			params:      map[string]any{"blob": strings.Repeat("x", 900*1024)},
			want: want{CondType: "Synced", CondStatus: "False", CondReason: "ReconcileError",
				CondMessage: []string{`"nop"`, "too large"},
				EventReason: "ComposeResources", EventMessage: []string{`"nop"`, "too large"}},
		},
	}

	// Every bad input goes in at once; then each case checks what it
	// produced.
	var docs []string
	for _, tc := range cases {
		docs = append(docs, tc.docs...)
	}
	framework.ApplyYAML(t, docs...)
	xrs := env.Dynamic.Resource(badXRGVR)
	for name, tc := range cases {
		xr := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": badXRGVR.GroupVersion().String(),
			"kind":       "XBad",
			"metadata":   map[string]any{"name": badXRName(name)},
			"spec": map[string]any{
				"compositionRef": map[string]any{"name": tc.composition},
				"parameters":     orEmpty(tc.params),
			},
		}}
		if _, err := xrs.Create(ctx, xr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = xrs.Delete(context.Background(), xr.GetName(), metav1.DeleteOptions{}) })
	}
	claims := env.Dynamic.Resource(badClaimGVR).Namespace("badinput")
	missing := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": badClaimGVR.GroupVersion().String(),
		"kind":       "Bad",
		"metadata":   map[string]any{"name": "missing-composition", "namespace": "badinput"},
		"spec":       map[string]any{"compositionRef": map[string]any{"name": "badinput-does-not-exist"}},
	}}
	if _, err := claims.Create(ctx, missing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = claims.Delete(context.Background(), "missing-composition", metav1.DeleteOptions{}) })
	// Created as is: ApplyYAML would wait for CRDs that never come.
	xrds := env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1", Resource: "compositeresourcedefinitions"})
	broken := mustDecode(t, brokenXRD)[0]
	if _, err := xrds.Create(ctx, broken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = xrds.Delete(context.Background(), broken.GetName(), metav1.DeleteOptions{}) })

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			expect(t, env, xrs, badXRName(name), "XBad", tc.want)
		})
	}
	t.Run("ClaimNamesMissingComposition", func(t *testing.T) {
		// As in Crossplane v1, the claim waits for its XR and the XR says
		// why it cannot render.
		expect(t, env, claims, "missing-composition", "Bad", want{
			CondType: "Ready", CondStatus: "False", CondReason: "Waiting",
			CondMessage: []string{"waiting for composite resource"},
		})
		var xrName string
		framework.Eventually(t, time.Minute, func() error {
			c, err := claims.Get(ctx, "missing-composition", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if xrName, _, _ = unstructured.NestedString(c.Object, "spec", "resourceRef", "name"); xrName == "" {
				return errors.New("the claim has no resourceRef yet")
			}
			return nil
		})
		expect(t, env, xrs, xrName, "XBad", want{
			CondType: "Synced", CondStatus: "False", CondReason: "ReconcileError",
			CondMessage: []string{`Composition "badinput-does-not-exist"`, "does it exist?"},
			EventReason: "ComposeResources", EventMessage: []string{`"badinput-does-not-exist"`},
		})
	})
	t.Run("InvalidXRDSchema", func(t *testing.T) {
		expect(t, env, xrds, broken.GetName(), "CompositeResourceDefinition", want{
			CondType: "Synced", CondStatus: "False", CondReason: "InvalidDefinition",
			CondMessage: []string{`CustomResourceDefinition "xbroken.badinput.e2e.loom.dev"`, "spec.validation.openAPIV3Schema.properties[spec].properties[size].type", `Unsupported value: "strnig"`},
			EventReason: "InvalidDefinition", EventMessage: []string{`Unsupported value: "strnig"`},
		})
	})
	t.Run("BusGarbage", func(t *testing.T) { busGarbage(t, env) })

	// A failure reports itself once: a message that changed on every
	// attempt would rewrite the status (and render again) each time, and
	// show as one Event per attempt.
	t.Run("NoStatusLoop", func(t *testing.T) {
		for name := range cases {
			evs, err := env.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{
				FieldSelector: fmt.Sprintf("involvedObject.name=%s,involvedObject.kind=XBad", badXRName(name)),
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(evs.Items); n > 3 {
				t.Errorf("XBad %s has %d distinct Events, want at most 3; the last: %s", badXRName(name), n, evs.Items[n-1].Message)
			}
		}
	})

	// Whatever the bad inputs did, a healthy claim still becomes Ready.
	t.Run("HealthyAfterwards", func(t *testing.T) {
		framework.ApplyYAML(t, badComposition("badinput-healthy", readyNop("nop", "", `    patches:
    - fromFieldPath: spec.parameters.size
      toFieldPath: spec.forProvider.fields.size
`)))
		c := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": badClaimGVR.GroupVersion().String(),
			"kind":       "Bad",
			"metadata":   map[string]any{"name": "healthy", "namespace": "badinput"},
			"spec":       map[string]any{"parameters": map[string]any{"size": "small"}},
		}}
		if _, err := claims.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = claims.Delete(context.Background(), "healthy", metav1.DeleteOptions{}) })
		framework.Eventually(t, 2*time.Minute, func() error {
			got, err := claims.Get(ctx, "healthy", metav1.GetOptions{})
			if err != nil {
				return err
			}
			return hasCondition(got, "Ready", "True", "Available")
		})
	})
}

func badXRName(name string) string { return "badinput-" + strings.ToLower(name) }

// brokenXRD is an XRD whose schema the API server cannot accept for a CRD.
const brokenXRD = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xbroken.badinput.e2e.loom.dev
spec:
  group: badinput.e2e.loom.dev
  names: {kind: XBroken, plural: xbroken}
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
              size: {type: strnig}
`

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// applyErr applies docs and returns the API server's error (nil if it
// accepted them, in which case they are deleted when t ends).
func applyErr(t *testing.T, env *framework.Env, docs string) error {
	t.Helper()
	objs := mustDecode(t, docs)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	applied, err := env.Stack.ApplyObjects(ctx, objs...)
	for _, o := range applied {
		t.Cleanup(func() {
			if ri, err := env.Resource(o); err == nil {
				_ = ri.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
			}
		})
	}
	return err
}

// wantAPIError fails t unless err is the API server's Invalid error with
// every one of parts in its message.
func wantAPIError(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("the API server accepted the object, want it refused as invalid")
	}
	if !kerrors.IsInvalid(err) {
		t.Errorf("error is not Invalid: %v", err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q lacks %q", err, p)
		}
	}
}

// expect waits until the object's condition and event are as w says.
func expect(t *testing.T, env *framework.Env, ri interface {
	Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
}, name, kind string, w want) {
	t.Helper()
	ctx := t.Context()
	var got *unstructured.Unstructured
	framework.Eventually(t, 90*time.Second, func() error {
		var err error
		if got, err = ri.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		status, reason, msg := conditionField(got, w.CondType, "status"), conditionField(got, w.CondType, "reason"), conditionField(got, w.CondType, "message")
		var errs []error
		if status != w.CondStatus || (w.CondReason != "" && reason != w.CondReason) {
			errs = append(errs, fmt.Errorf("%s %s: condition %s is %s/%s (%q), want %s/%s", kind, name, w.CondType, status, reason, msg, w.CondStatus, w.CondReason))
		}
		for _, p := range w.CondMessage {
			if !strings.Contains(msg, p) {
				errs = append(errs, fmt.Errorf("%s %s: condition %s message %q lacks %q", kind, name, w.CondType, msg, p))
			}
		}
		return errors.Join(errs...)
	})
	t.Logf("%s %s: %s %s/%s: %s", kind, name, w.CondType, conditionField(got, w.CondType, "status"), conditionField(got, w.CondType, "reason"), conditionField(got, w.CondType, "message"))
	if w.EventReason == "" {
		return
	}
	framework.Eventually(t, 60*time.Second, func() error {
		evs, err := env.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{
			FieldSelector: fmt.Sprintf("involvedObject.name=%s,involvedObject.kind=%s", name, kind),
		})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			seen = append(seen, e.Type+"/"+e.Reason+": "+e.Message)
			if e.Type != "Warning" || e.Reason != w.EventReason {
				continue
			}
			ok := true
			for _, p := range w.EventMessage {
				ok = ok && strings.Contains(e.Message, p)
			}
			if ok {
				t.Logf("%s %s: event %s/%s: %s", kind, name, e.Type, e.Reason, e.Message)
				return nil
			}
		}
		return fmt.Errorf("%s %s: no Warning event %s with %q among %q", kind, name, w.EventReason, w.EventMessage, seen)
	})
}

// busGarbage publishes bytes that are no event to a renderer partition and
// checks that the message is dead-lettered once, with a reason, and not
// delivered again.
func busGarbage(t *testing.T, env *framework.Env) {
	ctx := t.Context()
	nc, err := nats.Connect(env.Stack.NATSURL(), nats.Name("badinput-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, bus.StreamName("renderer"))
	if err != nil {
		t.Fatal(err)
	}
	partitions := bus.DefaultPartitions
	if p := st.CachedInfo().Config.Metadata["loom.dev/partitions"]; p != "" {
		if _, err := fmt.Sscan(p, &partitions); err != nil {
			t.Fatal(err)
		}
	}
	uid := "garbage-" + rand.Text()
	subject := bus.WorkSubject("renderer", partitions, uid)
	ack, err := js.Publish(ctx, subject, []byte("\xff\xfethis is not an event"))
	if err != nil {
		t.Fatal(err)
	}
	var dl bus.DeadLetter
	framework.Eventually(t, time.Minute, func() error {
		dls, err := bus.ListDeadLetters(ctx, js, "renderer")
		if err != nil {
			return err
		}
		var found []bus.DeadLetter
		for _, d := range dls {
			if d.Subject == subject {
				found = append(found, d)
			}
		}
		if len(found) != 1 {
			return fmt.Errorf("%d dead letters from %s, want 1", len(found), subject)
		}
		dl = found[0]
		return nil
	})
	t.Logf("dead letter %d: service %s, deliveries %d, reason %q", dl.Seq, dl.Service, dl.Deliveries, dl.Reason)
	if !strings.HasPrefix(dl.Reason, "undecodable: cannot decode event") || dl.Deliveries != 1 {
		t.Errorf("dead letter reason %q after %d deliveries, want undecodable after 1", dl.Reason, dl.Deliveries)
	}
	// Not delivered again: its partition's consumer acknowledged it.
	framework.Eventually(t, 30*time.Second, func() error {
		c, err := js.Consumer(ctx, bus.StreamName("renderer"), bus.ConsumerName("renderer", bus.Partition(uid, partitions)))
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.AckFloor.Stream >= ack.Sequence {
			return nil
		}
		// The ack floor also waits for older messages of the partition that
		// are still being retried (the other bad inputs); a terminated
		// message is gone from the work queue all the same.
		s, err := js.Stream(ctx, bus.StreamName("renderer"))
		if err != nil {
			return err
		}
		if _, err := s.GetMsg(ctx, ack.Sequence); errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		return fmt.Errorf("message %d is still in the work stream and consumer %s acknowledged only up to %d", ack.Sequence, info.Name, info.AckFloor.Stream)
	})
}
