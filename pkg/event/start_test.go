package event

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/loomxr/loom/pkg/testing/poll"
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

	poll.Until(t, 10*time.Second, func() error {
		l, err := cs.EventsV1().Events("ns").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return errors.New("no event recorded")
		}
		e := l.Items[0]
		if e.ReportingController != "loom-test" || e.Reason != "Broken" || len(e.Note) != NoteLimit {
			t.Errorf("StartRecorder(...) recorded controller %q, reason %q, a note of %d bytes; want loom-test, Broken, %d",
				e.ReportingController, e.Reason, len(e.Note), NoteLimit)
		}
		return nil
	})
}
