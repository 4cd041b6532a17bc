package staging_test

import (
	"bytes"
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
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	secretsv1 "github.com/loomxr/loom/proto/secrets/v1"
	"github.com/loomxr/loom/services/secrets/internal/fake"
	"github.com/loomxr/loom/services/secrets/internal/secret"
	"github.com/loomxr/loom/services/secrets/internal/staging"
)

// ca is a throwaway certificate authority.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &ca{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate and key, as PEM.
func (c *ca) issue(t *testing.T, cn string, dns []string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// recorder records published events.
type recorder struct {
	mu     sync.Mutex
	events []*eventsv1.Event
	err    error
}

func (r *recorder) Publish(_ context.Context, service string, ev *eventsv1.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.events = append(r.events, proto.Clone(ev).(*eventsv1.Event))
	return nil
}

func (r *recorder) take() []*eventsv1.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// endpoint is a Server on 127.0.0.1 over mutual TLS, backed by a fake
// cluster.
type endpoint struct {
	addr    string
	cluster *fake.Cluster
	pub     *recorder
	ca      *ca
	dir     string
}

func serve(t *testing.T) *endpoint {
	t.Helper()
	e := &endpoint{cluster: fake.New(), pub: &recorder{}, ca: newCA(t, "test CA"), dir: t.TempDir()}
	certPEM, keyPEM := e.ca.issue(t, "loom-secrets", []string{"loom-secrets"}, x509.ExtKeyUsageServerAuth)
	write := func(name string, b []byte) string {
		p := filepath.Join(e.dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := staging.ServerTLS(write("tls.crt", certPEM), write("tls.key", keyPEM), write("ca.crt", e.ca.pem))
	if err != nil {
		t.Fatal(err)
	}
	srv := staging.NewServer(secret.New(e.cluster, staging.ReadThrough(e.cluster)), e.pub, "secrets", "loom-system", staging.WithSource("secrets/test"))
	g := staging.NewGRPCServer(srv, cfg, staging.DefaultClientIdentity)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = l.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(l)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return e
}

// client connects to the endpoint with a certificate for cn signed by
// signer.
func (e *endpoint) client(t *testing.T, signer *ca, cn string) secretsv1.ConnectionDetailsClient {
	t.Helper()
	certPEM, keyPEM := signer.issue(t, cn, nil, x509.ExtKeyUsageClientAuth)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.ca.pem)
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "loom-secrets", MinVersion: tls.VersionTLS12})
	cc, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return secretsv1.NewConnectionDetailsClient(cc)
}

const xrUID = "0b6f5b8e-8f1b-4c1e-9d3a-3f1f2f0a9c11"

func request(details map[string]string) *secretsv1.PublishRequest {
	r := &secretsv1.PublishRequest{
		Composite:           &secretsv1.CompositeRef{ApiVersion: "example.org/v1alpha1", Kind: "XDatabase", Name: "db-x7k2p", Uid: xrUID},
		CompositionRevision: "xdatabases-1a2b3c4",
		ConnectionDetails:   map[string][]byte{},
	}
	for k, v := range details {
		r.ConnectionDetails[k] = []byte(v)
	}
	return r
}

func TestPublish(t *testing.T) {
	e := serve(t)
	c := e.client(t, e.ca, staging.DefaultClientIdentity)
	ctx := t.Context()
	key := staging.Key("loom-system", xrUID)
	yes := true
	wantOwner := []metav1.OwnerReference{{APIVersion: "example.org/v1alpha1", Kind: "XDatabase", Name: "db-x7k2p", UID: xrUID, Controller: &yes}}

	type want struct {
		changed bool
		data    map[string][]byte
		calls   map[string]int
		requeue bool
	}
	// The steps run in order against one endpoint.
	steps := []struct {
		name    string
		reason  string
		details map[string]string
		want    want
	}{
		{
			name:    "First",
			reason:  "The first details of an XR create its staging Secret and requeue the XR.",
			details: map[string]string{"password": "s3cr3t", "endpoint": "db:5432"},
			want: want{changed: true, data: map[string][]byte{"password": []byte("s3cr3t"), "endpoint": []byte("db:5432")},
				calls: map[string]int{fake.CreateSecret: 1}, requeue: true},
		},
		{
			name:    "Unchanged",
			reason:  "The same details again (a restarted renderer) make one read, no write and no requeue.",
			details: map[string]string{"endpoint": "db:5432", "password": "s3cr3t"},
			want:    want{data: map[string][]byte{"password": []byte("s3cr3t"), "endpoint": []byte("db:5432")}, calls: map[string]int{fake.GetSecret: 1}},
		},
		{
			name:    "KeyRemoved",
			reason:  "The details replace what was stored: a key the functions no longer return disappears.",
			details: map[string]string{"password": "rotated"},
			want: want{changed: true, data: map[string][]byte{"password": []byte("rotated")},
				calls: map[string]int{fake.GetSecret: 1, fake.UpdateSecret: 1}, requeue: true},
		},
		{
			name:   "Empty",
			reason: "No details at all empty the staging Secret.",
			want:   want{changed: true, calls: map[string]int{fake.GetSecret: 1, fake.UpdateSecret: 1}, requeue: true},
		},
	}
	for _, s := range steps {
		e.cluster.Calls()
		rsp, err := c.Publish(ctx, request(s.details))
		if err != nil {
			t.Fatalf("%s: %s\nPublish(...): %v", s.name, s.reason, err)
		}
		if rsp.GetChanged() != s.want.changed {
			t.Errorf("%s: %s\nPublish(...): changed %t, want %t", s.name, s.reason, rsp.GetChanged(), s.want.changed)
		}
		if diff := cmp.Diff(s.want.calls, e.cluster.Calls(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: %s\nPublish(...): API requests -want, +got:\n%s", s.name, s.reason, diff)
		}
		got := e.cluster.Secret(key.Namespace, key.Name)
		if got == nil {
			t.Fatalf("%s: no staging Secret %s", s.name, key)
		}
		if diff := cmp.Diff(s.want.data, got.Data, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: %s\nstaging Secret data -want, +got:\n%s", s.name, s.reason, diff)
		}
		if diff := cmp.Diff(wantOwner, got.OwnerReferences); diff != "" {
			t.Errorf("%s: staging Secret owner references -want, +got:\n%s", s.name, diff)
		}
		if got.Type != secret.TypeConnection || got.Labels[staging.LabelComposite] != xrUID || got.Labels[secret.LabelManagedBy] != secret.ManagedBy {
			t.Errorf("%s: staging Secret type %q, labels %v; want a connection Secret labelled with the XR's UID", s.name, got.Type, got.Labels)
		}
		evs := e.pub.take()
		if !s.want.requeue {
			if len(evs) != 0 {
				t.Errorf("%s: %s\npublished %d events, want none", s.name, s.reason, len(evs))
			}
			continue
		}
		wantEv := &eventsv1.Event{
			Object: &eventsv1.ObjectRef{Version: "v1", Kind: "Secret", Namespace: key.Namespace, Name: key.Name},
			Type:   eventsv1.EventType_EVENT_TYPE_REQUEUE,
			Target: &eventsv1.ObjectRef{Group: "example.org", Version: "v1alpha1", Kind: "XDatabase", Name: "db-x7k2p", Uid: xrUID},
			Reason: "connection details returned by composition functions changed",
			Source: "secrets/test",
		}
		if len(evs) != 1 {
			t.Fatalf("%s: %s\npublished %d events, want one requeue of the XR", s.name, s.reason, len(evs))
		}
		if !proto.Equal(wantEv, evs[0]) {
			t.Errorf("%s: %s\nrequeue event:\n got %v\nwant %v", s.name, s.reason, evs[0], wantEv)
		}
		b, err := proto.Marshal(evs[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range s.details {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s: the requeue event carries a secret value", s.name)
			}
		}
	}
}

func TestPublishRefused(t *testing.T) {
	e := serve(t)
	ctx := t.Context()
	cases := map[string]struct {
		reason string
		// client connects; nil means the renderer's identity.
		client func(t *testing.T) secretsv1.ConnectionDetailsClient
		req    *secretsv1.PublishRequest
		want   codes.Code
	}{
		"WrongIdentity": {
			reason: "A certificate of the trusted CA for another identity is refused.",
			client: func(t *testing.T) secretsv1.ConnectionDetailsClient { return e.client(t, e.ca, "loom-binder") },
			req:    request(map[string]string{"password": "x"}),
			want:   codes.PermissionDenied,
		},
		"UntrustedCA": {
			reason: "A certificate of another CA, even for the right identity, fails the handshake.",
			client: func(t *testing.T) secretsv1.ConnectionDetailsClient {
				return e.client(t, newCA(t, "other CA"), staging.DefaultClientIdentity)
			},
			req:  request(map[string]string{"password": "x"}),
			want: codes.Unavailable,
		},
		"NoComposite": {
			reason: "A request that names no XR is invalid.",
			req:    &secretsv1.PublishRequest{ConnectionDetails: map[string][]byte{"k": []byte("v")}},
			want:   codes.InvalidArgument,
		},
		"BadUID": {
			reason: "A UID that cannot name a Secret is invalid.",
			req: &secretsv1.PublishRequest{Composite: &secretsv1.CompositeRef{
				ApiVersion: "example.org/v1alpha1", Kind: "XDatabase", Name: "db", Uid: "../Etc",
			}},
			want: codes.InvalidArgument,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var c secretsv1.ConnectionDetailsClient
			if tc.client != nil {
				c = tc.client(t)
			} else {
				c = e.client(t, e.ca, staging.DefaultClientIdentity)
			}
			e.cluster.Calls()
			_, err := c.Publish(ctx, tc.req)
			if got := status.Code(err); got != tc.want {
				t.Errorf("\n%s\nPublish(...): code %s (%v), want %s", tc.reason, got, err, tc.want)
			}
			if diff := cmp.Diff(map[string]int{}, e.cluster.Calls(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nPublish(...): a refused request made API requests:\n%s", tc.reason, diff)
			}
			if evs := e.pub.take(); len(evs) != 0 {
				t.Errorf("\n%s\nPublish(...): a refused request published %d events", tc.reason, len(evs))
			}
		})
	}
}

func TestPublishRequeueFails(t *testing.T) {
	e := serve(t)
	e.pub.err = errors.New("bus down")
	c := e.client(t, e.ca, staging.DefaultClientIdentity)
	rsp, err := c.Publish(t.Context(), request(map[string]string{"password": "x"}))
	if err != nil || !rsp.GetChanged() {
		t.Fatalf("Publish(...): changed %t, error %v; want the details stored although the requeue failed (the tracker's watch requeues the XR)", rsp.GetChanged(), err)
	}
}

func TestServerTLSErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCA(t, "ca")
	certPEM, keyPEM := c.issue(t, "s", nil, x509.ExtKeyUsageServerAuth)
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	_ = os.WriteFile(cert, certPEM, 0o600)
	_ = os.WriteFile(key, keyPEM, 0o600)
	cases := map[string]struct {
		reason          string
		cert, key, caFl string
	}{
		"NoCert":  {reason: "A missing certificate is an error.", cert: filepath.Join(dir, "none"), key: key, caFl: cert},
		"NoCA":    {reason: "A missing client CA is an error.", cert: cert, key: key, caFl: filepath.Join(dir, "none")},
		"JunkCA":  {reason: "A client CA file without a certificate is an error.", cert: cert, key: key, caFl: junk},
		"JunkKey": {reason: "A key that is not PEM is an error.", cert: cert, key: junk, caFl: cert},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := staging.ServerTLS(tc.cert, tc.key, tc.caFl); err == nil {
				t.Errorf("\n%s\nServerTLS(...): no error", tc.reason)
			}
		})
	}
}

// TestPublishTwoReplicas publishes one XR's details through two replicas in
// turn, the second with a cache that lags: neither takes its own last write
// for the current content.
func TestPublishTwoReplicas(t *testing.T) {
	c := fake.New()
	lagging := &frozenCache{Cache: c}
	a := staging.NewServer(secret.New(c, staging.ReadThrough(lagging)), &recorder{}, "secrets", "loom-system")
	b := staging.NewServer(secret.New(c, staging.ReadThrough(c)), &recorder{}, "secrets", "loom-system")
	ctx := t.Context()
	for i, step := range []struct {
		srv      *staging.Server
		password string
	}{{a, "x"}, {b, "y"}, {a, "x"}} {
		if i == 1 {
			lagging.freeze(staging.Key("loom-system", xrUID))
		}
		if _, err := step.srv.Publish(ctx, request(map[string]string{"password": step.password})); err != nil {
			t.Fatalf("step %d: Publish(...): %v", i, err)
		}
		key := staging.Key("loom-system", xrUID)
		if got := string(c.Secret(key.Namespace, key.Name).Data["password"]); got != step.password {
			t.Fatalf("step %d: the staging Secret holds %q, want %q: an update was lost", i, got, step.password)
		}
	}
}

// frozenCache answers, for a frozen key, what it held when frozen.
type frozenCache struct {
	secret.Cache
	mu     sync.Mutex
	frozen map[secret.Key]*metav1.PartialObjectMetadata
}

func (f *frozenCache) freeze(k secret.Key) {
	m, _ := f.Cache.Metadata(k)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen == nil {
		f.frozen = map[secret.Key]*metav1.PartialObjectMetadata{}
	}
	f.frozen[k] = m
}

func (f *frozenCache) Metadata(k secret.Key) (*metav1.PartialObjectMetadata, bool) {
	f.mu.Lock()
	m, ok := f.frozen[k]
	f.mu.Unlock()
	if ok {
		return m.DeepCopy(), m != nil
	}
	return f.Cache.Metadata(k)
}
