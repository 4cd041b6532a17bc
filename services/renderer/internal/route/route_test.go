package route

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/reconcile"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/renderer/internal/composite"
)

// oneXRD defines the kind XDB of example.org.
type oneXRD struct{}

func (oneXRD) ForComposite(_ context.Context, gk schema.GroupKind) (*v1.CompositeResourceDefinition, error) {
	if gk != (schema.GroupKind{Group: "example.org", Kind: "XDB"}) {
		return nil, nil
	}
	x := &v1.CompositeResourceDefinition{}
	x.Spec.Group = "example.org"
	x.Spec.Names.Kind = "XDB"
	x.Spec.Versions = []v1.CompositeResourceDefinitionVersion{{Name: "v1", Served: true, Referenceable: true}}
	return x, nil
}

// composites records the requests it is handed.
type composites struct{ got []composite.Request }

func (c *composites) Reconcile(_ context.Context, req composite.Request) (reconcile.Result, error) {
	c.got = append(c.got, req)
	return reconcile.Result{}, nil
}

func TestHandleComposite(t *testing.T) {
	xr := &eventsv1.ObjectRef{Group: "example.org", Version: "v1", Kind: "XDB", Name: "db", Uid: "xr-1"}
	gvk := schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "XDB"}
	cases := map[string]struct {
		reason string
		cause  *eventsv1.ObjectRef
		want   composite.Request
	}{
		"XRChanged": {
			reason: "A change of the XR renders it.",
			cause:  xr,
			want:   composite.Request{GVK: gvk, Name: "db", UID: "xr-1"},
		},
		"RevisionChanged": {
			reason: "A revision fan-out names the revision.",
			cause:  &eventsv1.ObjectRef{Group: v1.Group, Version: "v1", Kind: "CompositionRevision", Name: "xdbs-abc"},
			want:   composite.Request{GVK: gvk, Name: "db", UID: "xr-1", Revision: "xdbs-abc"},
		},
		"SecretChanged": {
			reason: "A request of the secrets service (a Secret changed) republishes the XR's connection details.",
			cause:  &eventsv1.ObjectRef{Version: "v1", Kind: "Secret", Namespace: "sys", Name: "server-conn", Uid: "s-1"},
			want:   composite.Request{GVK: gvk, Name: "db", UID: "xr-1", Republish: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &composites{}
			h := NewHandler(oneXRD{}, nil, nil, c, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if _, err := h.Handle(t.Context(), reconcile.Request{Target: xr, Event: &eventsv1.Event{Object: tc.cause, Target: xr, Type: eventsv1.EventType_EVENT_TYPE_REQUEUE}}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]composite.Request{tc.want}, c.got); diff != "" {
				t.Errorf("\n%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
