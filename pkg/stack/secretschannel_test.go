package stack

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSecretsChannel(t *testing.T) {
	s := &Stack{opts: Options{StateDir: t.TempDir(), Services: DefaultServices, Replicas: map[string]int{"secrets": 2}}}
	c, err := s.prepareSecretsChannel()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.addrs) != 2 || c.addrs[0] == c.addrs[1] {
		t.Fatalf("addresses %v, want one port of its own per secrets replica", c.addrs)
	}
	env := func(svc string, replica int) map[string]string {
		m := map[string]string{}
		for _, kv := range c.env(svc, replica) {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		return m
	}
	sec, ren := env("secrets", 1), env("renderer", 0)
	if sec["LOOM_SECRETS_GRPC_ADDR"] != c.addrs[1] || sec["LOOM_SECRETS_GRPC_CLIENT_IDENTITY"] != "loom-renderer" || sec["LOOM_SECRETS_NAMESPACE"] != Namespace {
		t.Errorf("secrets replica 1 environment %v: want its own address, the renderer's identity and the stack's namespace", sec)
	}
	if diff := cmp.Diff(strings.Join(c.addrs, ","), ren["LOOM_RENDERER_SECRETS_ENDPOINT"]); diff != "" {
		t.Errorf("the renderer reaches every secrets replica: -want, +got:\n%s", diff)
	}
	if got := env("binder", 0); len(got) != 0 {
		t.Errorf("the binder has no part in the channel, got %v", got)
	}

	// The certificates: the server's verifies for its name and loopback,
	// the renderer's is a client certificate for loom-renderer, both from
	// the CA the other side trusts.
	caPEM, err := os.ReadFile(ren["LOOM_RENDERER_SECRETS_CA_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("the CA file holds no certificate")
	}
	if sec["LOOM_SECRETS_GRPC_CLIENT_CA_FILE"] != ren["LOOM_RENDERER_SECRETS_CA_FILE"] {
		t.Errorf("the two sides trust different CAs")
	}
	leaf := func(certFile, keyFile string) *x509.Certificate {
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(kp.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	server := leaf(sec["LOOM_SECRETS_GRPC_TLS_CERT_FILE"], sec["LOOM_SECRETS_GRPC_TLS_KEY_FILE"])
	for _, host := range []string{ren["LOOM_RENDERER_SECRETS_SERVER_NAME"], "127.0.0.1"} {
		if _, err := server.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("server certificate for %q: %v", host, err)
		}
	}
	client := leaf(ren["LOOM_RENDERER_SECRETS_TLS_CERT_FILE"], ren["LOOM_RENDERER_SECRETS_TLS_KEY_FILE"])
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil || client.Subject.CommonName != "loom-renderer" {
		t.Errorf("client certificate %q: %v; want a client certificate for loom-renderer", client.Subject.CommonName, err)
	}
}

func TestSecretsChannelWithoutSecrets(t *testing.T) {
	s := &Stack{opts: Options{StateDir: t.TempDir(), Services: []string{"watcher", "renderer"}}}
	c, err := s.prepareSecretsChannel()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.env("renderer", 0); len(got) != 0 {
		t.Errorf("a stack without the secrets service gives the renderer no endpoint, got %v", got)
	}
}
