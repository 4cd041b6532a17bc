package event

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

// A started recorder writes events through the events.k8s.io API, as the
// component it was started as, with the note cut to the limit.
func TestStartRecorder(t *testing.T) {
	cs := fake.NewClientset()
	rec, stop, err := StartRecorder(t.Context(), cs, "loom-test")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// Services record events about unstructured objects, which name their
	// own kind (the recorder's scheme is empty).
	xr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.org/v1", "kind": "XThing",
		"metadata": map[string]any{"name": "x", "namespace": "ns", "uid": "u-1"},
	}}
	rec.Event(xr, TypeWarning, "Broken", strings.Repeat("m", 2*NoteLimit))

	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cs.EventsV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) == 0 {
			return false, err
		}
		e := l.Items[0]
		if e.ReportingController != "loom-test" || e.Reason != "Broken" || len(e.Note) != NoteLimit {
			t.Errorf("StartRecorder(...) recorded controller %q, reason %q, a note of %d bytes; want loom-test, Broken, %d",
				e.ReportingController, e.Reason, len(e.Note), NoteLimit)
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("StartRecorder(...): no event recorded: %v", err)
	}
}
