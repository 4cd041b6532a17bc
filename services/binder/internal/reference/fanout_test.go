package reference

import (
	"context"
	"testing"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// composedLister answers ListMetadata with one NopResource per XR and counts
// the lists.
type composedLister struct {
	laggingClient
	lists int
}

func (c *composedLister) ListMetadata(context.Context, schema.GroupKind) ([]metav1.PartialObjectMetadata, error) {
	c.lists++
	var out []metav1.PartialObjectMetadata
	for _, xr := range []string{"xr-a", "xr-b"} {
		out = append(out, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: xr + "-nop",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "example.org/v1", Kind: "XNet", Name: xr, UID: types.UID("uid-" + xr), Controller: ptr.To(true),
			}},
		}})
	}
	return out, nil
}

func (c *composedLister) Namespaced(schema.GroupVersionKind) (bool, error) { return false, nil }

func (c *composedLister) Get(context.Context, schema.GroupVersionKind, string, string) (*unstructured.Unstructured, error) {
	return nil, kerrors.NewNotFound(schema.GroupResource{}, "")
}

// countingPublisher counts the events published.
type countingPublisher struct{ n int }

func (p *countingPublisher) Publish(context.Context, string, *eventsv1.Event) error {
	p.n++
	return nil
}

// TestFanOutResync checks that a changed ReferenceRule requeues every XR
// that controls a resource of its kind (one LIST of that kind's metadata),
// and that a resync of a generation already fanned out lists and publishes
// nothing, while a resync of a new generation, or of a rule this FanOut has
// not fanned out (a replica that just started), fans out as a change does.
func TestFanOutResync(t *testing.T) {
	ruleRef := &eventsv1.ObjectRef{Group: RuleGroupVersionKind.Group, Kind: RuleGroupVersionKind.Kind, Name: "nop", Uid: "rule-uid"}
	ev := func(typ eventsv1.EventType, gen int64) *eventsv1.Event {
		return &eventsv1.Event{Object: ruleRef, Target: ruleRef, Type: typ, Generation: gen}
	}
	const (
		changed = eventsv1.EventType_EVENT_TYPE_MODIFIED
		resync  = eventsv1.EventType_EVENT_TYPE_RESYNC
	)
	type step struct {
		ev        *eventsv1.Event
		lists     int
		published int
	}
	cases := map[string]struct {
		reason string
		steps  []step
	}{
		"ResyncOfFannedOutGeneration": {
			reason: "A resync of the generation fanned out last lists and publishes nothing.",
			steps: []step{
				{ev: ev(changed, 1), lists: 1, published: 2},
				{ev: ev(resync, 1)},
			},
		},
		"ResyncOfNewGeneration": {
			reason: "A resync that shows a generation not fanned out yet (changed while the watcher was down) fans out.",
			steps: []step{
				{ev: ev(changed, 1), lists: 1, published: 2},
				{ev: ev(resync, 2), lists: 1, published: 2},
				{ev: ev(resync, 2)},
			},
		},
		"ResyncFirst": {
			reason: "A resync of a rule this FanOut never fanned out fans out.",
			steps: []step{
				{ev: ev(resync, 1), lists: 1, published: 2},
			},
		},
		"ChangeOfSameGeneration": {
			reason: "A change that is no resync fans out whatever its generation (a status change another replica may have missed the spec of).",
			steps: []step{
				{ev: ev(changed, 1), lists: 1, published: 2},
				{ev: ev(changed, 1), lists: 1, published: 2},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &composedLister{laggingClient: laggingClient{rules: []unstructured.Unstructured{{Object: networkRule(t)}}}}
			pub := &countingPublisher{}
			f := NewFanOut(NewRules(c, 0), c, pub, "binder")
			for i, s := range tc.steps {
				c.lists, pub.n = 0, 0
				if err := f.Handle(t.Context(), s.ev, ruleRef); err != nil {
					t.Fatalf("\n%s\nstep %d: Handle(...): %v", tc.reason, i, err)
				}
				if c.lists != s.lists || pub.n != s.published {
					t.Errorf("\n%s\nstep %d: Handle(...) listed %d times and published %d events; want %d and %d",
						tc.reason, i, c.lists, pub.n, s.lists, s.published)
				}
			}
		})
	}
}
