package reference

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
)

// mapWorld is a World over a fixed set of objects, applying the same
// filters as the real one.
type mapWorld []*unstructured.Unstructured

func (w mapWorld) Get(_ context.Context, gvk schema.GroupVersionKind, _, name string) (*unstructured.Unstructured, error) {
	for _, o := range w {
		if o.GroupVersionKind().GroupKind() == gvk.GroupKind() && o.GetName() == name {
			return o, nil
		}
	}
	return nil, nil
}

func (w mapWorld) Candidates(_ context.Context, gvk schema.GroupVersionKind, _ string, ctrl *unstructured.Unstructured, matchLabels map[string]string) ([]*unstructured.Unstructured, error) {
	sel := labels.SelectorFromSet(matchLabels)
	var out []*unstructured.Unstructured
	for _, o := range w {
		if o.GroupVersionKind().GroupKind() != gvk.GroupKind() || !sel.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		if ctrl != nil && !controlledBy(o, ctrl) {
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

const xrUID = types.UID("xr-uid")

func theXR() *unstructured.Unstructured {
	xr := &unstructured.Unstructured{Object: map[string]any{}}
	xr.SetAPIVersion("example.org/v1")
	xr.SetKind("XCluster")
	xr.SetName("xr")
	xr.SetUID(xrUID)
	return xr
}

type objOpt func(*unstructured.Unstructured)

func nop(name string, o ...objOpt) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"forProvider": map[string]any{}}}}
	u.SetAPIVersion("nop.crossplane.io/v1alpha1")
	u.SetKind("NopResource")
	u.SetName(name)
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.org/v1", Kind: "XCluster", Name: "xr", UID: xrUID, Controller: ptr.To(true)}})
	for _, fn := range o {
		fn(u)
	}
	return u
}

func field(v any, path ...string) objOpt {
	return func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, v, path...) }
}

func withLabels(l map[string]string) objOpt {
	return func(u *unstructured.Unstructured) { u.SetLabels(l) }
}

func ready(status string) objOpt {
	return field([]any{map[string]any{"type": "Ready", "status": status}}, "status", "conditions")
}

func notControlled() objOpt { return func(u *unstructured.Unstructured) { u.SetOwnerReferences(nil) } }

func ownedBy(fields string) objOpt {
	return func(u *unstructured.Unstructured) {
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{
			Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)},
		}})
	}
}

func compile(t *testing.T, refs ...v1alpha1.Reference) *Rule {
	t.Helper()
	rr := &v1alpha1.ReferenceRule{}
	rr.SetName("nop")
	rr.Spec.For = v1alpha1.KindReference{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource"}
	rr.Spec.References = refs
	c, err := Compile(rr)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return &Rule{For: schema.GroupKind{Group: "nop.crossplane.io", Kind: "NopResource"}, References: c}
}

var networkRef = v1alpha1.Reference{
	ValueField:     "spec.forProvider.network",
	ReferenceField: "spec.forProvider.networkRef",
	SelectorField:  "spec.forProvider.networkSelector",
	Target:         v1alpha1.KindReference{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource"},
	FromFieldPath:  "status.atProvider.id",
	WaitFor:        &v1alpha1.WaitFor{ConditionType: "Ready"},
}

func intent(name string, spec map[string]any) map[string]any {
	o := map[string]any{
		"apiVersion": "nop.crossplane.io/v1alpha1",
		"kind":       "NopResource",
		"metadata":   map[string]any{"name": name},
	}
	if spec != nil {
		o["spec"] = map[string]any{"forProvider": spec}
	}
	return o
}

func TestResolve(t *testing.T) {
	always := v1alpha1.ResolvePolicyAlways
	optional := v1alpha1.ResolutionPolicyOptional
	fromShape := networkRef
	fromShape.ReferenceShape = v1alpha1.ReferenceShapeFrom
	listRef := v1alpha1.Reference{
		ValueField:     "spec.forProvider.subnets",
		ReferenceField: "spec.forProvider.subnetRefs",
		SelectorField:  "spec.forProvider.subnetSelector",
		List:           true,
		Target:         v1alpha1.KindReference{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource"},
		FromFieldPath:  "status.atProvider.id",
	}
	type want struct {
		intent   map[string]any
		problems []Problem
	}
	cases := map[string]struct {
		reason string
		refs   []v1alpha1.Reference
		obj    *unstructured.Unstructured
		others mapWorld
		want   want
	}{
		"SelectorPicksSmallestControlledMatch": {
			reason: "matchControllerRef plus labels picks among the XR's resources with the labels, the smallest name first; the value is written once that target is Ready.",
			refs:   []v1alpha1.Reference{networkRef},
			obj:    nop("sub", field(map[string]any{"matchControllerRef": true, "matchLabels": map[string]any{"role": "net"}}, "spec", "forProvider", "networkSelector")),
			others: mapWorld{
				nop("net-b", withLabels(map[string]string{"role": "net"}), ready("True"), field("id-b", "status", "atProvider", "id")),
				nop("net-c", withLabels(map[string]string{"role": "net"}), ready("True"), field("id-c", "status", "atProvider", "id")),
				nop("net-a", withLabels(map[string]string{"role": "net"}), ready("True"), field("id-a", "status", "atProvider", "id"), notControlled()),
				nop("net-0", withLabels(map[string]string{"role": "other"}), ready("True"), field("id-0", "status", "atProvider", "id")),
			},
			want: want{intent: intent("sub", map[string]any{"networkRef": map[string]any{"name": "net-b"}, "network": "id-b"})},
		},
		"WaitsForReady": {
			reason: "A selected target that is not Ready gets the reference written, not the value, and the wait is reported.",
			refs:   []v1alpha1.Reference{networkRef},
			obj:    nop("sub", field(map[string]any{"matchControllerRef": true}, "spec", "forProvider", "networkSelector")),
			others: mapWorld{nop("net", ready("False"), field("id", "status", "atProvider", "id"))},
			want: want{
				intent: intent("sub", map[string]any{"networkRef": map[string]any{"name": "net"}}),
				problems: []Problem{{Resource: `NopResource "sub"`, Field: "spec.forProvider.network",
					Message: `waits for NopResource "net" to be Ready=True`, Waits: `NopResource "net"`}},
			},
		},
		"WaitsForField": {
			reason: "A Ready target without the field to copy is waited for.",
			refs:   []v1alpha1.Reference{networkRef},
			obj:    nop("sub", field("net", "spec", "forProvider", "networkRef", "name")),
			others: mapWorld{nop("net", ready("True"))},
			want: want{
				intent: intent("sub", nil),
				problems: []Problem{{Resource: `NopResource "sub"`, Field: "spec.forProvider.network",
					Message: `waits for status.atProvider.id of NopResource "net"`, Waits: `NopResource "net"`}},
			},
		},
		"ExternalTargetMissing": {
			reason: "A named target that does not exist and that the XR does not compose is an external wait.",
			refs:   []v1alpha1.Reference{networkRef},
			obj:    nop("sub", field("existing", "spec", "forProvider", "networkRef", "name")),
			want: want{
				intent: intent("sub", nil),
				problems: []Problem{{Resource: `NopResource "sub"`, Field: "spec.forProvider.network",
					Message: `waits for NopResource "existing" to exist`, External: true}},
			},
		},
		"ExternalTargetReady": {
			reason: "An existing target the XR does not control resolves like any other.",
			refs:   []v1alpha1.Reference{networkRef},
			obj:    nop("sub", field("existing", "spec", "forProvider", "networkRef", "name")),
			others: mapWorld{nop("existing", notControlled(), ready("True"), field("id-x", "status", "atProvider", "id"))},
			want:   want{intent: intent("sub", map[string]any{"network": "id-x"})},
		},
		"NoMatch": {
			reason: "A selector that matches nothing is reported, and nothing is written.",
			refs:   []v1alpha1.Reference{networkRef},
			obj:    nop("sub", field(map[string]any{"matchLabels": map[string]any{"role": "net"}}, "spec", "forProvider", "networkSelector")),
			want: want{
				intent: intent("sub", nil),
				problems: []Problem{{Resource: `NopResource "sub"`, Field: "spec.forProvider.networkRef",
					Message: `waits for a NopResource matching selector {role=net}`, External: true}},
			},
		},
		"OptionalNoMatch": {
			reason: "An optional selector that matches nothing is not a problem.",
			refs:   []v1alpha1.Reference{networkRef},
			obj: nop("sub", field(map[string]any{"matchControllerRef": true, "policy": map[string]any{"resolution": "Optional"}},
				"spec", "forProvider", "networkSelector")),
			want: want{intent: intent("sub", nil)},
		},
		"RuleDefaultOptional": {
			reason: "The rule's default policy applies when the reference has none.",
			refs: []v1alpha1.Reference{func() v1alpha1.Reference {
				r := networkRef
				r.Policy = &v1alpha1.ReferencePolicy{Resolution: &optional}
				return r
			}()},
			obj:  nop("sub", field("missing", "spec", "forProvider", "networkRef", "name")),
			want: want{intent: intent("sub", nil)},
		},
		"BothSet": {
			reason: "A value set by someone else together with its reference is an error, and the value is left alone.",
			refs:   []v1alpha1.Reference{networkRef},
			obj: nop("sub", field("static", "spec", "forProvider", "network"),
				field("net", "spec", "forProvider", "networkRef", "name")),
			others: mapWorld{nop("net", ready("True"), field("id", "status", "atProvider", "id"))},
			want: want{
				intent: intent("sub", nil),
				problems: []Problem{{Resource: `NopResource "sub"`, Field: "spec.forProvider.network",
					Message: "is set together with spec.forProvider.networkRef; set either the value or its reference", Error: true}},
			},
		},
		"IfNotPresentKeeps": {
			reason: "A value the binder set is kept, not re-resolved, under IfNotPresent, even if the target changed.",
			refs:   []v1alpha1.Reference{networkRef},
			obj: nop("sub", field("id-old", "spec", "forProvider", "network"),
				field(map[string]any{"matchControllerRef": true}, "spec", "forProvider", "networkSelector"),
				field("net", "spec", "forProvider", "networkRef", "name"),
				ownedBy(`{"f:spec":{"f:forProvider":{"f:network":{},"f:networkRef":{"f:name":{}}}}}`)),
			others: mapWorld{nop("net", ready("True"), field("id-new", "status", "atProvider", "id"))},
			want:   want{intent: intent("sub", map[string]any{"networkRef": map[string]any{"name": "net"}, "network": "id-old"})},
		},
		"AlwaysRefreshes": {
			reason: "Under Always the value is resolved again.",
			refs:   []v1alpha1.Reference{networkRef},
			obj: nop("sub", field("id-old", "spec", "forProvider", "network"),
				field(map[string]any{"name": "net", "policy": map[string]any{"resolve": string(always)}}, "spec", "forProvider", "networkRef"),
				ownedBy(`{"f:spec":{"f:forProvider":{"f:network":{}}}}`)),
			others: mapWorld{nop("net", ready("True"), field("id-new", "status", "atProvider", "id"))},
			want:   want{intent: intent("sub", map[string]any{"network": "id-new"})},
		},
		"KeepsWhileWaiting": {
			reason: "Under Always a value the binder set is kept while the target is not Ready.",
			refs:   []v1alpha1.Reference{networkRef},
			obj: nop("sub", field("id-old", "spec", "forProvider", "network"),
				field(map[string]any{"name": "net", "policy": map[string]any{"resolve": string(always)}}, "spec", "forProvider", "networkRef"),
				ownedBy(`{"f:spec":{"f:forProvider":{"f:network":{}}}}`)),
			others: mapWorld{nop("net", ready("False"), field("id-new", "status", "atProvider", "id"))},
			want: want{
				intent: intent("sub", map[string]any{"network": "id-old"}),
				problems: []Problem{{Resource: `NopResource "sub"`, Field: "spec.forProvider.network",
					Message: `waits for NopResource "net" to be Ready=True`, Waits: `NopResource "net"`}},
			},
		},
		"FromShape": {
			reason: "ACK-style references name their target at from.name.",
			refs:   []v1alpha1.Reference{fromShape},
			obj:    nop("sub", field(map[string]any{"matchControllerRef": true}, "spec", "forProvider", "networkSelector")),
			others: mapWorld{nop("net", ready("True"), field("id", "status", "atProvider", "id"))},
			want:   want{intent: intent("sub", map[string]any{"networkRef": map[string]any{"from": map[string]any{"name": "net"}}, "network": "id"})},
		},
		"List": {
			reason: "A list selector picks every match, sorted by name; the values are deduplicated and sorted.",
			refs:   []v1alpha1.Reference{listRef},
			obj:    nop("np", field(map[string]any{"matchControllerRef": true, "matchLabels": map[string]any{"tier": "a"}}, "spec", "forProvider", "subnetSelector")),
			others: mapWorld{
				nop("s2", withLabels(map[string]string{"tier": "a"}), field("id-z", "status", "atProvider", "id")),
				nop("s1", withLabels(map[string]string{"tier": "a"}), field("id-y", "status", "atProvider", "id")),
				nop("s3", withLabels(map[string]string{"tier": "a"}), field("id-y", "status", "atProvider", "id")),
				nop("s4", withLabels(map[string]string{"tier": "b"}), field("id-b", "status", "atProvider", "id")),
			},
			want: want{intent: intent("np", map[string]any{
				"subnetRefs": []any{map[string]any{"name": "s1"}, map[string]any{"name": "s2"}, map[string]any{"name": "s3"}},
				"subnets":    []any{"id-y", "id-z"},
			})},
		},
		"ListWaitsForAll": {
			reason: "A list resolves only when every target does.",
			refs:   []v1alpha1.Reference{listRef},
			obj: nop("np", field([]any{map[string]any{"name": "s1"}, map[string]any{"name": "s2"}},
				"spec", "forProvider", "subnetRefs")),
			others: mapWorld{nop("s1", field("id-1", "status", "atProvider", "id")), nop("s2")},
			want: want{
				intent: intent("np", nil),
				problems: []Problem{{Resource: `NopResource "np"`, Field: "spec.forProvider.subnets",
					Message: `waits for status.atProvider.id of NopResource "s2"`, Waits: `NopResource "s2"`}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rule := compile(t, tc.refs...)
			world := append(mapWorld{tc.obj}, tc.others...)
			got, problems, err := Resolve(t.Context(), world, theXR(), tc.obj, rule, FieldManager)
			if err != nil {
				t.Fatalf("\n%s\nResolve(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.intent, got.Object); diff != "" {
				t.Errorf("\n%s\nResolve(...) intent: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.problems, problems, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nResolve(...) problems: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCycles(t *testing.T) {
	cases := map[string]struct {
		reason   string
		problems []Problem
		want     []Problem
	}{
		"NoCycle": {
			reason:   "A chain of waits is not a cycle.",
			problems: []Problem{{Resource: "A", Waits: "B"}, {Resource: "B", Waits: "C"}},
		},
		"Cycle": {
			reason:   "Two resources waiting for each other form a cycle, reported once.",
			problems: []Problem{{Resource: "A", Waits: "B"}, {Resource: "B", Waits: "A"}},
			want:     []Problem{{Resource: "A", Field: "references", Message: "form a cycle: A waits for B waits for A", Error: true}},
		},
		"SelfWait": {
			reason:   "A resource waiting for itself is a cycle.",
			problems: []Problem{{Resource: "A", Waits: "A"}},
			want:     []Problem{{Resource: "A", Field: "references", Message: "form a cycle: A waits for A", Error: true}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Cycles(tc.problems), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nCycles(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCompile(t *testing.T) {
	cases := map[string]struct {
		reason  string
		refs    []v1alpha1.Reference
		wantErr string
	}{
		"Valid": {
			reason: "A rule with valid paths and kinds compiles.",
			refs:   []v1alpha1.Reference{networkRef},
		},
		"BadPath": {
			reason: "A malformed field path names the rule, the reference and the field.",
			refs: []v1alpha1.Reference{func() v1alpha1.Reference {
				r := networkRef
				r.ValueField = "spec..network"
				return r
			}()},
			wantErr: `reference rule "nop": spec.references[0].valueField:`,
		},
		"Duplicate": {
			reason:  "The same value field twice is refused.",
			refs:    []v1alpha1.Reference{networkRef, networkRef},
			wantErr: `reference rule "nop": spec.references[1].valueField: "spec.forProvider.network" is listed twice`,
		},
		"Wildcard": {
			reason: "Wildcards are refused.",
			refs: []v1alpha1.Reference{func() v1alpha1.Reference {
				r := networkRef
				r.FromFieldPath = "status.ids[*]"
				return r
			}()},
			wantErr: `reference rule "nop": spec.references[0].fromFieldPath: wildcards are not allowed`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rr := &v1alpha1.ReferenceRule{}
			rr.SetName("nop")
			rr.Spec.For = v1alpha1.KindReference{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource"}
			rr.Spec.References = tc.refs
			_, err := Compile(rr)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.wantErr == "" && got != "" || tc.wantErr != "" && (len(got) < len(tc.wantErr) || got[:len(tc.wantErr)] != tc.wantErr) {
				t.Errorf("\n%s\nCompile(...): error %q, want one starting %q", tc.reason, got, tc.wantErr)
			}
		})
	}
}
