// Package route is the binder's bus handler: it looks at the kind of each
// request's target and hands the request to the reconciler for it: a claim
// to the claim reconciler, a composite resource (XR) to the reference
// resolver, a ReferenceRule to the rule fan-out. Targets of other kinds are
// acknowledged and ignored.
package route

import (
	"context"
	"log/slog"

	"k8s.io/apimachinery/pkg/runtime/schema"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/reconcile"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/binder/internal/reference"
)

// Definitions finds the XRD that defines a kind of claim or XR.
type Definitions interface {
	ForClaim(ctx context.Context, gk schema.GroupKind) (*xv1.CompositeResourceDefinition, error)
	ForComposite(ctx context.Context, gk schema.GroupKind) (*xv1.CompositeResourceDefinition, error)
}

// ClaimReconciler reconciles one claim.
type ClaimReconciler interface {
	Reconcile(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (reconcile.Result, error)
}

// CompositeReconciler resolves the references of one XR's composed
// resources; refresh reloads the reference rules first.
type CompositeReconciler interface {
	Reconcile(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, refresh bool) (reconcile.Result, error)
}

// RuleHandler handles a changed ReferenceRule.
type RuleHandler interface {
	Handle(ctx context.Context, ev *eventsv1.Event, rule *eventsv1.ObjectRef) error
}

// A ClaimReconcilerFn is a function that satisfies ClaimReconciler.
type ClaimReconcilerFn func(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (reconcile.Result, error)

// Reconcile calls fn.
func (fn ClaimReconcilerFn) Reconcile(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (reconcile.Result, error) {
	return fn(ctx, gvk, namespace, name)
}

// A CompositeReconcilerFn is a function that satisfies CompositeReconciler.
type CompositeReconcilerFn func(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, refresh bool) (reconcile.Result, error)

// Reconcile calls fn.
func (fn CompositeReconcilerFn) Reconcile(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, refresh bool) (reconcile.Result, error) {
	return fn(ctx, gvk, namespace, name, refresh)
}

// A RuleHandlerFn is a function that satisfies RuleHandler.
type RuleHandlerFn func(ctx context.Context, ev *eventsv1.Event, rule *eventsv1.ObjectRef) error

// Handle calls fn.
func (fn RuleHandlerFn) Handle(ctx context.Context, ev *eventsv1.Event, rule *eventsv1.ObjectRef) error {
	return fn(ctx, ev, rule)
}

// Handler routes bus requests to the binder's reconcilers.
type Handler struct {
	defs       Definitions
	claims     ClaimReconciler
	composites CompositeReconciler
	rules      RuleHandler
	log        *slog.Logger
}

// NewHandler returns a Handler.
func NewHandler(d Definitions, claims ClaimReconciler, composites CompositeReconciler, rules RuleHandler, log *slog.Logger) *Handler {
	return &Handler{defs: d, claims: claims, composites: composites, rules: rules, log: log}
}

var _ reconcile.Handler = (*Handler)(nil)

// Handle implements reconcile.Handler.
func (h *Handler) Handle(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
	t := r.Target
	if reference.IsRule(t) {
		return reconcile.Result{}, h.rules.Handle(ctx, r.Event, t)
	}
	gk := schema.GroupKind{Group: t.GetGroup(), Kind: t.GetKind()}
	d, err := h.defs.ForClaim(ctx, gk)
	if err != nil {
		return reconcile.Result{}, err
	}
	if d != nil {
		res, err := h.claims.Reconcile(ctx, d.GetClaimGroupVersionKind(), t.GetNamespace(), t.GetName())
		return res, err
	}
	d, err = h.defs.ForComposite(ctx, gk)
	if err != nil {
		return reconcile.Result{}, err
	}
	if d != nil {
		refresh := reference.IsRule(r.Event.GetObject())
		res, err := h.composites.Reconcile(ctx, d.GetCompositeGroupVersionKind(), t.GetNamespace(), t.GetName(), refresh)
		return res, err
	}
	h.log.Debug("Ignoring a request for a kind no XRD defines", "group", t.GetGroup(), "kind", t.GetKind(), "name", t.GetName())
	return reconcile.Result{}, nil
}
