package composite

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
)

func TestPublicationWaits(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	xrd := &v1.CompositeResourceDefinition{}
	xr := testXR
	// readyAt is a composed resource that turned Ready at t.
	readyAt := func(t time.Time) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": t.Format(time.RFC3339)}}}}}
	}
	creating := map[string]any{"type": "Ready", "status": "False", "reason": "Creating"}
	ready := &rendered{resources: []composed{{name: "a", ready: true, observed: readyAt(now.Add(-time.Second))}}}
	unready := &rendered{resources: []composed{{name: "a"}}}
	published := Publication{Condition: &common.Condition{Type: TypeConnectionDetailsReady, Status: "True", Reason: "Published"}, LastPublishedTime: "2026-01-01T00:00:30Z"}

	cases := map[string]struct {
		reason    string
		xr        *unstructured.Unstructured
		out       *rendered
		handedAt  time.Duration           // before now; zero: nothing handed over
		seenReady time.Duration           // before now; zero: never found Ready before
		rev       *v1.CompositionRevision // nil: details from a status
		wantReady time.Duration
		wantHold  time.Duration
	}{
		"ReadyWaitsForPublication": {
			reason: "An XR turning Ready whose Secret is not published yet waits for it.",
			xr:     xr(true, creating), out: ready,
			wantReady: DefaultPublicationWait,
		},
		"ReadyWaitsFromFirstSight": {
			reason: "The wait counts from the first render that found the XR Ready.",
			xr:     xr(true, creating), out: ready, seenReady: time.Second,
			wantReady: DefaultPublicationWait - time.Second,
		},
		"ReadyWaitOver": {
			reason: "The wait ends: a secrets service that never hands over shows.",
			xr:     xr(true, creating), out: ready, seenReady: DefaultPublicationWait,
		},
		"DetailsKnownFromStart": {
			reason: "Details known from the start are published when the XR turns Ready: nothing to wait for.",
			xr:     xr(true, creating), out: ready,
			rev: detailsRevision(v1.ConnectionDetail{Name: ptr("endpoint"), Type: ptr(v1.ConnectionDetailTypeFromValue), Value: ptr("db.example.org")},
				v1.ConnectionDetail{Name: ptr("region"), FromFieldPath: ptr("spec.forProvider.region")}),
		},
		"DetailsFromSecret": {
			reason: "A provider's connection Secret comes with its progress: wait.",
			xr:     xr(true, creating), out: ready,
			rev:       detailsRevision(v1.ConnectionDetail{FromConnectionSecretKey: ptr("password")}),
			wantReady: DefaultPublicationWait,
		},
		"NoSecret": {
			reason: "An XR without a connection Secret has nothing to wait for.",
			xr:     xr(false, creating), out: ready,
		},
		"PublicationHandedOver": {
			reason: "A publication handed over goes with the Ready status at once.",
			xr:     xr(true, creating), out: ready, handedAt: time.Second,
		},
		"PublicationShown": {
			reason: "A publication the XR shows is known.",
			xr:     xr(true, creating, map[string]any{"type": string(TypeConnectionDetailsReady), "status": "True", "reason": "Published"}), out: ready,
		},
		"AlreadyReady": {
			reason: "An XR that is Ready already is not held back.",
			xr:     xr(true, map[string]any{"type": "Ready", "status": "True", "reason": "Available"}), out: ready,
		},
		"HoldForNextStatus": {
			reason: "A publication handed over for an XR that stays not Ready waits for the XR's next status.",
			xr:     xr(true, creating), out: unready, handedAt: 3 * time.Second,
			wantHold: publicationHold - 3*time.Second,
		},
		"HoldOver": {
			reason: "The hold ends: the publication is written on its own.",
			xr:     xr(true, creating), out: unready, handedAt: publicationHold,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := NewReconciler(nil, nil, nil, WithClock(func() time.Time { return now }))
			if tc.seenReady > 0 {
				r.memo.readySince(tc.xr.GetUID(), now.Add(-tc.seenReady))
			}
			if tc.handedAt > 0 {
				r.memo.handOver(tc.xr.GetUID(), published, now.Add(-tc.handedAt))
			}
			st := &state{xr: tc.xr, xrd: xrd, machinery: []string{"spec"}}
			rev := tc.rev
			if rev == nil {
				rev = detailsRevision(v1.ConnectionDetail{Name: ptr("endpoint"), FromFieldPath: ptr("status.atProvider.endpoint")})
			}
			got := max(r.readyWait(st, &selection{patch: map[string]any{}, revision: rev}, tc.out, nil), 0)
			if diff := cmp.Diff(tc.wantReady, got); diff != "" {
				t.Errorf("%s\nreadyWait(...): -want, +got:\n%s", tc.reason, diff)
			}
			got = max(r.holdWait(st, tc.out, nil), 0)
			if diff := cmp.Diff(tc.wantHold, got); diff != "" {
				t.Errorf("%s\nholdWait(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestProgressWait(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	xr := func(conds ...any) *unstructured.Unstructured { return testXR(false, conds...) }
	synced := map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}
	failing := map[string]any{"type": "Synced", "status": "False", "reason": "ReconcileError"}
	creating := map[string]any{"type": "Ready", "status": "False", "reason": "Creating"}
	available := map[string]any{"type": "Ready", "status": "True", "reason": "Available"}
	unready := &rendered{resources: []composed{{name: "a"}, {name: "b", ready: true}}}
	ready := &rendered{resources: []composed{{name: "a", ready: true}}}
	cases := map[string]struct {
		reason  string
		xr      *unstructured.Unstructured
		out     *rendered
		err     error
		written time.Duration // before now; zero: never written by this replica
		want    time.Duration
	}{
		"Progress": {
			reason: "Progress of an XR that stays not Ready waits for its next change, a first-status wait after the last write.",
			xr:     xr(synced, creating), out: unready, written: 2 * time.Second,
			want: DefaultFirstStatusWait - 2*time.Second,
		},
		"ProgressLater": {
			reason: "Progress a first-status wait after the last write is written.",
			xr:     xr(synced, creating), out: unready, written: DefaultFirstStatusWait,
		},
		"NotWrittenHere": {
			reason: "A replica that has not written the XR's status writes its progress (after a restart, say).",
			xr:     xr(synced, creating), out: unready,
		},
		"TurnsReady": {
			reason: "Turning Ready is written at once.",
			xr:     xr(synced, creating), out: ready, written: time.Second,
		},
		"TurnsUnready": {
			reason: "Turning not Ready is written at once.",
			xr:     xr(synced, available), out: unready, written: time.Second,
		},
		"FirstStatus": {
			reason: "The first status is the first-status wait's business.",
			xr:     xr(), out: unready, written: time.Second,
		},
		"Recovered": {
			reason: "A render that succeeds after a failed one is written at once.",
			xr:     xr(failing, creating), out: unready, written: time.Second,
		},
		"Fails": {
			reason: "A failed render is written at once.",
			xr:     xr(synced, creating), out: unready, err: errors.New("boom"), written: time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := NewReconciler(nil, nil, nil, WithClock(func() time.Time { return now }))
			if tc.written > 0 {
				r.memo.wroteStatus(tc.xr.GetUID(), now.Add(-tc.written))
			}
			got := max(r.progressWait(&state{xr: tc.xr}, tc.out, tc.err), 0)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nprogressWait(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// detailsRevision is a CompositionRevision of one template with details ds.
func detailsRevision(ds ...v1.ConnectionDetail) *v1.CompositionRevision {
	rev := &v1.CompositionRevision{}
	rev.Spec.Resources = []v1.ComposedTemplate{{Name: ptr("db"), ConnectionDetails: ds}}
	return rev
}

func ptr[T any](v T) *T { return &v }

// testXR is XR x with the given conditions and, if secret, a connection
// Secret.
func testXR(secret bool, conds ...any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.org/v1", "kind": "XNop", "spec": map[string]any{}}}
	u.SetName("x")
	u.SetUID("xr-1")
	if secret {
		u.Object["spec"] = map[string]any{"writeConnectionSecretToRef": map[string]any{"name": "s", "namespace": "system"}}
	}
	if len(conds) > 0 {
		u.Object["status"] = map[string]any{"conditions": conds}
	}
	return u
}
