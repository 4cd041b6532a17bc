// Package route is the secrets service's bus handler: it hands each target
// to the work it needs.
//
// The watcher routes to the secrets service changes of composite resources
// (XRs; target the XR), of their composed resources (target the
// controlling XR) and of claims (target the claim); the tracker requeues
// XRs whose connection Secrets changed. XRs with connection Secrets are
// cluster scoped (LegacyCluster), claims are namespaced, so a target's
// namespace tells them apart.
//
// An XR is reconciled (package composite). A claim is not reconciled in its
// own partition: what it needs (its copy of the XR's Secret) is written by
// the XR's reconcile, so that one handler at a time writes an XR's Secrets.
// When a claim's spec changed (its generation moved; status updates do not
// count), the handler reads the claim and its XR and requeues the XR.
package route

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/protobuf/types/known/timestamppb"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"

	kitkube "github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/reconcile"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/secrets/internal/tracker"
)

// A Reconciler reconciles XRs (see composite.Reconciler).
type Reconciler interface {
	Reconcile(ctx context.Context, t tracker.Target) (reconcile.Result, error)
}

// A Client reads objects.
type Client interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
}

// A Publisher publishes events (see bus.Publisher).
type Publisher interface {
	Publish(ctx context.Context, service string, ev *eventsv1.Event) error
}

// DefaultMemoSize bounds the claims whose generation a Handler remembers.
const DefaultMemoSize = 65536

// An Option configures a Handler.
type Option func(*Handler)

// WithMemoSize sets how many claims' generations the Handler remembers
// (default DefaultMemoSize); beyond it the least recently seen are
// forgotten. n <= 0 keeps the default.
func WithMemoSize(n int) Option {
	return func(h *Handler) {
		if n > 0 {
			h.claims = lru.New(n)
		}
	}
}

// Handler is the secrets service's reconcile.Handler. It is safe for concurrent
// use.
type Handler struct {
	xrs    Reconciler
	client Client
	pub    Publisher
	// service is the secrets service's work stream, where a claim's
	// change requeues its XR.
	service string
	log     *slog.Logger
	source  string

	// claims holds, per claim, the generation last handled: a bounded
	// least-recently-used cache, so that above its size only the claims
	// seen longest ago are requeued again on their next event.
	claims *lru.Cache // types.UID to int64
}

// NewHandler returns a Handler that reconciles XRs with xrs and reads
// claims through c, requeueing their XRs through pub on service's (its own)
// work stream.
func NewHandler(xrs Reconciler, c Client, pub Publisher, service string, log *slog.Logger, source string, o ...Option) *Handler {
	h := &Handler{xrs: xrs, client: c, pub: pub, service: service, log: log, source: source, claims: lru.New(DefaultMemoSize)}
	for _, fn := range o {
		fn(h)
	}
	return h
}

// Handle handles one target.
func (h *Handler) Handle(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
	t := r.Target
	gvk := schema.GroupVersionKind{Group: t.GetGroup(), Version: t.GetVersion(), Kind: t.GetKind()}
	if t.GetNamespace() == "" {
		return h.xrs.Reconcile(ctx, tracker.Target{GVK: gvk, Name: t.GetName(), UID: types.UID(t.GetUid())})
	}
	return reconcile.Result{}, h.claim(ctx, r, gvk)
}

// claim requeues the XR of a claim whose spec changed.
func (h *Handler) claim(ctx context.Context, r reconcile.Request, gvk schema.GroupVersionKind) error {
	t, ev := r.Target, r.Event
	uid := types.UID(t.GetUid())
	if ev.GetType() == eventsv1.EventType_EVENT_TYPE_DELETED {
		h.forget(uid)
		return nil
	}
	if ev.GetObject().GetUid() == t.GetUid() && ev.GetGeneration() > 0 && h.seen(uid, ev.GetGeneration()) {
		return nil
	}
	claim, err := h.client.Get(ctx, gvk, t.GetNamespace(), t.GetName())
	if kerrors.IsNotFound(err) {
		h.forget(uid)
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot get %s %s/%s: %w", gvk.Kind, t.GetNamespace(), t.GetName(), err)
	}
	apiVersion, _, _ := unstructured.NestedString(claim.Object, "spec", "resourceRef", "apiVersion")
	kind, _, _ := unstructured.NestedString(claim.Object, "spec", "resourceRef", "kind")
	name, _, _ := unstructured.NestedString(claim.Object, "spec", "resourceRef", "name")
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" || name == "" {
		h.record(claim)
		return nil //nolint:nilerr // A claim bound to no XR has nothing to requeue.
	}
	// Read only to decide whether to requeue the XR, which re-reads it.
	xr, err := h.client.Get(kitkube.Guarded(ctx), gv.WithKind(kind), "", name)
	if kerrors.IsNotFound(err) {
		// The XR's creation is an event of its own.
		h.record(claim)
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot get %s %q of claim %s/%s: %w", kind, name, t.GetNamespace(), t.GetName(), err)
	}
	ns, _, _ := unstructured.NestedString(xr.Object, "spec", "claimRef", "namespace")
	cn, _, _ := unstructured.NestedString(xr.Object, "spec", "claimRef", "name")
	if ns != claim.GetNamespace() || cn != claim.GetName() {
		h.record(claim)
		return nil
	}
	xgvk := xr.GroupVersionKind()
	req := &eventsv1.Event{
		Object:          &eventsv1.ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: claim.GetNamespace(), Name: claim.GetName(), Uid: string(claim.GetUID())},
		ResourceVersion: claim.GetResourceVersion(),
		Generation:      claim.GetGeneration(),
		Type:            eventsv1.EventType_EVENT_TYPE_REQUEUE,
		Target:          &eventsv1.ObjectRef{Group: xgvk.Group, Version: xgvk.Version, Kind: xgvk.Kind, Name: xr.GetName(), Uid: string(xr.GetUID())},
		ObservedTime:    timestamppb.Now(),
		Reason:          "claim changed",
		Source:          h.source,
	}
	if err := h.pub.Publish(ctx, h.service, req); err != nil {
		return fmt.Errorf("cannot requeue %s %q for claim %s/%s: %w", kind, name, t.GetNamespace(), t.GetName(), err)
	}
	h.record(claim)
	return nil
}

// seen reports whether the claim's generation was handled already.
func (h *Handler) seen(uid types.UID, gen int64) bool {
	g, ok := h.claims.Get(uid)
	return ok && g.(int64) == gen //nolint:forcetypeassert // Only int64s are stored.
}

func (h *Handler) record(claim *unstructured.Unstructured) {
	h.claims.Add(claim.GetUID(), claim.GetGeneration())
}

func (h *Handler) forget(uid types.UID) {
	h.claims.Remove(uid)
}
