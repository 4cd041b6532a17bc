package stack

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// embeddedNATS is a NATS server with JetStream running inside the harness
// process. It keeps its port and store across restarts, so clients
// reconnect to the same URL and streams survive.
type embeddedNATS struct {
	opts *server.Options
	srv  *server.Server
}

// startNATS starts the embedded NATS server on a free loopback port with a
// JetStream file store in the state folder.
func (s *Stack) startNATS(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	n := &embeddedNATS{opts: &server.Options{
		ServerName: "loom-local",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(s.opts.StateDir, "nats"),
		LogFile:    filepath.Join(s.opts.StateDir, "logs", "nats.log"),
		// The harness owns signals; the server must not exit on SIGTERM.
		NoSigs:                 true,
		DisableJetStreamBanner: true,
	}}
	if err := n.start(ctx); err != nil {
		return err
	}
	s.nats = n
	s.logf("NATS (JetStream) ready on %s", n.url())
	return nil
}

func (n *embeddedNATS) start(ctx context.Context) error {
	srv, err := server.NewServer(n.opts)
	if err != nil {
		return fmt.Errorf("cannot create NATS server: %w", err)
	}
	srv.ConfigureLogger()
	srv.Start()
	deadline := 30 * time.Second
	if d, ok := ctx.Deadline(); ok && time.Until(d) < deadline {
		deadline = time.Until(d)
	}
	if !srv.ReadyForConnections(deadline) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("cannot start NATS on %s: not ready within %s (see %s)", n.url(), deadline, n.opts.LogFile)
	}
	n.srv = srv
	return nil
}

func (n *embeddedNATS) url() string {
	return fmt.Sprintf("nats://%s", hostPort(n.opts.Port))
}

func (n *embeddedNATS) stop() {
	if n.srv == nil {
		return
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
	n.srv = nil
}

// RestartNATS shuts the embedded NATS server down (clients see their
// connections drop) and starts it again on the same port with the same
// JetStream store, returning once it accepts connections.
func (s *Stack) RestartNATS(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nats == nil {
		return errors.New("cannot restart NATS: the stack is not running")
	}
	s.nats.stop()
	s.logf("NATS stopped; restarting")
	if err := s.nats.start(ctx); err != nil {
		return err
	}
	s.logf("NATS ready again on %s", s.nats.url())
	return nil
}
