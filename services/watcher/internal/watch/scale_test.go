package watch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/loomxr/loom/pkg/testing/poll"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/route"
)

// maxBytesPerComposed bounds the watcher's heap per cached composed
// resource. A NopResource in this test carries a 1 KiB annotation, as
// kubectl's last-applied-configuration would, and managed fields; the
// watcher keeps neither.
const maxBytesPerComposed = 2048

// TestScale measures the watcher's memory per composed resource and the
// time and event count of its start-up resync. It creates
// $LOOM_WATCH_SCALE NopResources (for example 2000) composed by one XR, so it
// runs only when that variable is set:
//
//	LOOM_WATCH_SCALE=2000 go test -run TestScale -v ./internal/watch/
func TestScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("LOOM_WATCH_SCALE"))
	if n <= 0 {
		t.Skip("set LOOM_WATCH_SCALE to the number of composed resources to create")
	}
	s := startControlPlane(t)
	ctx := t.Context()
	rc := rest.CopyConfig(s.RESTConfig())
	rc.QPS, rc.Burst = 500, 1000
	dyn := dynamic.NewForConfigOrDie(rc)
	c := cluster{dyn: dyn}

	c.create(t, gvrXRD, `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xwidgets.watch.test.loom.dev}
spec:
  group: watch.test.loom.dev
  names: {kind: XWidget, plural: xwidgets}
  versions: [{name: v1, served: true, referenceable: true}]
`)
	c.create(t, gvrCRD, fmt.Sprintf(crdTemplate, "xwidgets", "XWidget", "xwidget", "Cluster"))
	var xr *unstructured.Unstructured
	poll.Until(t, time.Minute, func() error {
		u := &unstructured.Unstructured{}
		_ = yaml.Unmarshal([]byte(`
apiVersion: watch.test.loom.dev/v1
kind: XWidget
metadata: {name: big}
spec:
  resourceRefs: [{apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: big-0}]
`), &u.Object)
		var err error
		xr, err = dyn.Resource(gvrXR).Create(ctx, u, metav1.CreateOptions{})
		return err
	})

	bulk := strings.Repeat("x", 1024)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			u := &unstructured.Unstructured{}
			_ = yaml.Unmarshal([]byte(fmt.Sprintf(`
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: big-%d
  labels: {crossplane.io/composite: big, crossplane.io/claim-name: big, crossplane.io/claim-namespace: default}
  annotations: {crossplane.io/composition-resource-name: res-%d, last-applied: %s}
  ownerReferences: [{apiVersion: watch.test.loom.dev/v1, kind: XWidget, name: big, uid: %s, controller: true}]
spec: {forProvider: {}}
`, i, i, bulk, xr.GetUID())), &u.Object)
			if _, err := dyn.Resource(gvrNop).Create(ctx, u, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("cannot create NopResource: %v", err)
	}
	t.Logf("created %d NopResources in %s", n, time.Since(start).Round(time.Millisecond))

	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()

	rec := &recorder{}
	w := New(dyn, metadata.NewForConfigOrDie(rc), discovery.NewDiscoveryClientForConfigOrDie(rc), rec,
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithResyncPeriod(0))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start = time.Now()
	go func() { done <- w.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	poll.Until(t, 5*time.Minute, func() error { return w.Ready(ctx) })
	ready := time.Since(start)
	after := heap()
	w.expectWatching(t, gvkNop, route.RoleComposed)

	resyncs := 0
	for _, p := range rec.since(0) {
		if p.ev.GetType() == eventsv1.EventType_EVENT_TYPE_RESYNC {
			resyncs++
		}
	}
	perObject := (int64(after) - int64(before)) / int64(n)
	t.Logf("ready after %s; start-up resync published %d events for %d composed resources of one XR; heap grew %d KiB, %d bytes per composed resource",
		ready.Round(time.Millisecond), resyncs, n, (int64(after)-int64(before))/1024, perObject)
	if resyncs > 10 {
		t.Errorf("start-up resync published %d events; want one per service and target (at most 10 here)", resyncs)
	}
	if perObject > maxBytesPerComposed {
		t.Errorf("heap per composed resource: %d bytes, want at most %d", perObject, maxBytesPerComposed)
	}
}
