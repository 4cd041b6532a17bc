package route_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/pkg/reconcile"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/renderer/internal/kube"
)

// handOver hands the handler the secrets service's hand-over of p for xr.
func (e *env) handOver(xr *unstructured.Unstructured, p *eventsv1.Publication) (reconcile.Result, *kube.Tally, error) {
	e.t.Helper()
	return e.handleEvent(xr, &eventsv1.Event{Object: ref(xr), Target: ref(xr), Type: eventsv1.EventType_EVENT_TYPE_REQUEUE, Publication: p})
}

// TestPublicationOnAPIServer: the renderer writes what the secrets service
// hands over (the XR's ConnectionDetailsReady condition and
// lastPublishedTime) with the rest of the XR's status, keeps it through
// later renders, and holds an XR's Ready back for a moment while its
// connection Secret's first publication is on its way, so that both go in
// one write.
func TestPublicationOnAPIServer(t *testing.T) {
	e := startEnv(t)
	e.establish(testXRD)
	// The Composition's details read a composed resource's status: the
	// secrets service publishes them as the resources turn Ready.
	comp := e.apply(strings.Replace(testComposition(1), "    readinessChecks:\n    - type: MatchString",
		"    connectionDetails:\n    - {name: phase, fromFieldPath: status.atProvider.fields.phase}\n    readinessChecks:\n    - type: MatchString", 1))
	if _, _, err := e.handle(comp, nil); err != nil {
		t.Fatal(err)
	}

	published := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pub := &eventsv1.Publication{Status: "True", Reason: "Published", Message: "Connection Secret system/pub is published",
		LastPublishedTime: timestamppb.New(published)}

	// An XR that is not Ready yet: the hand-over waits for the XR's next
	// status (a while at most), and goes with it: one status write, Ready
	// and published. Later renders keep it.
	xr := e.apply(`
apiVersion: it.loom.dev/v1alpha1
kind: XNop
metadata: {name: pub}
spec:
  parameters: {size: small, replicas: 1}
  writeConnectionSecretToRef: {name: pub, namespace: system}
`)
	if _, _, err := e.handle(xr, nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		res, tally, err := e.handOver(xr, pub)
		if err != nil {
			t.Fatal(err)
		}
		if tally.Writes() != 0 || res.RequeueAfter <= 0 || res.RequeueAfter > 10*time.Second {
			t.Errorf("the hand-over for an XR that is not Ready: %d writes, requeue after %v; want none, and a requeue within 10s", tally.Writes(), res.RequeueAfter)
		}
	}
	nops := composedByName(t, e, xr)
	for _, o := range nops {
		e.provide(o)
	}
	if _, tally, err := e.handle(xr, nops["alpha"]); err != nil || tally.Writes() != 1 {
		t.Errorf("render after the resources turned Ready: err %v, %d writes, want 1 (status)", err, tally.Writes())
	}
	xr = e.mustGet(xnopGVK, "", "pub")
	if condition(xr, "Ready") != "True" || condition(xr, "ConnectionDetailsReady") != "True" {
		t.Errorf("after the resources turned Ready: Ready %q, ConnectionDetailsReady %q; want both True", condition(xr, "Ready"), condition(xr, "ConnectionDetailsReady"))
	}
	if got, want := nested(xr, "status", "connectionDetails", "lastPublishedTime"), "2026-03-01T12:00:00Z"; got != want {
		t.Errorf("lastPublishedTime %q, want %q", got, want)
	}
	if _, tally, err := e.handle(xr, nil); err != nil || tally.Writes() != 0 {
		t.Errorf("render of an unchanged XR: err %v, %d writes, want none", err, tally.Writes())
	}
	if _, tally, err := e.handOver(xr, pub); err != nil || tally.Writes() != 0 {
		t.Errorf("the same hand-over again: err %v, %d writes, want none", err, tally.Writes())
	}
	rotated := &eventsv1.Publication{Status: "True", Reason: "Published", Message: pub.GetMessage(),
		LastPublishedTime: timestamppb.New(published.Add(time.Hour))}
	if _, tally, err := e.handOver(xr, rotated); err != nil || tally.Writes() != 1 {
		t.Errorf("a new publication of a Ready XR: err %v, %d writes, want 1 (status)", err, tally.Writes())
	}
	if got, want := nested(e.mustGet(xnopGVK, "", "pub"), "status", "connectionDetails", "lastPublishedTime"), "2026-03-01T13:00:00Z"; got != want {
		t.Errorf("lastPublishedTime %q after a new publication, want %q", got, want)
	}

	// An XR whose resources turn Ready before its Secret is published:
	// Ready waits for the hand-over, and both go in one write.
	xr = e.apply(`
apiVersion: it.loom.dev/v1alpha1
kind: XNop
metadata: {name: wait}
spec:
  parameters: {size: small, replicas: 1}
  writeConnectionSecretToRef: {name: wait, namespace: system}
`)
	if _, _, err := e.handle(xr, nil); err != nil {
		t.Fatal(err)
	}
	xr = e.mustGet(xnopGVK, "", "wait")
	nops = composedByName(t, e, xr)
	for _, o := range nops {
		e.provideAt(o, time.Now())
	}
	res, tally, err := e.handle(xr, nops["alpha"])
	if err != nil {
		t.Fatal(err)
	}
	if tally.Writes() != 0 || res.RequeueAfter <= 0 {
		t.Errorf("render after the resources turned Ready, Secret not published: %d writes, requeue after %v; want none, and a requeue", tally.Writes(), res.RequeueAfter)
	}
	if got := condition(e.mustGet(xnopGVK, "", "wait"), "Ready"); got != "False" {
		t.Errorf("Ready %q while the publication is on its way, want False (as last written)", got)
	}
	if _, tally, err = e.handOver(xr, pub); err != nil || tally.Writes() != 1 {
		t.Errorf("the hand-over: err %v, %d writes, want 1 (status)", err, tally.Writes())
	}
	xr = e.mustGet(xnopGVK, "", "wait")
	if condition(xr, "Ready") != "True" || condition(xr, "ConnectionDetailsReady") != "True" {
		t.Errorf("after the hand-over: Ready %q, ConnectionDetailsReady %q; want both True", condition(xr, "Ready"), condition(xr, "ConnectionDetailsReady"))
	}
}
