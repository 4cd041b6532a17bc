package framework

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	loomv1alpha1 "github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
)

// Test composition functions (e2e/testfn), built and served for a test.

// BuildFunction builds the test function of e2e/testfn/name and returns
// the binary's path.
func BuildFunction(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-o", bin, "github.com/loomxr/loom/e2e/testfn/"+name)
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build %s: %v\n%s", name, err, out)
	}
	return bin
}

// StartFunction builds a test function of e2e/testfn and serves it in
// plaintext on a free local port until the test ends. It returns the
// address.
func StartFunction(t testing.TB, name string) string {
	t.Helper()
	return ServeFunction(t, BuildFunction(t, name), "")
}

// ServeFunction serves the function binary bin on a free local port until
// the test ends: over mutual TLS with the material in certsDir (tls.crt,
// tls.key, ca.crt), or in plaintext when certsDir is empty (development
// mode). It returns the address.
func ServeFunction(t testing.TB, bin, certsDir string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	args := []string{"--address", addr, "--insecure"}
	if certsDir != "" {
		args = []string{"--address", addr, "--tls-certs-dir", certsDir}
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	Eventually(t, 30*time.Second, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	return addr
}

// FunctionPKI is throwaway PEM material for mutual TLS between Loom and the
// test functions: a CA, a server certificate for 127.0.0.1 and a client
// certificate, both signed by the CA.
type FunctionPKI struct {
	CA                    []byte
	ServerCert, ServerKey []byte
	ClientCert, ClientKey []byte
}

// NewFunctionPKI generates a FunctionPKI valid for an hour.
func NewFunctionPKI(t testing.TB) FunctionPKI {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "loom e2e function CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) (certPEM, keyPEM []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Minute),
			NotAfter:     now.Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  ips,
		}, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	}
	p := FunctionPKI{CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	p.ServerCert, p.ServerKey = leaf(2, "e2e-function", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.ClientCert, p.ClientKey = leaf(3, "loom-renderer", x509.ExtKeyUsageClientAuth, nil)
	return p
}

// ServerDir writes the function's side of p (tls.crt, tls.key, ca.crt) into
// a folder for --tls-certs-dir and returns it.
func (p FunctionPKI) ServerDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string][]byte{"tls.crt": p.ServerCert, "tls.key": p.ServerKey, "ca.crt": p.CA} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// CreateFunctionSecrets creates, in namespace ns, the Secrets a loom.dev
// Function's spec.tls names: caName holds ca.crt, clientName (a
// kubernetes.io/tls Secret) the client certificate. They are deleted when
// the test ends.
func CreateFunctionSecrets(t testing.TB, env *Env, ns, caName, clientName string, p FunctionPKI) {
	t.Helper()
	secrets := []*corev1.Secret{
		{
			ObjectMeta: metav1.ObjectMeta{Name: caName, Namespace: ns},
			Data:       map[string][]byte{loomv1alpha1.CACertKey: p.CA},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: clientName, Namespace: ns},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{loomv1alpha1.TLSCertKey: p.ClientCert, loomv1alpha1.TLSKeyKey: p.ClientKey},
		},
	}
	for _, s := range secrets {
		if _, err := env.Kube.CoreV1().Secrets(ns).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("cannot create Secret %s/%s: %v", ns, s.Name, err)
		}
		t.Cleanup(func() { _ = env.Kube.CoreV1().Secrets(ns).Delete(context.Background(), s.Name, metav1.DeleteOptions{}) })
	}
}
