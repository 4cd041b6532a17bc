package watch

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/loomxr/loom/pkg/testing/poll"
	"github.com/loomxr/loom/services/watcher/internal/object"
	"github.com/loomxr/loom/services/watcher/internal/route"
)

// TestReplacedSource checks what a source that replaces another (because
// the kind's watch had to change) publishes once its initial list is in:
// nothing for objects the old source had at the same resourceVersion, a
// change for those that changed, and a deletion for those that are gone.
// The API server is faked here, because the window between two sources is
// too short to hit reliably on a real one (TestWatcher covers the rest).
func TestReplacedSource(t *testing.T) {
	controller := true
	nop := func(name, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource"},
			ObjectMeta: metav1.ObjectMeta{
				Name: name, UID: types.UID(name + "-uid"), ResourceVersion: rv,
				Labels:          map[string]string{object.LabelComposite: "xr"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.org/v1", Kind: "XR", Name: "xr", UID: "xr-uid", Controller: &controller}},
			},
		}
	}
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// The API server now has "same" unchanged and "changed" at a new version;
	// "gone" was deleted while the sources changed over.
	client := metadatafake.NewSimpleMetadataClient(scheme, nop("same", "1"), nop("changed", "3"))
	known := map[string]any{"same": nop("same", "1"), "changed": nop("changed", "2"), "gone": nop("gone", "1")}

	rec := &recorder{}
	w := New(nil, client, nil, rec, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	w.ctx = t.Context()
	w.live.Store(true)
	w.mu.Lock()
	w.start(gvkNop, route.RoleComposed, spec{gvr: gvrNop}, known)
	w.mu.Unlock()
	t.Cleanup(w.stopAll)

	type got struct{ Service, Type, Object string }
	var gots map[got]int
	// This watcher watches no ReferenceRules: whether one names
	// NopResource is unknown, so the binder hears of them too.
	want := map[got]int{
		{route.Binder, "EVENT_TYPE_ADDED", "changed"}:   1,
		{route.Renderer, "EVENT_TYPE_ADDED", "changed"}: 1,
		{route.Secrets, "EVENT_TYPE_ADDED", "changed"}:  1,
		{route.Binder, "EVENT_TYPE_DELETED", "gone"}:    1,
		{route.Renderer, "EVENT_TYPE_DELETED", "gone"}:  1,
		{route.Secrets, "EVENT_TYPE_DELETED", "gone"}:   1,
	}
	poll.Until(t, 10*time.Second, func() error {
		gots = map[got]int{}
		for _, p := range rec.since(0) {
			gots[got{p.service, p.ev.GetType().String(), p.ev.GetObject().GetName()}]++
		}
		if len(gots) < len(want) {
			return errors.New("not all published yet")
		}
		return nil
	})
	if diff := cmp.Diff(want, gots); diff != "" {
		t.Errorf("published (service, type, object): -want, +got:\n%s", diff)
	}
}
