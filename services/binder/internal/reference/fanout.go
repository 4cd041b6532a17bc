package reference

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/apis/common"
	"github.com/loomxr/loom/pkg/apply"
	"github.com/loomxr/loom/pkg/condition"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// A Publisher publishes an event to a service's work stream.
type Publisher interface {
	Publish(ctx context.Context, service string, ev *eventsv1.Event) error
}

// A ComposedLister finds the composed resources of a kind.
type ComposedLister interface {
	// ListMetadata returns the metadata of every object of kind gk.
	ListMetadata(ctx context.Context, gk schema.GroupKind) ([]metav1.PartialObjectMetadata, error)
	// Namespaced reports whether gvk is a namespaced kind.
	Namespaced(gvk schema.GroupVersionKind) (bool, error)
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	ApplyStatus(ctx context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error)
}

// FanOut handles a changed ReferenceRule: it reloads the rules, reports on
// the rule's Synced condition whether it is usable, and asks the binder to
// reconcile every XR that controls a resource of the rule's kind (before and
// after the change) by publishing a REQUEUE event for each. The event names
// the rule as its object, which tells the replica that handles it to reload
// its rules first.
//
// A resync of a rule whose generation this FanOut has already fanned out
// publishes nothing and lists nothing: the resync brings every XR an event
// of its own, and every replica that reconciled them since that fan-out had
// reloaded the rule then (the fan-out's events name it).
type FanOut struct {
	rules   *Rules
	client  ComposedLister
	pub     Publisher
	service string
	now     func() metav1.Time

	mu   sync.Mutex
	done map[string]int64 // by rule UID, the generation last fanned out
}

// NewFanOut returns a FanOut that publishes to service's work stream.
func NewFanOut(rules *Rules, c ComposedLister, pub Publisher, service string) *FanOut {
	return &FanOut{rules: rules, client: c, pub: pub, service: service, now: metav1.Now, done: map[string]int64{}}
}

// IsRule reports whether ref names a ReferenceRule.
func IsRule(ref *eventsv1.ObjectRef) bool {
	return ref != nil && ref.GetGroup() == RuleGroupVersionKind.Group && ref.GetKind() == RuleGroupVersionKind.Kind
}

// Handle reacts to ev, a change of the ReferenceRule rule. It is idempotent:
// handling the same change twice publishes events that the bus deduplicates
// or that cause reconciles which change nothing.
func (f *FanOut) Handle(ctx context.Context, ev *eventsv1.Event, rule *eventsv1.ObjectRef) error {
	kinds := map[schema.GroupKind]bool{}
	if gk, ok := f.rules.KindOf(rule.GetName()); ok {
		kinds[gk] = true
	}
	if err := f.rules.Refresh(ctx); err != nil {
		return err
	}
	if gk, ok := f.rules.KindOf(rule.GetName()); ok {
		kinds[gk] = true
	}
	var errs []error
	if err := f.setStatus(ctx, rule.GetName()); err != nil {
		errs = append(errs, err)
	}
	uid, gen := rule.GetUid(), ev.GetGeneration()
	if ev.GetType() == eventsv1.EventType_EVENT_TYPE_RESYNC && gen != 0 && f.fannedOut(uid, gen) {
		return errors.Join(errs...)
	}
	sorted := make([]schema.GroupKind, 0, len(kinds))
	for gk := range kinds {
		sorted = append(sorted, gk)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].String() < sorted[j].String() })
	failed := false
	for _, gk := range sorted {
		if err := f.requeue(ctx, ev, gk); err != nil {
			errs = append(errs, err)
			failed = true
		}
	}
	if !failed && uid != "" && gen != 0 {
		f.mu.Lock()
		if ev.GetType() == eventsv1.EventType_EVENT_TYPE_DELETED {
			delete(f.done, uid)
		} else {
			f.done[uid] = gen
		}
		f.mu.Unlock()
	}
	return errors.Join(errs...)
}

// fannedOut reports whether the rule of that UID was fanned out at
// generation gen.
func (f *FanOut) fannedOut(uid string, gen int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.done[uid]
	return ok && g == gen
}

// requeue publishes a REQUEUE event for every XR that controls a resource of
// kind gk.
func (f *FanOut) requeue(ctx context.Context, ev *eventsv1.Event, gk schema.GroupKind) error {
	items, err := f.client.ListMetadata(ctx, gk)
	if err != nil {
		if kerrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("cannot list %s to find the composite resources a reference rule affects: %w", gk, err)
	}
	seen := map[string]bool{}
	var errs []error
	for _, it := range items {
		ctrl := metav1.GetControllerOf(&it)
		if ctrl == nil || seen[string(ctrl.UID)] {
			continue
		}
		seen[string(ctrl.UID)] = true
		gvk := schema.FromAPIVersionAndKind(ctrl.APIVersion, ctrl.Kind)
		target := &eventsv1.ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Name: ctrl.Name, Uid: string(ctrl.UID)}
		if ns, err := f.client.Namespaced(gvk); err == nil && ns {
			target.Namespace = it.GetNamespace()
		}
		out := &eventsv1.Event{
			Object:          ev.GetObject(),
			ResourceVersion: ev.GetResourceVersion(),
			Generation:      ev.GetGeneration(),
			Type:            eventsv1.EventType_EVENT_TYPE_REQUEUE,
			Target:          target,
			Reason:          fmt.Sprintf("reference rule %s changed", ev.GetObject().GetName()),
		}
		if err := f.pub.Publish(ctx, f.service, out); err != nil {
			errs = append(errs, fmt.Errorf("cannot requeue composite resource %q: %w", ctrl.Name, err))
		}
	}
	return errors.Join(errs...)
}

// setStatus reports on the rule's Synced condition whether it compiled and
// merged.
func (f *FanOut) setStatus(ctx context.Context, name string) error {
	rule, err := f.client.Get(ctx, RuleGroupVersionKind, "", name)
	if kerrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot get reference rule %q: %w", name, err)
	}
	c := common.ReconcileSuccess()
	if invalid := f.rules.Invalid(name); invalid != nil {
		c = common.ReconcileError(invalid)
	}
	c.ObservedGeneration = rule.GetGeneration()
	in := &unstructured.Unstructured{Object: map[string]any{}}
	in.SetGroupVersionKind(RuleGroupVersionKind)
	in.SetName(name)
	in.Object["status"] = map[string]any{"conditions": condition.Intent(rule, FieldManager, f.now(), c)}
	changed, err := apply.Changes(rule, in, FieldManager, "status")
	if err != nil || !changed {
		return err
	}
	if _, err := f.client.ApplyStatus(ctx, in); err != nil && !kerrors.IsNotFound(err) {
		return fmt.Errorf("cannot set the status of reference rule %q: %w", name, err)
	}
	return nil
}
