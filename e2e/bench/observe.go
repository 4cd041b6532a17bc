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

// A readyTracker records, from a watch, when each object of a kind was
// first seen with condition Ready=True. Its times have the precision of the
// harness's clock, unlike conditions' lastTransitionTime (whole seconds).
type readyTracker struct {
	what string

	mu      sync.Mutex
	readyAt map[string]time.Time
	want    int           // signal done once this many are Ready; 0: never
	done    chan struct{} // closed once want objects are Ready
}

func newReadyTracker(what string) *readyTracker {
	return &readyTracker{what: what, readyAt: map[string]time.Time{}, done: make(chan struct{})}
}

// expect makes done close once n objects are Ready (at once if they are).
func (t *readyTracker) expect(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.want = n
	t.check()
}

func (t *readyTracker) check() {
	if t.want > 0 && len(t.readyAt) >= t.want {
		select {
		case <-t.done:
		default:
			close(t.done)
		}
	}
}

func (t *readyTracker) observe(o *unstructured.Unstructured, at time.Time) {
	if s, _ := readyCondition(o); s != "True" {
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
func (t *readyTracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.readyAt)
}

// snapshot returns a copy of the first-Ready times by name.
func (t *readyTracker) snapshot() map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]time.Time, len(t.readyAt))
	for k, v := range t.readyAt {
		out[k] = v
	}
	return out
}

// run lists and then watches ri (with opts' label selector) until ctx
// ends, feeding every object to t. It resumes a dropped watch from the last
// resourceVersion it saw and lists afresh when that is too old.
func (t *readyTracker) run(ctx context.Context, ri dynamic.ResourceInterface, opts metav1.ListOptions) error {
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			l, err := ri.List(ctx, metav1.ListOptions{LabelSelector: opts.LabelSelector, ResourceVersion: "0"})
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("cannot list %s: %w", t.what, err)
			}
			now := time.Now()
			for i := range l.Items {
				t.observe(&l.Items[i], now)
			}
			rv = l.GetResourceVersion()
		}
		w, err := ri.Watch(ctx, metav1.ListOptions{
			LabelSelector:       opts.LabelSelector,
			ResourceVersion:     rv,
			AllowWatchBookmarks: true,
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if kerrors.IsGone(err) || kerrors.IsResourceExpired(err) {
				rv = ""
				continue
			}
			return fmt.Errorf("cannot watch %s: %w", t.what, err)
		}
		rv = t.consume(w, rv)
	}
	return nil
}

// consume reads w until it ends and returns the resourceVersion to resume
// from ("" to list afresh).
func (t *readyTracker) consume(w watch.Interface, rv string) string {
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
				t.observe(o, now)
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
