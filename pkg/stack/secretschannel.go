package stack

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Identities on the secrets service's gRPC endpoint: its server
// certificate's name, and the renderer's client certificate's, the only
// client the secrets service allows.
const (
	secretsServerName = "loom-secrets"
	rendererIdentity  = "loom-renderer"
)

// secretsChannel is the gRPC endpoint on which the renderer hands the
// secrets service the connection details that the functions of Pipeline
// XRs return, as the stack runs it: mutual TLS with certificates issued by
// the stack's CA (the control plane's, or a CA of its own on an existing
// cluster) and a loopback port per secrets replica. Nothing when the stack
// runs no secrets service.
type secretsChannel struct {
	addrs                            []string // by secrets replica
	ca, serverCert, serverKey        string   // files
	clientCert, clientKey, namespace string
}

// prepareSecretsChannel issues the certificates, writes them to the pki
// folder and picks the ports. Call it before starting any service.
func (s *Stack) prepareSecretsChannel() (*secretsChannel, error) {
	n := 0
	if slices.Contains(s.opts.Services, "secrets") {
		n = s.opts.replicas("secrets")
	}
	if n == 0 {
		return &secretsChannel{}, nil
	}
	s.mu.Lock()
	cp := s.cp
	s.mu.Unlock()
	var ca *keyPair
	if cp != nil {
		ca = cp.ca
	} else {
		var err error
		if ca, err = newCA("loom-local-ca"); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(s.opts.StateDir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", dir, err)
	}
	c := &secretsChannel{ca: filepath.Join(dir, "secrets-grpc-ca.crt"), namespace: Namespace}
	if err := os.WriteFile(c.ca, ca.CertPEM, 0o600); err != nil {
		return nil, fmt.Errorf("cannot write %s: %w", c.ca, err)
	}
	server, err := ca.issue(certRequest{CommonName: secretsServerName, DNSNames: []string{secretsServerName, "localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true})
	if err != nil {
		return nil, err
	}
	if c.serverCert, c.serverKey, err = server.write(dir, "secrets-grpc-server"); err != nil {
		return nil, err
	}
	client, err := ca.issue(certRequest{CommonName: rendererIdentity, DNSNames: []string{rendererIdentity}, Client: true})
	if err != nil {
		return nil, err
	}
	if c.clientCert, c.clientKey, err = client.write(dir, "secrets-grpc-renderer"); err != nil {
		return nil, err
	}
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	for _, p := range ports {
		c.addrs = append(c.addrs, hostPort(p))
	}
	return c, nil
}

// env is the environment that configures the channel for a replica of
// service (the services' flags fall back to it); nil for other services.
// The renderer reaches every secrets replica, round robin.
func (c *secretsChannel) env(service string, replica int) []string {
	if len(c.addrs) == 0 {
		return nil
	}
	switch service {
	case "secrets":
		return []string{
			"LOOM_SECRETS_GRPC_ADDR=" + c.addrs[replica],
			"LOOM_SECRETS_GRPC_TLS_CERT_FILE=" + c.serverCert,
			"LOOM_SECRETS_GRPC_TLS_KEY_FILE=" + c.serverKey,
			"LOOM_SECRETS_GRPC_CLIENT_CA_FILE=" + c.ca,
			"LOOM_SECRETS_GRPC_CLIENT_IDENTITY=" + rendererIdentity,
			"LOOM_SECRETS_NAMESPACE=" + c.namespace,
		}
	case "renderer":
		return []string{
			"LOOM_RENDERER_SECRETS_ENDPOINT=" + strings.Join(c.addrs, ","),
			"LOOM_RENDERER_SECRETS_SERVER_NAME=" + secretsServerName,
			"LOOM_RENDERER_SECRETS_TLS_CERT_FILE=" + c.clientCert,
			"LOOM_RENDERER_SECRETS_TLS_KEY_FILE=" + c.clientKey,
			"LOOM_RENDERER_SECRETS_CA_FILE=" + c.ca,
		}
	}
	return nil
}
