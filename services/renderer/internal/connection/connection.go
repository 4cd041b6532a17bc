// Package connection hands the connection details that the function
// pipeline of a Pipeline-mode composite resource (XR) returns to the
// secrets service.
//
// In Crossplane v1 a Pipeline XR's connection details are exactly what its
// functions return for it (desired.composite.connection_details). The
// renderer runs the functions but may not write Secrets, and Secret values
// must never travel on the bus, in logs, traces, events or conditions. So
// after each render the renderer calls the secrets service's
// ConnectionDetails.Publish (proto/secrets/v1) over gRPC with mutual TLS,
// with the whole set of details (empty when the functions returned none, so
// that keys that disappear upstream disappear downstream); the secrets
// service stores them and builds the XR's connection Secret from them.
//
// A Publisher sends an XR's details only when they differ from what it last
// sent for the XR (a SHA-256 digest per XR UID, in memory, never the
// values), so re-rendering an unchanged XR costs no call. After a restart
// it sends each XR's details once more; the secrets service recognises
// unchanged details and writes nothing. A failed call is an error the
// renderer retries with backoff, so an update is never lost.
package connection

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"

	"github.com/loomxr/loom/pkg/fn"
	"github.com/loomxr/loom/pkg/secretdata"
	secretsv1 "github.com/loomxr/loom/proto/secrets/v1"
)

// ErrInvalid matches details the secrets service refused as invalid (a key
// that is not a valid Secret key, too much data): sending them again fails
// the same way until the functions return something else.
var ErrInvalid = errors.New("the secrets service refused the connection details")

// A Sender sends one XR's connection details to the secrets service (see
// Client).
type Sender interface {
	Send(ctx context.Context, req *secretsv1.PublishRequest) error
}

// DefaultMemoSize bounds how many XRs a Publisher remembers; beyond it the
// least recently published XR is forgotten, and its details are sent once
// more when it is rendered again.
const DefaultMemoSize = 100_000

// A Publisher sends XRs' connection details through a Sender when they
// changed. It is safe for concurrent use; the renderer handles one XR at a
// time.
type Publisher struct {
	send Sender

	sent *lru.Cache // XR UID -> [sha256.Size]byte
}

// NewPublisher returns a Publisher that sends through s.
func NewPublisher(s Sender) *Publisher {
	return &Publisher{send: s, sent: lru.New(DefaultMemoSize)}
}

// Publish sends details, the whole set of connection details the function
// pipeline of xr returned (nil or empty for none), rendered with the given
// CompositionRevision, unless they are what it last sent for xr. force
// sends them anyway (the secrets service asked, for example because the
// XR's stored details were deleted). It blocks until the secrets service
// stored them, and returns the Sender's error otherwise; details that
// failed are sent again next time.
func (p *Publisher) Publish(ctx context.Context, xr *unstructured.Unstructured, revision string, details map[string][]byte, force bool) error {
	uid := xr.GetUID()
	digest := secretdata.Digest(details)
	if !force && p.known(uid, digest) {
		return nil
	}
	req := &secretsv1.PublishRequest{
		Composite:           &secretsv1.CompositeRef{ApiVersion: xr.GetAPIVersion(), Kind: xr.GetKind(), Name: xr.GetName(), Uid: string(uid)},
		ConnectionDetails:   details,
		CompositionRevision: revision,
	}
	if err := p.send.Send(ctx, req); err != nil {
		p.Forget(uid)
		return err
	}
	p.remember(uid, digest)
	return nil
}

// Forget drops what the Publisher remembers of an XR (it is gone).
func (p *Publisher) Forget(uid types.UID) { p.sent.Remove(uid) }

func (p *Publisher) known(uid types.UID, digest [sha256.Size]byte) bool {
	d, ok := p.sent.Get(uid)
	return ok && d == digest
}

func (p *Publisher) remember(uid types.UID, digest [sha256.Size]byte) { p.sent.Add(uid, digest) }

// Config says how to reach the secrets service.
type Config struct {
	// Endpoints are the addresses (host:port) of the secrets service's
	// gRPC endpoint. One name (a Kubernetes Service) is resolved through
	// DNS; several addresses (replicas the client should spread over) are
	// used round robin, skipping those that are down.
	Endpoints []string
	// ServerName is the name the server certificate must hold. Default:
	// the host of the first endpoint.
	ServerName string
	// CertFile and KeyFile are the renderer's PEM client certificate and
	// key; CAFile holds the CA certificates that sign the server's.
	CertFile, KeyFile, CAFile string
	// Timeout bounds one call (default 10s).
	Timeout time.Duration
}

// A Client calls the secrets service's ConnectionDetails endpoint. It is
// safe for concurrent use; Close releases it.
type Client struct {
	cc      *grpc.ClientConn
	api     secretsv1.ConnectionDetailsClient
	timeout time.Duration
}

var _ Sender = (*Client)(nil)

// Dial returns a Client for c. It reads the TLS material now and connects
// lazily, so the secrets service need not be up yet.
func Dial(c Config) (*Client, error) {
	if len(c.Endpoints) == 0 {
		return nil, errors.New("cannot reach the secrets service: no endpoint")
	}
	name := c.ServerName
	if name == "" {
		host, _, err := net.SplitHostPort(c.Endpoints[0])
		if err != nil {
			return nil, fmt.Errorf("cannot reach the secrets service at %q: %w", c.Endpoints[0], err)
		}
		name = host
	}
	m := &fn.TLSMaterial{ServerName: name}
	for _, f := range []struct {
		path string
		into *[]byte
	}{{c.CAFile, &m.CA}, {c.CertFile, &m.Cert}, {c.KeyFile, &m.Key}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("cannot read the TLS material for the secrets service: %w", err)
		}
		*f.into = b
	}
	tc, err := m.Config()
	if err != nil {
		return nil, fmt.Errorf("cannot use the TLS material for the secrets service: %w", err)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"round_robin": {}}]}`),
	}
	target := "dns:///" + c.Endpoints[0]
	if len(c.Endpoints) > 1 {
		r := manual.NewBuilderWithScheme("loom-secrets")
		addrs := make([]resolver.Address, len(c.Endpoints))
		for i, e := range c.Endpoints {
			addrs[i] = resolver.Address{Addr: e}
		}
		r.InitialState(resolver.State{Addresses: addrs})
		opts = append(opts, grpc.WithResolvers(r))
		target = r.Scheme() + ":///secrets"
	}
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the secrets service: %w", err)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &Client{cc: cc, api: secretsv1.NewConnectionDetailsClient(cc), timeout: timeout}, nil
}

// Send calls Publish. Errors wrap ErrInvalid when the secrets service
// refused the details as invalid; any other error is worth retrying.
func (c *Client) Send(ctx context.Context, req *secretsv1.PublishRequest) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	_, err := c.api.Publish(ctx, req)
	if err == nil {
		return nil
	}
	if status.Code(err) == codes.InvalidArgument {
		return fmt.Errorf("%w: %s", ErrInvalid, status.Convert(err).Message())
	}
	return fmt.Errorf("cannot hand the connection details to the secrets service: %w", err)
}

// Close closes the connection.
func (c *Client) Close() error { return c.cc.Close() }
