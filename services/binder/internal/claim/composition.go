package claim

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/lru"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/composition"
	kitkube "github.com/loomxr/loom/pkg/kube"
)

// A Lister lists objects of a kind.
type Lister interface {
	List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]unstructured.Unstructured, error)
}

// Defaults of a Compositions.
const (
	// DefaultCompositionsTTL is how long a list of Compositions or of a
	// Composition's revisions is used before it is read again.
	DefaultCompositionsTTL = 5 * time.Second
	// DefaultCompositionsSize is how many lists are kept.
	DefaultCompositionsSize = 1024
)

// Compositions chooses, when the binder binds a claim, the Composition and
// the CompositionRevision its composite resource (XR) will use, so that the
// claim's binding update already names them. Without it the renderer
// chooses them for the XR and the binder copies them back to the claim
// (BackPropagate), one more update of every claim.
//
// The choice is the renderer's (package composition): the XRD's enforced
// Composition, else the claim's compositionRef, else the XRD's default
// Composition when the claim has no compositionSelector, else one of the
// compatible Compositions matching the selector, chosen by the claim's UID;
// under the Automatic update policy, the latest revision of that
// Composition that matches the claim's compositionRevisionSelector or the
// XRD's default one. The XR is created with the claim's compositionRef, so
// the renderer keeps that Composition; it still selects the revision
// itself. The lists come from the object mirror (kitkube.WholeKind) and are
// kept for a few seconds: a choice made from a stale list is corrected by
// the renderer and copied back, the write this saves in the usual case.
type Compositions struct {
	list Lister
	ttl  time.Duration
	now  func() time.Time
	memo *lru.Cache // list key to listed
}

type listed struct {
	at    time.Time
	items []unstructured.Unstructured
}

// NewCompositions returns a Compositions that lists through l, keeps size
// lists, each for ttl.
func NewCompositions(l Lister, ttl time.Duration, size int) *Compositions {
	return &Compositions{list: l, ttl: ttl, now: time.Now, memo: lru.New(size)}
}

func (c *Compositions) items(ctx context.Context, gvk schema.GroupVersionKind, sel labels.Selector) ([]unstructured.Unstructured, error) {
	key := gvk.Kind + "\x00" + sel.String()
	if v, ok := c.memo.Get(key); ok {
		if l := v.(listed); c.now().Sub(l.at) < c.ttl { //nolint:forcetypeassert // Only listed is stored.
			return l.items, nil
		}
	}
	items, err := c.list.List(kitkube.WholeKind(ctx), gvk, "", sel)
	if err != nil {
		return nil, err
	}
	if len(items) > 0 {
		// An empty list is not kept: the Composition or revision a claim
		// waits for is usually moments away, and the next claim asks again.
		c.memo.Add(key, listed{at: c.now(), items: items})
	}
	return items, nil
}

// Choose returns the spec fields to add to claim cm, which is being bound
// for the first time, so that it names the Composition and revision its XR
// will use: compositionRef, compositionRevisionSelector (the XRD's default,
// which the renderer would write to the XR) and, under the Automatic update
// policy, compositionRevisionRef. Only fields the claim lacks or holds
// differently are returned. A question the lists cannot answer (no
// compatible Composition, no revision yet, a list that failed) leaves its
// fields out; the renderer then chooses, and its choice flows back.
func (c *Compositions) Choose(ctx context.Context, cm *unstructured.Unstructured, d *xv1.CompositeResourceDefinition) map[string]any {
	out := map[string]any{}
	comp := nestedString(cm, "spec", "compositionRef", "name")
	switch {
	case d.Spec.EnforcedCompositionRef != nil:
		if comp != d.Spec.EnforcedCompositionRef.Name {
			comp = d.Spec.EnforcedCompositionRef.Name
			out["compositionRef"] = map[string]any{"name": comp}
		}
	case comp != "":
	default:
		ml, hasSelector, _ := unstructured.NestedStringMap(cm.Object, "spec", "compositionSelector", "matchLabels")
		if ref := d.Spec.DefaultCompositionRef; ref != nil && !hasSelector {
			comp = ref.Name
		} else {
			items, err := c.items(ctx, composition.CompositionGVK, labels.SelectorFromSet(ml))
			if err != nil {
				return out
			}
			xr := d.GetCompositeGroupVersionKind()
			names := composition.Compatible(items, xr.GroupVersion().String(), xr.Kind)
			if len(names) == 0 {
				return out
			}
			comp = composition.Choose(cm.GetUID(), names)
		}
		out["compositionRef"] = map[string]any{"name": comp}
	}

	policy := updatePolicy(cm, nil, d)
	if policy == xv1.UpdateManual && nestedString(cm, "spec", "compositionRevisionRef", "name") != "" {
		// The claim's revision propagates to the XR, which keeps it.
		return out
	}
	var rs labels.Selector
	if ml, ok, _ := unstructured.NestedStringMap(cm.Object, "spec", "compositionRevisionSelector", "matchLabels"); ok {
		rs = labels.SelectorFromSet(ml)
	} else if def := d.Spec.DefaultCompositionRevisionSelector; def != nil {
		s, err := metav1.LabelSelectorAsSelector(def)
		if err != nil {
			// The renderer says so on the XR.
			return out
		}
		rs = s
		ml := map[string]any{}
		for k, v := range def.MatchLabels {
			ml[k] = v
		}
		out["compositionRevisionSelector"] = map[string]any{"matchLabels": ml}
	}
	if policy != xv1.UpdateAutomatic {
		return out
	}
	items, err := c.items(ctx, composition.RevisionGVK, composition.RevisionsOf(comp))
	if err != nil {
		return out
	}
	revs, err := composition.Revisions(items, comp)
	if err != nil {
		return out
	}
	if latest := composition.Latest(revs, rs); latest != nil && latest.GetName() != nestedString(cm, "spec", "compositionRevisionRef", "name") {
		out["compositionRevisionRef"] = map[string]any{"name": latest.GetName()}
	}
	return out
}
