package route

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/reconcile"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

type defs struct {
	d *xv1.CompositeResourceDefinition
}

func (f defs) ForClaim(_ context.Context, gk schema.GroupKind) (*xv1.CompositeResourceDefinition, error) {
	if gk == f.d.GetClaimGroupVersionKind().GroupKind() {
		return f.d, nil
	}
	return nil, nil
}

func (f defs) ForComposite(_ context.Context, gk schema.GroupKind) (*xv1.CompositeResourceDefinition, error) {
	if gk == f.d.GetCompositeGroupVersionKind().GroupKind() {
		return f.d, nil
	}
	return nil, nil
}

// calls records which reconciler got which request.
type calls []string

func (c *calls) claims() ClaimReconcilerFn {
	return func(_ context.Context, gvk schema.GroupVersionKind, ns, name string) (reconcile.Result, error) {
		*c = append(*c, "claim "+gvk.Kind+" "+ns+"/"+name)
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
}

func (c *calls) composites() CompositeReconcilerFn {
	return func(_ context.Context, gvk schema.GroupVersionKind, _, name string, refresh bool) (reconcile.Result, error) {
		r := "composite " + gvk.Kind + " " + name
		if refresh {
			r += " refresh"
		}
		*c = append(*c, r)
		return reconcile.Result{}, nil
	}
}

func (c *calls) rules() RuleHandlerFn {
	return func(_ context.Context, _ *eventsv1.Event, rule *eventsv1.ObjectRef) error {
		*c = append(*c, "rule "+rule.GetName())
		return nil
	}
}

func TestHandle(t *testing.T) {
	d := &xv1.CompositeResourceDefinition{}
	d.Spec.Group = "example.org"
	d.Spec.Names.Kind = "XDatabase"
	d.Spec.ClaimNames = d.Spec.Names.DeepCopy()
	d.Spec.ClaimNames.Kind = "Database"
	d.Spec.Versions = []xv1.CompositeResourceDefinitionVersion{{Name: "v1", Referenceable: true}}
	rule := &eventsv1.ObjectRef{Group: "loom.dev", Version: "v1alpha1", Kind: "ReferenceRule", Name: "r", Uid: "u"}

	cases := map[string]struct {
		reason string
		req    reconcile.Request
		want   calls
		result reconcile.Result
	}{
		"Claim": {
			reason: "A claim goes to the claim reconciler, at the XRD's version.",
			req:    reconcile.Request{Event: &eventsv1.Event{}, Target: &eventsv1.ObjectRef{Group: "example.org", Version: "v0", Kind: "Database", Namespace: "ns", Name: "db"}},
			want:   calls{"claim Database ns/db"},
			result: reconcile.Result{RequeueAfter: time.Second},
		},
		"Composite": {
			reason: "An XR goes to the reference resolver.",
			req:    reconcile.Request{Event: &eventsv1.Event{}, Target: &eventsv1.ObjectRef{Group: "example.org", Kind: "XDatabase", Name: "db-x"}},
			want:   calls{"composite XDatabase db-x"},
		},
		"CompositeAfterRuleChange": {
			reason: "An XR requeued because a rule changed reloads the rules first.",
			req:    reconcile.Request{Event: &eventsv1.Event{Object: rule}, Target: &eventsv1.ObjectRef{Group: "example.org", Kind: "XDatabase", Name: "db-x"}},
			want:   calls{"composite XDatabase db-x refresh"},
		},
		"Rule": {
			reason: "A reference rule goes to the fan-out.",
			req:    reconcile.Request{Event: &eventsv1.Event{Object: rule}, Target: rule},
			want:   calls{"rule r"},
		},
		"Unknown": {
			reason: "A kind no XRD defines is ignored.",
			req:    reconcile.Request{Event: &eventsv1.Event{}, Target: &eventsv1.ObjectRef{Group: "other.org", Kind: "Thing", Name: "x"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got calls
			h := NewHandler(defs{d: d}, got.claims(), got.composites(), got.rules(), slog.New(slog.DiscardHandler))
			res, err := h.Handle(t.Context(), tc.req)
			if err != nil {
				t.Fatalf("\n%s\nHandle(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nHandle(...) calls: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.result, res); diff != "" {
				t.Errorf("\n%s\nHandle(...) result: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
