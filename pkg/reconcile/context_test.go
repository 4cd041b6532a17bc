package reconcile

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

func TestRequestFrom(t *testing.T) {
	ref := &eventsv1.ObjectRef{Kind: "Widget", Name: "w"}
	req := Request{Event: &eventsv1.Event{Object: ref, ResourceVersion: "7"}, Target: ref, Delivery: 2}
	cases := map[string]struct {
		reason string
		with   bool
		want   Request
		wantOK bool
	}{
		"Carried": {
			reason: "A context made by WithRequest carries the request.",
			with:   true,
			want:   req,
			wantOK: true,
		},
		"Bare": {
			reason: "Any other context carries none.",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			if tc.with {
				ctx = WithRequest(ctx, req)
			}
			got, ok := RequestFrom(ctx)
			if ok != tc.wantOK {
				t.Errorf("\n%s\nRequestFrom(...): got ok %t, want %t", tc.reason, ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("\n%s\nRequestFrom(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSuperseded(t *testing.T) {
	newer := false
	ctx := WithSuperseded(t.Context(), func() bool { return newer })
	if Superseded(ctx) {
		t.Error("Superseded() = true before a newer event arrived")
	}
	newer = true
	if !Superseded(ctx) {
		t.Error("Superseded() = false after a newer event arrived: it must ask each time")
	}
	if Superseded(t.Context()) {
		t.Error("Superseded() = true on a context that does not know")
	}
}
