// Package route is the renderer's bus handler: it looks at the kind of each
// request's target and hands it to the reconciler for that kind.
//
//	target                      handled by
//	CompositeResourceDefinition definition.Reconciler (CRDs, conditions, deletion)
//	Composition                 revision.Reconciler (revisions, requeue of XRs)
//	Function (loom.dev)         forgets the cached endpoint of the function
//	EnvironmentConfig           nothing: XRs that use one asked the watcher to
//	                            watch it and are targeted directly
//	a kind an XRD defines       composite.Reconciler (render the XR)
//
// Targets of other kinds are acknowledged and ignored. A request for an XR
// whose cause is a Secret comes from the secrets service (a connection
// Secret its functions observe changed, or its stored connection details
// are gone): the render then hands the XR's connection details over even
// if they look unchanged (composite.Request.Republish). A request that carries
// a publication is the secrets service's hand-over of what it published for
// the XR (composite.Publication), which the render writes to its status.
package route

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/reconcile"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/renderer/internal/composite"
	"github.com/loomxr/loom/services/renderer/internal/function"
	"github.com/loomxr/loom/services/renderer/internal/revision"
)

// Definitions finds the XRD that defines a kind of XR.
type Definitions interface {
	ForComposite(ctx context.Context, gk schema.GroupKind) (*v1.CompositeResourceDefinition, error)
}

// DefinitionReconciler reconciles one XRD.
type DefinitionReconciler interface {
	Reconcile(ctx context.Context, name string) (reconcile.Result, error)
}

// CompositionReconciler reconciles one Composition; ev is what caused it.
type CompositionReconciler interface {
	Reconcile(ctx context.Context, name string, ev *eventsv1.Event) error
}

// CompositeReconciler renders one XR.
type CompositeReconciler interface {
	Reconcile(ctx context.Context, req composite.Request) (reconcile.Result, error)
}

// FunctionCache forgets what it knows of a function.
type FunctionCache interface {
	Invalidate(name string)
}

// Handler routes bus requests to the renderer's reconcilers.
type Handler struct {
	defs         Definitions
	definitions  DefinitionReconciler
	compositions CompositionReconciler
	composites   CompositeReconciler
	functions    FunctionCache
	log          *slog.Logger
}

// NewHandler returns a Handler. functions may be nil.
func NewHandler(defs Definitions, d DefinitionReconciler, c CompositionReconciler, x CompositeReconciler, functions FunctionCache, log *slog.Logger) *Handler {
	return &Handler{defs: defs, definitions: d, compositions: c, composites: x, functions: functions, log: log}
}

var _ reconcile.Handler = (*Handler)(nil)

var (
	xrdGK         = v1.CompositeResourceDefinitionGroupVersionKind.GroupKind()
	compositionGK = revision.CompositionGVK.GroupKind()
	revisionGK    = revision.RevisionGVK.GroupKind()
	envGK         = composite.EnvironmentConfigGVK.GroupKind()
	functionGK    = function.GVK.GroupKind()
)

// Handle implements reconcile.Handler.
func (h *Handler) Handle(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
	t := r.Target
	gk := schema.GroupKind{Group: t.GetGroup(), Kind: t.GetKind()}
	switch gk {
	case xrdGK:
		return h.definitions.Reconcile(ctx, t.GetName())
	case compositionGK:
		return reconcile.Result{}, h.compositions.Reconcile(ctx, t.GetName(), r.Event)
	case functionGK:
		if h.functions != nil {
			h.functions.Invalidate(t.GetName())
		}
		return reconcile.Result{}, nil
	case envGK, revisionGK:
		return reconcile.Result{}, nil
	}
	xrd, err := h.defs.ForComposite(ctx, gk)
	if err != nil {
		return reconcile.Result{}, err
	}
	if xrd == nil {
		h.log.Debug("Ignoring a request for a kind no XRD defines", "group", t.GetGroup(), "kind", t.GetKind(), "name", t.GetName())
		return reconcile.Result{}, nil
	}
	req := composite.Request{
		GVK:       xrd.GetCompositeGroupVersionKind(),
		Namespace: t.GetNamespace(),
		Name:      t.GetName(),
		UID:       types.UID(t.GetUid()),
	}
	cause := r.Event.GetObject()
	if cause.GetGroup() == revisionGK.Group && cause.GetKind() == revisionGK.Kind {
		req.Revision = cause.GetName()
	}
	if cause.GetGroup() == "" && cause.GetKind() == "Secret" {
		req.Republish = true
	}
	req.Publication = publication(r.Event.GetPublication())
	return h.composites.Reconcile(ctx, req)
}

// publication returns the publication the secrets service handed over in
// p, or nil.
func publication(p *eventsv1.Publication) *composite.Publication {
	if p == nil {
		return nil
	}
	out := &composite.Publication{}
	if p.GetStatus() != "" {
		out.Condition = &common.Condition{
			Type:    composite.TypeConnectionDetailsReady,
			Status:  corev1.ConditionStatus(p.GetStatus()),
			Reason:  common.ConditionReason(p.GetReason()),
			Message: p.GetMessage(),
		}
	}
	if t := p.GetLastPublishedTime(); t != nil {
		out.LastPublishedTime = t.AsTime().UTC().Format(time.RFC3339)
	}
	return out
}
