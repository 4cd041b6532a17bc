// Package bustest runs real NATS servers with JetStream inside the test
// process, so that tests and benchmarks of the bus (and of the services built
// on it) exercise the real server rather than a fake. Servers listen on
// 127.0.0.1 on free ports and keep their store in a folder the caller owns.
package bustest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyTimeout bounds how long a server may take to accept connections.
const readyTimeout = 20 * time.Second

// Server is one embedded NATS server with JetStream enabled.
type Server struct {
	opts *server.Options
	srv  *server.Server
}

// An Option changes the options of a server that Start or Run starts.
type Option func(*server.Options)

// WithMaxPayload sets the server's max_payload, the largest message it
// accepts, in bytes.
func WithMaxPayload(n int32) Option { return func(o *server.Options) { o.MaxPayload = n } }

// Start starts a single NATS server with JetStream, storing its data under
// dir. It returns once the server accepts connections. The caller must call
// Stop.
func Start(dir string, opts ...Option) (*Server, error) {
	o := &server.Options{
		ServerName: "loom-test",
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
	}
	for _, opt := range opts {
		opt(o)
	}
	return start(o)
}

// Run starts a single NATS server with JetStream in a temporary folder and
// stops it when the test ends.
func Run(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := Start(t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("cannot start NATS server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

func start(opts *server.Options) (*Server, error) {
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("cannot create NATS server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("cannot start NATS server: not ready for connections in time")
	}
	return &Server{opts: opts, srv: srv}, nil
}

// URL is the server's client URL (nats://127.0.0.1:port).
func (s *Server) URL() string { return s.srv.ClientURL() }

// Name is the server's name, as JetStream reports it for stream leaders.
func (s *Server) Name() string { return s.srv.Name() }

// NATS returns the underlying server, for tests that need to inspect it.
func (s *Server) NATS() *server.Server { return s.srv }

// Stop shuts the server down and waits until it has stopped. It is safe to
// call more than once.
func (s *Server) Stop() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}

// Restart stops the server and starts it again on the same ports with the
// same store, as after a crash.
func (s *Server) Restart() error {
	opts := s.opts.Clone()
	if a, ok := s.srv.Addr().(*net.TCPAddr); ok {
		opts.Port = a.Port
	}
	s.Stop()
	ns, err := start(opts)
	if err != nil {
		return err
	}
	*s = *ns
	return nil
}

// Cluster is a JetStream cluster of embedded servers that route to each other
// on loopback.
type Cluster struct {
	Servers []*Server
}

// StartCluster starts n servers forming one JetStream cluster, each with its
// own store folder under dir. It returns once every server accepts client
// connections; the cluster may still be electing its meta leader. The caller
// must call Stop.
func StartCluster(dir string, n int) (*Cluster, error) {
	if n < 1 {
		return nil, errors.New("cannot start a cluster of fewer than one server")
	}
	// The ports are free when picked, not when bound: a test process
	// running beside this one (go test runs packages in parallel) may take
	// one meanwhile, and the server that wanted it never becomes ready. So
	// a failed start is tried again on other ports, in a fresh folder.
	var err error
	for attempt := range clusterAttempts {
		var c *Cluster
		if c, err = startCluster(filepath.Join(dir, fmt.Sprintf("a%d", attempt)), n); err == nil {
			return c, nil
		}
	}
	return nil, err
}

// clusterAttempts is how many times StartCluster tries, each on new ports.
const clusterAttempts = 3

func startCluster(dir string, n int) (*Cluster, error) {
	clientPorts, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	routePorts, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	routes := make([]*url.URL, n)
	for i, p := range routePorts {
		routes[i] = &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)}
	}
	c := &Cluster{}
	for i := range n {
		opts := &server.Options{
			ServerName: fmt.Sprintf("loom-test-%d", i),
			Host:       "127.0.0.1",
			Port:       clientPorts[i],
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("s%d", i)),
			NoLog:      true,
			NoSigs:     true,
			Cluster: server.ClusterOpts{
				Name: "loom-test",
				Host: "127.0.0.1",
				Port: routePorts[i],
			},
			Routes: routes,
		}
		if err := os.MkdirAll(opts.StoreDir, 0o755); err != nil {
			c.Stop()
			return nil, fmt.Errorf("cannot create store folder: %w", err)
		}
		s, err := start(opts)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	return c, nil
}

// RunCluster starts a cluster of n servers in a temporary folder and stops it
// when the test ends.
func RunCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c, err := StartCluster(t.TempDir(), n)
	if err != nil {
		t.Fatalf("cannot start NATS cluster: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// URLs returns every server's client URL, comma-separated, as nats.Connect
// accepts them.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// Stop stops every server of the cluster.
func (c *Cluster) Stop() {
	for _, s := range c.Servers {
		s.Stop()
	}
}

// Connect opens a client connection to url and a JetStream context on it, and
// closes the connection when the test ends.
func Connect(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("cannot connect to NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("cannot create JetStream context: %v", err)
	}
	return nc, js
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1 a moment
// ago. Cluster routes must be known before any server starts, so the ports
// are picked up front.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cannot find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port) //nolint:forcetypeassert // A TCP listener's address is a *net.TCPAddr.
	}
	return ports, nil
}
