package reference

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
	kitkube "github.com/loomxr/loom/pkg/kube"
)

// laggingClient is a Client whose reads lag the API server, as the object
// mirror may: Get returns lagged's version of an object where it has one,
// and the API server's (api) under kube.Latest. It records what it wrote.
type laggingClient struct {
	api, lagged map[string]*unstructured.Unstructured
	rules       []unstructured.Unstructured
	gets        []string
	applied     []*unstructured.Unstructured
	statuses    []*unstructured.Unstructured
}

func (c *laggingClient) Get(ctx context.Context, _ schema.GroupVersionKind, _, name string) (*unstructured.Unstructured, error) {
	if o, ok := c.lagged[name]; ok && !kitkube.IsLatest(ctx) {
		c.gets = append(c.gets, "lagged "+name)
		return o.DeepCopy(), nil
	}
	c.gets = append(c.gets, "api "+name)
	return c.api[name].DeepCopy(), nil
}

func (c *laggingClient) List(context.Context, schema.GroupVersionKind, string, labels.Selector) ([]unstructured.Unstructured, error) {
	return c.rules, nil
}

func (c *laggingClient) Apply(_ context.Context, intent *unstructured.Unstructured, _ bool) (*unstructured.Unstructured, error) {
	c.applied = append(c.applied, intent)
	return intent, nil
}

func (c *laggingClient) ApplyStatus(_ context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	c.statuses = append(c.statuses, intent)
	return intent, nil
}

// TestConfirmedWaits checks that a reference whose target the read path
// shows not Ready is read again from the API server, with
// WithConfirmedWaits, before the wait is written.
func TestConfirmedWaits(t *testing.T) {
	raw := networkRule(t)
	xr := dbAndNetXR()
	xr.SetResourceVersion("1")
	db := nop("db", field(map[string]any{"name": "net"}, "spec", "forProvider", "networkRef"))
	netReady := nop("net", ready("True"), field("net-1", "status", "atProvider", "id"))
	netLagging := nop("net", ready("False"))

	type want struct {
		gets    []string
		network string
	}
	cases := map[string]struct {
		reason  string
		opts    []Option
		lagging bool
		want    want
	}{
		"ConfirmedWait": {
			reason:  "A target the read path shows not Ready, but Ready on the API server, resolves: the value is written with the reference, and no wait.",
			opts:    []Option{WithConfirmedWaits()},
			lagging: true,
			want:    want{gets: []string{"api xr", "api db", "lagged net", "api net"}, network: "net-1"},
		},
		"UnconfirmedWait": {
			reason:  "Without WithConfirmedWaits the wait is written as read.",
			lagging: true,
			want:    want{gets: []string{"api xr", "api db", "lagged net"}},
		},
		"NoWaitNoConfirm": {
			reason: "A reference that resolves from the first reading reads nothing again.",
			opts:   []Option{WithConfirmedWaits()},
			want:   want{gets: []string{"api xr", "api db", "api net"}, network: "net-1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &laggingClient{
				api:    map[string]*unstructured.Unstructured{"xr": xr, "db": db, "net": netReady},
				lagged: map[string]*unstructured.Unstructured{},
				rules:  []unstructured.Unstructured{{Object: raw}},
			}
			if tc.lagging {
				c.lagged["net"] = netLagging
			}
			r := NewReconciler(c, NewRules(c, 0), tc.opts...)
			if _, err := r.Reconcile(t.Context(), xr.GroupVersionKind(), "", "xr", false); err != nil {
				t.Fatalf("Reconcile(...): %v", err)
			}
			got := want{gets: c.gets}
			for _, a := range c.applied {
				if a.GetName() == "db" {
					got.network, _, _ = unstructured.NestedString(a.Object, "spec", "forProvider", "network")
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nReconcile(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestConditionWrites checks when the XR's ReferencesResolved condition is
// written: while a reference waits, and when it resolves after a wait, but
// not for references that resolve at once, nor again when it is True.
func TestConditionWrites(t *testing.T) {
	raw := networkRule(t)
	xrWith := dbAndNetXR
	cond := func(status, reason string) map[string]any {
		return map[string]any{"type": string(TypeReferencesResolved), "status": status, "reason": reason,
			"lastTransitionTime": "2026-11-27T00:00:00Z"}
	}
	db := nop("db", field(map[string]any{"name": "net"}, "spec", "forProvider", "networkRef"))
	netReady := nop("net", ready("True"), field("net-1", "status", "atProvider", "id"))
	netWaiting := nop("net", ready("False"))

	cases := map[string]struct {
		reason string
		xr     *unstructured.Unstructured
		net    *unstructured.Unstructured
		want   string // the written condition's status and reason; "" for no write
	}{
		"ResolvedAtOnce": {
			reason: "References that resolve at the first try are not worth a write of the XR's status.",
			xr:     xrWith(),
			net:    netReady,
		},
		"Waiting": {
			reason: "A reference waiting for its target is reported.",
			xr:     xrWith(),
			net:    netWaiting,
			want:   "False/WaitingForReferences",
		},
		"ResolvedAfterWait": {
			reason: "A reference that resolves after a wait turns the condition True.",
			xr:     xrWith(cond("False", string(ReasonWaiting))),
			net:    netReady,
			want:   "True/Resolved",
		},
		"StillResolved": {
			reason: "A True condition is not written again.",
			xr:     xrWith(cond("True", string(ReasonResolved))),
			net:    netReady,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &laggingClient{
				api:   map[string]*unstructured.Unstructured{"xr": tc.xr, "db": db, "net": tc.net},
				rules: []unstructured.Unstructured{{Object: raw}},
			}
			r := NewReconciler(c, NewRules(c, 0))
			if _, err := r.Reconcile(t.Context(), tc.xr.GroupVersionKind(), "", "xr", false); err != nil {
				t.Fatalf("Reconcile(...): %v", err)
			}
			var got []string
			for _, s := range c.statuses {
				conds, _, _ := unstructured.NestedSlice(s.Object, "status", "conditions")
				for _, c := range conds {
					m, _ := c.(map[string]any)
					if m["type"] == string(TypeReferencesResolved) {
						got = append(got, fmt.Sprintf("%s/%s", m["status"], m["reason"]))
					}
				}
			}
			var want []string
			if tc.want != "" {
				want = []string{tc.want}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nReconcile(...) wrote conditions: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// dbAndNetXR returns an XR that composes the NopResources db and net, with
// the given status conditions.
func dbAndNetXR(conds ...any) *unstructured.Unstructured {
	xr := theXR()
	xr.SetUID("xr-uid")
	_ = unstructured.SetNestedSlice(xr.Object, []any{
		map[string]any{"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "name": "db"},
		map[string]any{"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "name": "net"},
	}, "spec", "resourceRefs")
	if len(conds) > 0 {
		_ = unstructured.SetNestedSlice(xr.Object, conds, "status", "conditions")
	}
	return xr
}

// networkRule returns a ReferenceRule of NopResources with networkRef, as
// the client lists it.
func networkRule(t *testing.T) map[string]any {
	t.Helper()
	rr := &v1alpha1.ReferenceRule{}
	rr.SetName("nop")
	rr.Spec.For = v1alpha1.KindReference{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource"}
	rr.Spec.References = []v1alpha1.Reference{networkRef}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
