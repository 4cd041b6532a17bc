//go:build e2e

package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// A tracker records, from a watch, when each object was first seen to
// satisfy its predicate (by default: condition Ready=True). Its times have
// the precision of the harness's clock, unlike conditions'
// lastTransitionTime (whole seconds).
type tracker struct {
	what string
	pred func(*unstructured.Unstructured) bool

	mu      sync.Mutex
	readyAt map[string]time.Time
	want    int           // signal done once this many are Ready; 0: never
	done    chan struct{} // closed once want objects are Ready
}

// newTracker returns a tracker of objects that satisfy pred, or of Ready
// objects when pred is nil.
func newTracker(what string, pred func(*unstructured.Unstructured) bool) *tracker {
	if pred == nil {
		pred = func(o *unstructured.Unstructured) bool { s, _ := readyCondition(o); return s == "True" }
	}
	return &tracker{what: what, pred: pred, readyAt: map[string]time.Time{}, done: make(chan struct{})}
}

// expect makes done close once n objects are Ready (at once if they are).
func (t *tracker) expect(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.want = n
	t.check()
}

func (t *tracker) check() {
	if t.want > 0 && len(t.readyAt) >= t.want {
		select {
		case <-t.done:
		default:
			close(t.done)
		}
	}
}

func (t *tracker) observe(o *unstructured.Unstructured, at time.Time) {
	if !t.pred(o) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.readyAt[o.GetName()]; ok {
		return
	}
	t.readyAt[o.GetName()] = at
	t.check()
}

// count returns how many objects were seen Ready.
func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.readyAt)
}

// snapshot returns a copy of the first-Ready times by name.
func (t *tracker) snapshot() map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]time.Time, len(t.readyAt))
	for k, v := range t.readyAt {
		out[k] = v
	}
	return out
}

// watchInto lists and then watches ri (objects matching selector) until
// ctx ends, feeding every object to each tracker. It resumes a dropped
// watch from the last resourceVersion it saw and lists afresh when that is
// too old.
func watchInto(ctx context.Context, ri dynamic.ResourceInterface, selector, what string, ts ...*tracker) error {
	feed := func(o *unstructured.Unstructured, at time.Time) {
		for _, t := range ts {
			t.observe(o, at)
		}
	}
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			l, err := ri.List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"})
			if err != nil {
				if ctx.Err() != nil {
					return nil //nolint:nilerr // Cancelled: the observation ended.
				}
				return fmt.Errorf("cannot list %s: %w", what, err)
			}
			now := time.Now()
			for i := range l.Items {
				feed(&l.Items[i], now)
			}
			rv = l.GetResourceVersion()
		}
		w, err := ri.Watch(ctx, metav1.ListOptions{
			LabelSelector:       selector,
			ResourceVersion:     rv,
			AllowWatchBookmarks: true,
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // Cancelled: the observation ended.
			}
			if kerrors.IsGone(err) || kerrors.IsResourceExpired(err) {
				rv = ""
				continue
			}
			return fmt.Errorf("cannot watch %s: %w", what, err)
		}
		rv = consume(w, rv, feed)
	}
	return nil
}

// consume reads w until it ends, feeding added and modified objects, and
// returns the resourceVersion to resume from ("" to list afresh).
func consume(w watch.Interface, rv string, feed func(*unstructured.Unstructured, time.Time)) string {
	defer w.Stop()
	for ev := range w.ResultChan() {
		now := time.Now()
		switch ev.Type {
		case watch.Error:
			err := kerrors.FromObject(ev.Object)
			var se kerrors.APIStatus
			if errors.As(err, &se) && se.Status().Code == 410 {
				return ""
			}
			return rv
		case watch.Added, watch.Modified, watch.Bookmark:
			o, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = o.GetResourceVersion()
			if ev.Type != watch.Bookmark {
				feed(o, now)
			}
		case watch.Deleted:
			if o, ok := ev.Object.(*unstructured.Unstructured); ok {
				rv = o.GetResourceVersion()
			}
		}
	}
	return rv
}

// readyCondition returns the status and lastTransitionTime of o's Ready
// condition ("" and the zero time if it has none).
func readyCondition(o *unstructured.Unstructured) (string, time.Time) {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		s, _ := m["status"].(string)
		ts, _ := m["lastTransitionTime"].(string)
		t, _ := time.Parse(time.RFC3339Nano, ts)
		return s, t
	}
	return "", time.Time{}
}

// conditionSummary renders o's conditions for a diagnostic message.
func conditionSummary(o *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	s := ""
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		s += fmt.Sprintf("[%v=%v %v: %v] ", m["type"], m["status"], m["reason"], m["message"])
	}
	if s == "" {
		return "no conditions"
	}
	return s
}
