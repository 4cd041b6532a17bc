package connection_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"

	secretsv1 "github.com/loomxr/loom/proto/secrets/v1"
	"github.com/loomxr/loom/services/renderer/internal/connection"
)

// sender records what it is asked to send and fails when told to.
type sender struct {
	sent []*secretsv1.PublishRequest
	err  error
}

func (s *sender) Send(_ context.Context, req *secretsv1.PublishRequest) error {
	s.sent = append(s.sent, proto.Clone(req).(*secretsv1.PublishRequest))
	return s.err
}

func xr(uid string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.org/v1alpha1")
	u.SetKind("XDatabase")
	u.SetName("db-" + uid)
	u.SetUID(k8stypes.UID("uid-" + uid))
	return u
}

func details(kv ...string) map[string][]byte {
	m := map[string][]byte{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = []byte(kv[i+1])
	}
	return m
}

func TestPublisher(t *testing.T) {
	type call struct {
		xr      string
		details map[string][]byte
		force   bool
		// fail makes the Sender fail this call.
		fail bool
		// forget forgets the XR before the call.
		forget bool
	}
	cases := map[string]struct {
		reason string
		calls  []call
		// sends is how many of the calls reach the Sender.
		sends int
	}{
		"Unchanged": {
			reason: "Details equal to what was last sent for the XR are not sent again.",
			calls:  []call{{xr: "a", details: details("pw", "x")}, {xr: "a", details: details("pw", "x")}},
			sends:  1,
		},
		"Changed": {
			reason: "Changed details are sent, removed keys included.",
			calls:  []call{{xr: "a", details: details("pw", "x", "user", "u")}, {xr: "a", details: details("pw", "x")}, {xr: "a", details: details("pw", "y")}},
			sends:  3,
		},
		"NoneIsSentOnce": {
			reason: "A pipeline that returns no details sends an empty set once (so keys disappear downstream); nil and empty are the same.",
			calls:  []call{{xr: "a"}, {xr: "a", details: map[string][]byte{}}},
			sends:  1,
		},
		"PerXR": {
			reason: "Each XR has its own memory.",
			calls:  []call{{xr: "a", details: details("pw", "x")}, {xr: "b", details: details("pw", "x")}},
			sends:  2,
		},
		"Forced": {
			reason: "Forced details are sent even when unchanged.",
			calls:  []call{{xr: "a", details: details("pw", "x")}, {xr: "a", details: details("pw", "x"), force: true}},
			sends:  2,
		},
		"FailedIsSentAgain": {
			reason: "Details whose sending failed are sent again next time, even unchanged: an update is never lost.",
			calls: []call{
				{xr: "a", details: details("pw", "x")},
				{xr: "a", details: details("pw", "y"), fail: true},
				{xr: "a", details: details("pw", "x")},
			},
			sends: 3,
		},
		"Forgotten": {
			reason: "A forgotten XR's details are sent again.",
			calls:  []call{{xr: "a", details: details("pw", "x")}, {xr: "a", details: details("pw", "x"), forget: true}},
			sends:  2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &sender{}
			p := connection.NewPublisher(s)
			for i, c := range tc.calls {
				s.err = nil
				if c.fail {
					s.err = errors.New("unreachable")
				}
				x := xr(c.xr)
				if c.forget {
					p.Forget(x.GetUID())
				}
				err := p.Publish(t.Context(), x, "rev-1", c.details, c.force)
				if (err != nil) != c.fail {
					t.Fatalf("\n%s\ncall %d: Publish(...): error %v, want error %t", tc.reason, i, err, c.fail)
				}
			}
			if len(s.sent) != tc.sends {
				t.Errorf("\n%s\nPublish(...) sent %d times, want %d", tc.reason, len(s.sent), tc.sends)
			}
		})
	}
}

func TestPublisherRequest(t *testing.T) {
	s := &sender{}
	p := connection.NewPublisher(s)
	if err := p.Publish(t.Context(), xr("a"), "xdatabases-1a2b3c4", details("password", "s3cr3t"), false); err != nil {
		t.Fatal(err)
	}
	want := []*secretsv1.PublishRequest{{
		Composite:           &secretsv1.CompositeRef{ApiVersion: "example.org/v1alpha1", Kind: "XDatabase", Name: "db-a", Uid: "uid-a"},
		ConnectionDetails:   details("password", "s3cr3t"),
		CompositionRevision: "xdatabases-1a2b3c4",
	}}
	if diff := cmp.Diff(want, s.sent, protocmp.Transform()); diff != "" {
		t.Errorf("Publish(...): sent -want, +got:\n%s", diff)
	}
}

// pki is throwaway PEM material: a CA, the secrets service's server
// certificate for 127.0.0.1 and the renderer's client certificate.
type pki struct {
	dir                       string
	ca, serverCert, serverKey string
	clientCert, clientKey     string
	caBytes                   []byte
}

func newPKI(t *testing.T) pki {
	t.Helper()
	p := pki{dir: t.TempDir()}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, typ string, b []byte) string {
		f := filepath.Join(p.dir, name)
		if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	leaf := func(name, cn string, usage x509.ExtKeyUsage, serial int64) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".crt", "CERTIFICATE", der), write(name+".key", "PRIVATE KEY", kder)
	}
	p.ca = write("ca.crt", "CERTIFICATE", caDER)
	p.caBytes = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	p.serverCert, p.serverKey = leaf("server", "loom-secrets", x509.ExtKeyUsageServerAuth, 2)
	p.clientCert, p.clientKey = leaf("client", "loom-renderer", x509.ExtKeyUsageClientAuth, 3)
	return p
}

// secretsService is a stand-in for the secrets service's endpoint: it
// records what it receives and answers with code.
type secretsService struct {
	secretsv1.UnimplementedConnectionDetailsServer
	mu   sync.Mutex
	got  []*secretsv1.PublishRequest
	code codes.Code
}

func (s *secretsService) Publish(ctx context.Context, req *secretsv1.PublishRequest) (*secretsv1.PublishResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, proto.Clone(req).(*secretsv1.PublishRequest))
	if s.code != codes.OK {
		return nil, status.Error(s.code, "refused")
	}
	return &secretsv1.PublishResponse{Changed: true}, nil
}

// serve serves s on 127.0.0.1 over mutual TLS until t ends and returns its
// address.
func serve(t *testing.T, p pki, s *secretsService) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caBytes)
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12,
	})))
	secretsv1.RegisterConnectionDetailsServer(g, s)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(l)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return l.Addr().String()
}

// closedAddr returns a local address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func TestClient(t *testing.T) {
	p := newPKI(t)
	req := &secretsv1.PublishRequest{
		Composite:         &secretsv1.CompositeRef{ApiVersion: "example.org/v1alpha1", Kind: "XDatabase", Name: "db", Uid: "uid-1"},
		ConnectionDetails: details("password", "s3cr3t"),
	}
	type want struct {
		err      bool
		invalid  bool
		received int
	}
	cases := map[string]struct {
		reason    string
		code      codes.Code
		endpoints func(addr string) []string
		want      want
	}{
		"Sent": {
			reason:    "The details reach the secrets service over mutual TLS.",
			endpoints: func(addr string) []string { return []string{addr} },
			want:      want{received: 1},
		},
		"OneReplicaDown": {
			reason:    "With several endpoints, one that is down is skipped.",
			endpoints: func(addr string) []string { return []string{closedAddr(t), addr} },
			want:      want{received: 1},
		},
		"Invalid": {
			reason:    "Details the secrets service refuses as invalid are ErrInvalid: retrying cannot help.",
			code:      codes.InvalidArgument,
			endpoints: func(addr string) []string { return []string{addr} },
			want:      want{err: true, invalid: true, received: 1},
		},
		"Unavailable": {
			reason:    "Any other failure is worth retrying.",
			code:      codes.Unavailable,
			endpoints: func(addr string) []string { return []string{addr} },
			want:      want{err: true, received: 1},
		},
		"Unreachable": {
			reason:    "A secrets service that is down is an error worth retrying.",
			endpoints: func(string) []string { return []string{closedAddr(t)} },
			want:      want{err: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &secretsService{code: tc.code}
			addr := serve(t, p, s)
			c, err := connection.Dial(connection.Config{
				Endpoints: tc.endpoints(addr), ServerName: "127.0.0.1",
				CertFile: p.clientCert, KeyFile: p.clientKey, CAFile: p.ca, Timeout: 5 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			err = c.Send(t.Context(), req)
			if (err != nil) != tc.want.err {
				t.Fatalf("\n%s\nSend(...): error %v, want error %t", tc.reason, err, tc.want.err)
			}
			if errors.Is(err, connection.ErrInvalid) != tc.want.invalid {
				t.Errorf("\n%s\nSend(...): error %v, want ErrInvalid %t", tc.reason, err, tc.want.invalid)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.got) != tc.want.received {
				t.Fatalf("\n%s\nthe secrets service received %d requests, want %d", tc.reason, len(s.got), tc.want.received)
			}
			if len(s.got) > 0 {
				if diff := cmp.Diff(req, s.got[0], protocmp.Transform()); diff != "" {
					t.Errorf("\n%s\nreceived -want, +got:\n%s", tc.reason, diff)
				}
			}
		})
	}
}

func TestDialErrors(t *testing.T) {
	p := newPKI(t)
	cases := map[string]struct {
		reason string
		cfg    connection.Config
	}{
		"NoEndpoint":  {reason: "An endpoint is required.", cfg: connection.Config{CertFile: p.clientCert, KeyFile: p.clientKey, CAFile: p.ca}},
		"NoCert":      {reason: "A client certificate is required.", cfg: connection.Config{Endpoints: []string{"127.0.0.1:1"}, CAFile: p.ca}},
		"NoCA":        {reason: "A CA is required.", cfg: connection.Config{Endpoints: []string{"127.0.0.1:1"}, CertFile: p.clientCert, KeyFile: p.clientKey}},
		"CAIsNotPEM":  {reason: "A CA file must hold a certificate.", cfg: connection.Config{Endpoints: []string{"127.0.0.1:1"}, CertFile: p.clientCert, KeyFile: p.clientKey, CAFile: p.clientKey}},
		"BadEndpoint": {reason: "An endpoint must be host:port.", cfg: connection.Config{Endpoints: []string{"no-port"}, CertFile: p.clientCert, KeyFile: p.clientKey, CAFile: p.ca}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := connection.Dial(tc.cfg)
			if err == nil {
				_ = c.Close()
				t.Errorf("\n%s\nDial(...): no error", tc.reason)
			}
		})
	}
}
