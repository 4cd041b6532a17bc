package fn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/loomxr/loom/pkg/testing/poll"
)

// Test function binaries, built on first use into binDir (see binaries).
var (
	binDir         string
	composeFromEnv string
	readContext    string
	sdkDescriptor  string

	buildOnce sync.Once
	buildErr  error
)

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "loom-fn-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binDir = filepath.Join(dir, "bin")
		if thePKI, err = newPKI(filepath.Join(dir, "pki")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// binaries builds the test functions once per test process. Only tests that
// run them pay for the build (fuzz workers do not).
func binaries(t *testing.T) {
	t.Helper()
	buildOnce.Do(func() {
		composeFromEnv = filepath.Join(binDir, "compose-from-env")
		readContext = filepath.Join(binDir, "read-context")
		sdkDescriptor = filepath.Join(binDir, "sdk-descriptor")
		for bin, pkg := range map[string]string{
			composeFromEnv: "./testfn/compose-from-env",
			readContext:    "./testfn/read-context",
			sdkDescriptor:  "./testfn/sdk-descriptor",
		} {
			cmd := exec.Command("go", "build", "-o", bin, pkg)
			// The test functions live in the e2e module, with the
			// function SDK; they are built, never linked into this test.
			cmd.Dir = filepath.Join("..", "..", "e2e")
			cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("cannot build %s: %w\n%s", pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

// pki is a throwaway certificate authority with one server and one client
// certificate.
type pki struct {
	caPEM                 []byte
	serverCert, serverKey []byte
	clientCert, clientKey []byte
	// otherCert and otherKey are a client certificate of another CA.
	otherCert, otherKey []byte
	// dir holds tls.crt, tls.key and ca.crt for the test functions.
	dir string
}

// thePKI is made by TestMain.
var thePKI *pki

// testPKI returns the package's PKI.
func testPKI(t *testing.T) *pki {
	t.Helper()
	return thePKI
}

// newPKI makes a PKI and writes the server's files to dir.
func newPKI(dir string) (*pki, error) {
	caKey, caCert, caPEM, err := newCA("loom-test-ca")
	if err != nil {
		return nil, err
	}
	p := &pki{caPEM: caPEM}
	srv := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "function"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if p.serverCert, p.serverKey, err = issue(srv, caCert, caKey); err != nil {
		return nil, err
	}
	cli := &x509.Certificate{Subject: pkix.Name{CommonName: "loom-renderer"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if p.clientCert, p.clientKey, err = issue(cli, caCert, caKey); err != nil {
		return nil, err
	}
	otherKey, otherCert, _, err := newCA("other-ca")
	if err != nil {
		return nil, err
	}
	if p.otherCert, p.otherKey, err = issue(cli, otherCert, otherKey); err != nil {
		return nil, err
	}
	p.dir = dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for name, b := range map[string][]byte{"tls.crt": p.serverCert, "tls.key": p.serverKey, "ca.crt": caPEM} {
		if err := os.WriteFile(filepath.Join(p.dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func newCA(cn string) (*ecdsa.PrivateKey, *x509.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return key, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

var serial int64 = 1

func issue(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial++
	tmpl.SerialNumber = big.NewInt(serial)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

// clientTLS is the material a Target uses to reach the test functions.
func (p *pki) clientTLS() *TLSMaterial {
	return &TLSMaterial{CA: p.caPEM, Cert: p.clientCert, Key: p.clientKey}
}

// serverCreds are the mutual TLS credentials of an in-test gRPC server.
func (p *pki) serverCreds(t testing.TB) credentials.TransportCredentials {
	t.Helper()
	cert, err := tls.X509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	return credentials.NewTLS(&tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	})
}

// freeAddress returns a 127.0.0.1 address no one listens on right now.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// startFunction runs a test function binary over mutual TLS on 127.0.0.1
// and returns its Target once it accepts connections. The process is killed
// when the test ends.
func startFunction(t *testing.T, bin *string) Target {
	t.Helper()
	binaries(t)
	p := testPKI(t)
	for attempt := 0; attempt < 3; attempt++ {
		addr := freeAddress(t)
		cmd := exec.Command(*bin, "--address", addr, "--tls-certs-dir", p.dir)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		err := poll.Wait(ctx, func(ctx context.Context) error {
			select {
			case <-exited:
				// Most likely someone took the port; try another.
				cancel()
				return errors.New("the function exited")
			default:
			}
			c, err := (&net.Dialer{Timeout: 100 * time.Millisecond}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return err
			}
			_ = c.Close()
			return nil
		})
		cancel()
		if err == nil {
			return Target{Endpoint: addr, TLS: p.clientTLS()}
		}
	}
	t.Fatalf("test function %s did not start", *bin)
	return Target{}
}

// serve runs an in-test gRPC server with mutual TLS on 127.0.0.1 until the
// test ends. register adds its services.
func serve(t testing.TB, register func(*grpc.Server)) Target {
	t.Helper()
	p := thePKI
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(p.serverCreds(t)))
	register(srv)
	done := make(chan struct{})
	go func() { _ = srv.Serve(l); close(done) }()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return Target{Endpoint: l.Addr().String(), TLS: p.clientTLS()}
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
