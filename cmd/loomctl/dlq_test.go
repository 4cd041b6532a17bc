package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/bus/bustest"
	"github.com/loomxr/loom/pkg/reconcile"
	"github.com/loomxr/loom/pkg/testing/poll"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// runLoomctl runs loomctl with args and returns its output.
func runLoomctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

// `loomctl dlq list` shows what a worker dead-lettered and `loomctl dlq
// replay` puts it back on its work subject.
func TestDLQListAndReplay(t *testing.T) {
	srv := bustest.Run(t)
	nc, js := bustest.Connect(t, srv.URL())
	cfg := bus.Config{Partitions: 4, LeaseTTL: 2 * time.Second, AckWait: 2 * time.Second}
	if err := bus.EnsureStreams(t.Context(), js, cfg); err != nil {
		t.Fatal(err)
	}
	w, err := bus.NewWorker(nc, js, bus.Binder, "b0", bus.HandlerFunc(func(context.Context, bus.Request) (bus.Result, error) {
		return bus.Result{}, reconcile.Terminal(errors.New(`reference "db" matches nothing`))
	}), bus.WithConfig(cfg), bus.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stopWorker := func() { once.Do(func() { stop(); <-done }) }
	t.Cleanup(stopWorker)

	const uid = "6f1d3c2a-9b8e-4f7a-a1b2-c3d4e5f60718"
	pub := bus.NewPublisher(js, bus.WithConfig(cfg))
	ev := &eventsv1.Event{
		Object:          &eventsv1.ObjectRef{Group: "example.org", Version: "v1", Kind: "Claim", Namespace: "team-a", Name: "db.main", Uid: uid},
		ResourceVersion: "12",
		Type:            eventsv1.EventType_EVENT_TYPE_ADDED,
	}
	if err := pub.Publish(t.Context(), bus.Binder, ev); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		dls, err := bus.ListDeadLetters(t.Context(), js, bus.Binder)
		if err == nil && len(dls) != 1 {
			err = fmt.Errorf("%d dead letters, want 1", len(dls))
		}
		return err
	})
	stopWorker()

	out, err := runLoomctl(t, "dlq", "list", "--nats-url", srv.URL(), "--service", bus.Binder, "-o", "json")
	if err != nil {
		t.Fatalf("dlq list: %v\n%s", err, out)
	}
	var got []deadLetterJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("dlq list -o json printed %q: %v", out, err)
	}
	if len(got) != 1 || got[0].FailedAt.IsZero() {
		t.Fatalf("dlq list: %+v", got)
	}
	got[0].FailedAt = time.Time{}
	want := []deadLetterJSON{{
		Seq: 1, Service: bus.Binder, Subject: bus.WorkSubject(bus.Binder, 4, uid),
		Target:     &targetJSON{Group: "example.org", Version: "v1", Kind: "Claim", Namespace: "team-a", Name: "db.main", UID: uid},
		Reason:     `permanent error: reference "db" matches nothing`,
		Deliveries: 1,
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dlq list -o json: -want, +got:\n%s", diff)
	}

	table, err := runLoomctl(t, "dlq", "list", "--nats-url", srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"SEQ", "binder", "Claim.example.org team-a/db.main (" + uid + ")", `reference "db" matches nothing`} {
		if !strings.Contains(table, s) {
			t.Errorf("dlq list table lacks %q:\n%s", s, table)
		}
	}

	cases := map[string]struct {
		reason string
		args   []string
		want   string
	}{
		"NeitherSeqNorAll": {reason: "replay needs a selection", args: []string{"dlq", "replay", "--nats-url", srv.URL()}, want: "exactly one of --seq N and --all"},
		"WrongService":     {reason: "--service guards --seq", args: []string{"dlq", "replay", "--nats-url", srv.URL(), "--seq", "1", "--service", bus.Renderer}, want: "belongs to service binder"},
		"UnknownService":   {reason: "services are checked", args: []string{"dlq", "list", "--nats-url", srv.URL(), "--service", "nope"}, want: "unknown service"},
		"BadOutput":        {reason: "output formats are checked", args: []string{"dlq", "list", "--nats-url", srv.URL(), "-o", "yaml"}, want: "unknown output format"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := runLoomctl(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got error %v, want one containing %q", tc.reason, err, tc.want)
			}
		})
	}

	out, err = runLoomctl(t, "dlq", "replay", "--nats-url", srv.URL(), "--all", "--service", bus.Binder)
	if err != nil {
		t.Fatalf("dlq replay: %v\n%s", err, out)
	}
	if !strings.Contains(out, "replayed 1 (binder") {
		t.Errorf("dlq replay printed %q", out)
	}
	if dls, err := bus.ListDeadLetters(t.Context(), js, ""); err != nil || len(dls) != 0 {
		t.Errorf("dead letters after replay: %v %v", dls, err)
	}
	s, err := js.Stream(t.Context(), bus.StreamName(bus.Binder))
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 1 {
		t.Errorf("work stream holds %d messages after replay, want 1", n)
	}
}

// The NATS URL comes from the flag, then the environment.
func TestDLQURL(t *testing.T) {
	t.Setenv("LOOM_NATS_URL", "nats://env:4222")
	f := &dlqFlags{natsURL: "nats://flag:4222"}
	if u, _ := f.url(); u != "nats://flag:4222" {
		t.Errorf("flag: got %q", u)
	}
	f.natsURL = ""
	if u, _ := f.url(); u != "nats://env:4222" {
		t.Errorf("environment: got %q", u)
	}
	t.Setenv("LOOM_NATS_URL", "")
	f.stateDir = t.TempDir()
	if _, err := f.url(); err == nil || !strings.Contains(err.Error(), "no NATS URL") {
		t.Errorf("no stack: got %v", err)
	}
}
