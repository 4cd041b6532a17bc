package stack

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIssue(t *testing.T) {
	ca, err := newCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)

	cases := map[string]struct {
		reason  string
		req     certRequest
		usage   x509.ExtKeyUsage
		host    string
		wantOrg []string
	}{
		"Server": {
			reason: "A serving certificate verifies for its IP SAN with server auth.",
			req:    certRequest{CommonName: "kube-apiserver", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true},
			usage:  x509.ExtKeyUsageServerAuth,
			host:   "127.0.0.1",
		},
		"AdminClient": {
			reason:  "The admin certificate is a client certificate in group system:masters.",
			req:     certRequest{CommonName: "loom-admin", Organization: []string{"system:masters"}, Client: true},
			usage:   x509.ExtKeyUsageClientAuth,
			wantOrg: []string{"system:masters"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kp, err := ca.issue(tc.req)
			if err != nil {
				t.Fatalf("%s\nissue(...): %v", tc.reason, err)
			}
			block, _ := pem.Decode(kp.CertPEM)
			if block == nil {
				t.Fatalf("%s\nCertPEM is not PEM", tc.reason)
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.host, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Errorf("%s\nVerify(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.wantOrg, cert.Subject.Organization); diff != "" {
				t.Errorf("%s\nOrganization: -want, +got:\n%s", tc.reason, diff)
			}
			if _, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM); err != nil {
				t.Errorf("%s\nX509KeyPair(...): key does not match certificate: %v", tc.reason, err)
			}
		})
	}
}

func TestIssueNeedsCA(t *testing.T) {
	ca, err := newCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.issue(certRequest{CommonName: "leaf", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.issue(certRequest{CommonName: "grandchild"}); err == nil {
		t.Error("issue(...) with a leaf as signer: want error, got nil")
	}
}

func TestServiceAccountKey(t *testing.T) {
	priv, pub, err := newServiceAccountKey()
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := pem.Decode(priv)
	if pb == nil || pb.Type != "RSA PRIVATE KEY" {
		t.Fatalf("private key: want an RSA PRIVATE KEY PEM block, got %v", pb)
	}
	key, err := x509.ParsePKCS1PrivateKey(pb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ub, _ := pem.Decode(pub)
	if ub == nil || ub.Type != "PUBLIC KEY" {
		t.Fatalf("public key: want a PUBLIC KEY PEM block, got %v", ub)
	}
	got, err := x509.ParsePKIXPublicKey(ub.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !key.PublicKey.Equal(got) {
		t.Error("public key does not belong to the private key")
	}
}
