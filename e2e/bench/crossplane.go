//go:build e2e

package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/loomxr/loom/pkg/stack"
)

// Crossplane core's identity on the Crossplane side: a ServiceAccount in
// crossplane-system, as its Helm chart installs it.
const (
	crossplaneSA = "crossplane"
	// ClientCrossplane names Crossplane core in the figures.
	ClientCrossplane = "crossplane"
)

// crossplaneProcess is a running `crossplane core start`.
type crossplaneProcess struct {
	cmd  *exec.Cmd
	done chan error
	log  *os.File
}

// startCrossplane starts upstream Crossplane core against s: as the
// ServiceAccount crossplane-system/crossplane (bound to cluster-admin; the
// Helm chart's role is as broad on the kinds involved), webhooks off, a
// throwaway client certificate directory (it loads one at start for
// composition functions, which the workload does not use), a throwaway
// package cache, free ports for metrics and health; every other flag at its
// default. It is this process's child, so the process monitor measures it.
func startCrossplane(ctx context.Context, s *stack.Stack, kube kubernetes.Interface, dir, stateDir string, logf func(string, ...any)) (*crossplaneProcess, error) {
	xdir := filepath.Join(stateDir, "crossplane")
	certs := filepath.Join(xdir, "tls-client")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", certs, err)
	}
	if err := writeClientCerts(certs); err != nil {
		return nil, err
	}
	kc := filepath.Join(xdir, "kubeconfig")
	if err := writeCrossplaneKubeconfig(ctx, s, kube, kc); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(stateDir, "logs", "crossplane.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", filepath.Dir(logPath), err)
	}
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", logPath, err)
	}
	cmd := exec.Command(filepath.Join(dir, "crossplane"), "core", "start",
		"--enable-webhooks=false",
		"--tls-client-certs-dir="+certs,
		"--xpkg-cache-dir="+filepath.Join(xdir, "xpkg"),
		"--xfn-cache-dir="+filepath.Join(xdir, "xfn"),
		"--metrics-port="+strconv.Itoa(ports[0]),
		"--health-probe-port="+strconv.Itoa(ports[1]),
		"--webhook-port="+strconv.Itoa(ports[2]),
	)
	cmd.Env = []string{"KUBECONFIG=" + kc, "HOME=" + xdir, "PATH=" + os.Getenv("PATH")}
	cmd.Stdout, cmd.Stderr = lf, lf
	// Never outlive the benchmark.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = lf.Close()
		return nil, fmt.Errorf("cannot start crossplane: %w", err)
	}
	p := &crossplaneProcess{cmd: cmd, done: make(chan error, 1), log: lf}
	go func() { p.done <- cmd.Wait() }()
	start := time.Now()
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1])
	if err := p.waitReady(ctx, ready, 2*time.Minute); err != nil {
		_ = p.stop()
		return nil, fmt.Errorf("crossplane did not become ready (see %s): %w", logPath, err)
	}
	logf("crossplane core ready (pid %d, %s)", cmd.Process.Pid, time.Since(start).Round(100*time.Millisecond))
	return p, nil
}

// waitReady polls url until it answers 200, the process exits, or timeout
// passes.
func (p *crossplaneProcess) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("crossplane exited: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("not ready within %s: %v", timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		last = fmt.Errorf("%s: %s", url, resp.Status)
	}
}

// stop ends Crossplane: SIGTERM, then SIGKILL after ten seconds.
func (p *crossplaneProcess) stop() error {
	defer p.log.Close()
	select {
	case err := <-p.done:
		return fmt.Errorf("crossplane exited during the run: %v", err)
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done: //nolint:errcheck // Stopped on purpose: its exit status says nothing.
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done //nolint:errcheck // As above.
	}
	return nil
}

// writeCrossplaneKubeconfig creates Crossplane's ServiceAccount, binds it
// to cluster-admin, and writes a kubeconfig with a token of it.
func writeCrossplaneKubeconfig(ctx context.Context, s *stack.Stack, kube kubernetes.Interface, path string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: crossplaneSA, Namespace: stack.CrossplaneNamespace}}
	if _, err := kube.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !kerrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "crossplane-bench"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !kerrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot bind Crossplane to cluster-admin: %w", err)
	}
	secs := int64((24 * time.Hour).Seconds())
	tr, err := kube.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("cannot request a token for ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	rc := s.RESTConfig()
	ca := rc.CAData
	if len(ca) == 0 && rc.CAFile != "" {
		if ca, err = os.ReadFile(rc.CAFile); err != nil {
			return fmt.Errorf("cannot read the cluster's CA: %w", err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: ca, InsecureSkipTLSVerify: rc.Insecure}
	cfg.AuthInfos["bench"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	cfg.CurrentContext = "bench"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("cannot write kubeconfig %s: %w", path, err)
	}
	return nil
}

// writeClientCerts writes a throwaway CA and a client certificate signed by
// it as ca.crt, tls.crt and tls.key in dir, the files Crossplane core
// loads from --tls-client-certs-dir.
func writeClientCerts(dir string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("cannot generate a key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench-crossplane-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("cannot create a CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("cannot generate a key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "crossplane"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("cannot create a client certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("cannot encode a key: %w", err)
	}
	for name, b := range map[string][]byte{
		"ca.crt":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return fmt.Errorf("cannot write %s: %w", name, err)
		}
	}
	return nil
}

// freePorts returns n ports free on 127.0.0.1 right now.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cannot find a free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
