package stack

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long the stack's certificates live. A stack is
// disposable, so a year outlives any run.
const certValidity = 365 * 24 * time.Hour

// keyPair is a certificate and its private key, both PEM encoded.
type keyPair struct {
	CertPEM []byte
	KeyPEM  []byte

	cert *x509.Certificate
	key  crypto.Signer
}

// certRequest describes a certificate for issue to sign.
type certRequest struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Server       bool
	Client       bool
}

// newCA creates a self-signed certificate authority.
func newCA(commonName string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cannot generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("cannot sign CA certificate: %w", err)
	}
	return newKeyPair(der, key)
}

// issue signs a leaf certificate for req with the CA.
func (ca *keyPair) issue(req certRequest) (*keyPair, error) {
	if ca.cert == nil || !ca.cert.IsCA {
		return nil, errors.New("cannot issue certificate: signer is not a CA")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cannot generate key for %q: %w", req.CommonName, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: req.CommonName, Organization: req.Organization},
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPs,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if req.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if req.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("cannot sign certificate for %q: %w", req.CommonName, err)
	}
	return newKeyPair(der, key)
}

func newKeyPair(der []byte, key crypto.Signer) (*keyPair, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("cannot parse certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("cannot encode private key: %w", err)
	}
	return &keyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		cert:    cert,
		key:     key,
	}, nil
}

// write stores the pair as <dir>/<name>.crt and <dir>/<name>.key (0600) and
// returns both paths.
func (kp *keyPair) write(dir, name string) (certPath, keyPath string, err error) {
	certPath = filepath.Join(dir, name+".crt")
	keyPath = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certPath, kp.CertPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("cannot write %s: %w", certPath, err)
	}
	if err := os.WriteFile(keyPath, kp.KeyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("cannot write %s: %w", keyPath, err)
	}
	return certPath, keyPath, nil
}

// newServiceAccountKey creates the RSA key kube-apiserver signs
// ServiceAccount tokens with, and returns the private key and the public key
// as PEM.
func newServiceAccountKey() (priv, pub []byte, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot generate service account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot encode service account public key: %w", err)
	}
	priv = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pub = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	return priv, pub, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand never fails on Linux; a constant serial would still work.
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
