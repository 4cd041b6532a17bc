package stack

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// natsClusterName is the cluster name of the servers of a clustered stack.
const natsClusterName = "loom-local"

// embeddedNATS is one NATS server with JetStream running inside the harness
// process. It keeps its ports and store across restarts, so clients
// reconnect to the same URL, cluster peers find it on the same route, and
// streams survive.
type embeddedNATS struct {
	opts *server.Options
	srv  *server.Server
}

// natsCluster is the stack's NATS: one server, or several that form one
// JetStream cluster over loopback routes.
type natsCluster struct {
	servers []*embeddedNATS
}

// startNATS starts the embedded NATS servers, Options.NATSServers of them
// (one unless told otherwise), each on a free loopback port with its own
// JetStream file store in the state folder. Several servers form one
// JetStream cluster named loom-local; their route ports are picked before
// the first starts, since each server must know every route.
func (s *Stack) startNATS(ctx context.Context) error {
	// Every process of Options.Services gets its own NATS user.
	auth, err := newNATSAuth(s.opts.Services)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.natsAuth = auth
	s.mu.Unlock()
	n := max(s.opts.NATSServers, 1)
	c := &natsCluster{}
	var routes []*url.URL
	routePorts := make([]int, n)
	if n > 1 {
		for i := range routePorts {
			p, err := freePort()
			if err != nil {
				return err
			}
			routePorts[i] = p
			routes = append(routes, &url.URL{Scheme: "nats", Host: hostPort(p)})
		}
	}
	for i := range n {
		port, err := freePort()
		if err != nil {
			return err
		}
		opts := &server.Options{
			ServerName: "loom-local",
			Host:       "127.0.0.1",
			Port:       port,
			JetStream:  true,
			StoreDir:   filepath.Join(s.opts.StateDir, "nats"),
			LogFile:    filepath.Join(s.opts.StateDir, "logs", "nats.log"),
			// The harness owns signals; the server must not exit on SIGTERM.
			NoSigs:                 true,
			DisableJetStreamBanner: true,
		}
		if n > 1 {
			opts.ServerName = fmt.Sprintf("loom-local-%d", i)
			opts.StoreDir = filepath.Join(s.opts.StateDir, "nats", fmt.Sprintf("n%d", i))
			opts.LogFile = filepath.Join(s.opts.StateDir, "logs", fmt.Sprintf("nats-%d.log", i))
			opts.Cluster = server.ClusterOpts{Name: natsClusterName, Host: "127.0.0.1", Port: routePorts[i]}
			opts.Routes = routes
		}
		if s.opts.NATSMonitoring {
			mp, err := freePort()
			if err != nil {
				c.stop()
				return err
			}
			opts.HTTPHost, opts.HTTPPort = "127.0.0.1", mp
		}
		if err := s.natsAuth.authorize(opts); err != nil {
			c.stop()
			return err
		}
		if err := os.MkdirAll(opts.StoreDir, 0o755); err != nil {
			c.stop()
			return fmt.Errorf("cannot create NATS store folder: %w", err)
		}
		e := &embeddedNATS{opts: opts}
		if err := e.start(ctx); err != nil {
			c.stop()
			return err
		}
		c.servers = append(c.servers, e)
	}
	s.mu.Lock()
	s.nats = c
	s.mu.Unlock()
	if n == 1 {
		s.logf("NATS (JetStream) ready on %s", c.url())
	} else {
		s.logf("NATS (JetStream cluster %s of %d servers) ready on %s", natsClusterName, n, c.url())
	}
	return nil
}

func (n *embeddedNATS) start(ctx context.Context) error {
	srv, err := server.NewServer(n.opts)
	if err != nil {
		return fmt.Errorf("cannot create NATS server %s: %w", n.opts.ServerName, err)
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

// url returns every server's client URL, comma-separated, as nats.Connect
// and the services' --nats-url accept them.
func (c *natsCluster) url() string {
	return strings.Join(c.urls(), ",")
}

func (c *natsCluster) urls() []string {
	out := make([]string, len(c.servers))
	for i, n := range c.servers {
		out[i] = n.url()
	}
	return out
}

func (c *natsCluster) stop() {
	for _, n := range c.servers {
		n.stop()
	}
}

// busReplicas is the replica count of Loom's JetStream objects on this
// cluster: one on a single server, three on a cluster.
func (c *natsCluster) busReplicas() int {
	return min(len(c.servers), 3)
}

// server returns server i, or an error naming what went wrong.
func (c *natsCluster) server(what string, i int) (*embeddedNATS, error) {
	if c == nil {
		return nil, fmt.Errorf("cannot %s NATS server %d: the stack is not running", what, i)
	}
	if i < 0 || i >= len(c.servers) {
		return nil, fmt.Errorf("cannot %s NATS server %d: the stack runs %d NATS servers", what, i, len(c.servers))
	}
	return c.servers[i], nil
}

// RestartNATS shuts every embedded NATS server down (clients see their
// connections drop) and starts them again on the same ports with the same
// JetStream stores, returning once each accepts connections. On a cluster
// the servers then elect their leaders again; the services wait for that.
func (s *Stack) RestartNATS(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nats == nil {
		return errors.New("cannot restart NATS: the stack is not running")
	}
	s.nats.stop()
	s.logf("NATS stopped; restarting")
	for _, n := range s.nats.servers {
		if err := n.start(ctx); err != nil {
			return err
		}
	}
	s.logf("NATS ready again on %s", s.nats.url())
	return nil
}

// KillNATSServer shuts server i (0-based, in the order of NATSURLs) of the
// embedded NATS servers down at once: its clients lose their connections
// and, on a cluster, its peers lose it. It stays down until
// StartNATSServer(i). Killing a server that is down is not an error.
func (s *Stack) KillNATSServer(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.nats.server("kill", i)
	if err != nil {
		return err
	}
	if n.srv == nil {
		return nil
	}
	n.stop()
	s.logf("NATS server %s killed", n.opts.ServerName)
	return nil
}

// StartNATSServer starts server i again, after KillNATSServer, on the same
// ports with the same JetStream store, and returns once it accepts
// connections (on a cluster it then catches up with its peers on its own).
// Starting a server that runs is not an error.
func (s *Stack) StartNATSServer(ctx context.Context, i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.nats.server("start", i)
	if err != nil {
		return err
	}
	if n.srv != nil {
		return nil
	}
	if err := n.start(ctx); err != nil {
		return err
	}
	s.logf("NATS server %s started again on %s", n.opts.ServerName, n.url())
	return nil
}

// NATSURLs returns the client URL of every embedded NATS server, in a fixed
// order (the index KillNATSServer takes), with the administrator's
// credentials as in NATSURL; nil if the stack is not running. The URLs stay
// the same across restarts.
func (s *Stack) NATSURLs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nats == nil {
		return nil
	}
	urls := s.nats.urls()
	for i, u := range urls {
		urls[i] = withUserInfo(u, s.natsAuth.admin)
	}
	return urls
}

// NATSMonitorURLs returns the base URL (http://127.0.0.1:PORT) of each
// NATS server's monitoring endpoint, in server order, or nil unless
// Options.NATSMonitoring is set.
func (s *Stack) NATSMonitorURLs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nats == nil || !s.opts.NATSMonitoring {
		return nil
	}
	var out []string
	for _, e := range s.nats.servers {
		out = append(out, "http://"+hostPort(e.opts.HTTPPort))
	}
	return out
}

// NATSServerName returns the name of embedded NATS server i, as JetStream
// reports it (for example as a stream's Cluster.Leader), or "" if there is
// no such server.
func (s *Stack) NATSServerName(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.nats.server("name", i)
	if err != nil {
		return ""
	}
	return n.opts.ServerName
}

// BusReplicas returns the replica count the stack gives the services for
// Loom's JetStream objects (LOOM_BUS_REPLICAS): 1 on a single NATS server,
// 3 on a cluster.
func (s *Stack) BusReplicas() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nats == nil {
		return 0
	}
	return s.nats.busReplicas()
}
