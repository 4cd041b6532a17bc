package stack

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loomxr/loom/pkg/testing/poll"
)

// natsOnly starts just the stack's NATS servers (no control plane) and stops
// them when the test ends.
func natsOnly(t *testing.T, servers int) *Stack {
	t.Helper()
	s := &Stack{opts: Options{StateDir: t.TempDir(), NATSServers: servers, Log: io.Discard}, start: time.Now()}
	if err := os.MkdirAll(filepath.Join(s.opts.StateDir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.startNATS(t.Context()); err != nil {
		t.Fatalf("startNATS: %v", err)
	}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.nats.stop()
	})
	return s
}

func TestSingleNATSServer(t *testing.T) {
	s := natsOnly(t, 0)
	if got := s.NATSURLs(); len(got) != 1 || got[0] != s.NATSURL() {
		t.Errorf("NATSURLs: got %v, want one URL equal to NATSURL %s", got, s.NATSURL())
	}
	if got := s.BusReplicas(); got != 1 {
		t.Errorf("BusReplicas: got %d, want 1", got)
	}
	if got := s.NATSServerName(0); got != "loom-local" {
		t.Errorf("NATSServerName(0): got %q, want loom-local", got)
	}
	if err := s.KillNATSServer(1); err == nil {
		t.Error("KillNATSServer(1) of a single server: want an error, got nil")
	}
}

// A three-server stack forms one JetStream cluster: a stream with three
// replicas gets a leader, survives the loss of its leader, and the server
// comes back on the same URL with its store.
func TestNATSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server cluster")
	}
	s := natsOnly(t, 3)
	urls := s.NATSURLs()
	if len(urls) != 3 || s.NATSURL() != strings.Join(urls, ",") {
		t.Fatalf("NATSURLs %v, NATSURL %s: want three URLs, NATSURL joining them", urls, s.NATSURL())
	}
	if got := s.BusReplicas(); got != 3 {
		t.Errorf("BusReplicas: got %d, want 3", got)
	}
	for i := range 3 {
		if _, err := os.Stat(filepath.Join(s.opts.StateDir, "nats", "n"+string(rune('0'+i)))); err != nil {
			t.Errorf("store of server %d: %v", i, err)
		}
	}
	nc, err := nats.Connect(s.NATSURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	var st jetstream.Stream
	pollT(t, ctx, "a stream with three replicas", func(ctx context.Context) error {
		st, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3})
		return err
	})
	leader := ""
	pollT(t, ctx, "a stream leader", func(ctx context.Context) error {
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
			return errors.New("no leader, or not three replicas")
		}
		leader = info.Cluster.Leader
		return nil
	})
	names := []string{s.NATSServerName(0), s.NATSServerName(1), s.NATSServerName(2)}
	li := slices.Index(names, leader)
	if li < 0 {
		t.Fatalf("leader %q is none of the servers %v", leader, names)
	}
	if _, err := js.Publish(ctx, "t.1", []byte("before")); err != nil {
		t.Fatal(err)
	}

	if err := s.KillNATSServer(li); err != nil {
		t.Fatal(err)
	}
	if err := s.KillNATSServer(li); err != nil {
		t.Errorf("killing a server that is down: %v", err)
	}
	pollT(t, ctx, "a publish after losing the leader", func(ctx context.Context) error {
		_, err := js.Publish(ctx, "t.2", []byte("after"))
		return err
	})
	pollT(t, ctx, "a new leader", func(ctx context.Context) error {
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" || info.Cluster.Leader == leader {
			return errors.New("no new leader yet")
		}
		return nil
	})
	if err := s.StartNATSServer(ctx, li); err != nil {
		t.Fatal(err)
	}
	if got := s.NATSURLs(); !slices.Equal(got, urls) {
		t.Errorf("NATSURLs after a restart: got %v, want %v", got, urls)
	}
	pollT(t, ctx, "every replica current with both messages", func(ctx context.Context) error {
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs != 2 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			return errors.New("not yet")
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return errors.New("a replica is behind")
			}
		}
		return nil
	})

	if err := s.RestartNATS(ctx); err != nil {
		t.Fatal(err)
	}
	pollT(t, ctx, "the stream after restarting every server", func(ctx context.Context) error {
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs != 2 {
			return errors.New("messages missing")
		}
		return nil
	})
}

// pollT calls f, each call within two seconds (a cluster that lost a
// server may not answer at all), until it succeeds or ctx ends.
func pollT(t *testing.T, ctx context.Context, what string, f func(context.Context) error) {
	t.Helper()
	err := poll.Wait(ctx, func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return f(actx)
	}, poll.Every(50*time.Millisecond))
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
