package stack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// controlPlane is the etcd, kube-apiserver and kube-controller-manager the
// stack started, with what it takes to restart kube-apiserver.
type controlPlane struct {
	ca       *keyPair
	admin    *keyPair
	etcd     *process
	etcdURL  string
	apiSpec  procSpec
	api      *process
	apiURL   string
	kcm      *process
	kcmURL   string
	pkiDir   string
	adminKC  string
	httpsCli *http.Client
}

// startControlPlane generates the PKI, starts etcd, kube-apiserver and
// kube-controller-manager, and writes the admin kubeconfig. Each process is
// recorded on s as soon as it runs, so Stop can end it if a later step
// fails.
func (s *Stack) startControlPlane(ctx context.Context) error {
	cp := &controlPlane{pkiDir: filepath.Join(s.opts.StateDir, "pki")}
	s.cp = cp
	if err := os.MkdirAll(cp.pkiDir, 0o700); err != nil {
		return fmt.Errorf("cannot create %s: %w", cp.pkiDir, err)
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(s.opts.K8sBinDir, b)); err != nil {
			return fmt.Errorf("cannot find %s in %s (run `make control-plane`): %w", b, s.opts.K8sBinDir, err)
		}
	}

	// PKI: one CA signs the serving certificates and the client
	// certificates; kube-apiserver trusts it for client authentication.
	var err error
	if cp.ca, err = newCA("loom-local-ca"); err != nil {
		return err
	}
	caPath, _, err := cp.ca.write(cp.pkiDir, "ca")
	if err != nil {
		return err
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	apiServing, err := cp.ca.issue(certRequest{
		CommonName: "kube-apiserver",
		DNSNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPs:        append(loopback, net.ParseIP("10.0.0.1")),
		Server:     true,
	})
	if err != nil {
		return err
	}
	apiCert, apiKey, err := apiServing.write(cp.pkiDir, "kube-apiserver")
	if err != nil {
		return err
	}
	kcmServing, err := cp.ca.issue(certRequest{CommonName: "kube-controller-manager", DNSNames: []string{"localhost"}, IPs: loopback, Server: true})
	if err != nil {
		return err
	}
	kcmCert, kcmKey, err := kcmServing.write(cp.pkiDir, "kube-controller-manager-serving")
	if err != nil {
		return err
	}
	if cp.admin, err = cp.ca.issue(certRequest{CommonName: "loom-admin", Organization: []string{"system:masters"}, Client: true}); err != nil {
		return err
	}
	kcmClient, err := cp.ca.issue(certRequest{CommonName: "system:kube-controller-manager", Client: true})
	if err != nil {
		return err
	}
	saKey, saPub, err := newServiceAccountKey()
	if err != nil {
		return err
	}
	saKeyPath, saPubPath := filepath.Join(cp.pkiDir, "sa.key"), filepath.Join(cp.pkiDir, "sa.pub")
	if err := os.WriteFile(saKeyPath, saKey, 0o600); err != nil {
		return fmt.Errorf("cannot write %s: %w", saKeyPath, err)
	}
	if err := os.WriteFile(saPubPath, saPub, 0o600); err != nil {
		return fmt.Errorf("cannot write %s: %w", saPubPath, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cp.ca.cert)
	cp.httpsCli = &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}

	// etcd: single member on loopback. fsync is off: the stack is
	// disposable and the API server's write rate is what we measure.
	var etcdPort int
	_, err = s.startOnFreePorts(ctx, 2, func(ports []int) (*process, error) {
		etcdPort = ports[0]
		cp.etcdURL = "http://" + hostPort(ports[0])
		peerURL := "http://" + hostPort(ports[1])
		p, err := s.run(procSpec{
			Name: "etcd",
			Path: filepath.Join(s.opts.K8sBinDir, "etcd"),
			Args: []string{
				"--name=loom",
				"--data-dir=" + filepath.Join(s.opts.StateDir, "etcd"),
				"--listen-client-urls=" + cp.etcdURL,
				"--advertise-client-urls=" + cp.etcdURL,
				"--listen-peer-urls=" + peerURL,
				"--initial-advertise-peer-urls=" + peerURL,
				"--initial-cluster=loom=" + peerURL,
				"--listen-metrics-urls=",
				"--unsafe-no-fsync=true",
				"--quota-backend-bytes=8589934592",
				"--log-level=warn",
			},
		})
		s.setProcess(&cp.etcd, p)
		return p, err
	}, func(ctx context.Context, p *process) error {
		return s.waitFor(ctx, "etcd", p, func(ctx context.Context) error {
			return httpOK(ctx, http.DefaultClient, cp.etcdURL+"/health")
		})
	})
	if err != nil {
		return err
	}
	s.logf("etcd ready on %s", hostPort(etcdPort))

	// kube-apiserver: RBAC, client certificates from our CA, and
	// ServiceAccount token signing so TokenRequest works.
	var apiPort int
	_, err = s.startOnFreePorts(ctx, 1, func(ports []int) (*process, error) {
		apiPort = ports[0]
		cp.apiURL = "https://" + hostPort(apiPort)
		cp.apiSpec = procSpec{
			Name: "kube-apiserver",
			Path: filepath.Join(s.opts.K8sBinDir, "kube-apiserver"),
			Args: []string{
				"--etcd-servers=" + cp.etcdURL,
				"--bind-address=127.0.0.1",
				"--advertise-address=127.0.0.1",
				fmt.Sprintf("--secure-port=%d", apiPort),
				"--tls-cert-file=" + apiCert,
				"--tls-private-key-file=" + apiKey,
				"--client-ca-file=" + caPath,
				"--authorization-mode=RBAC",
				"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
				"--service-account-key-file=" + saPubPath,
				"--service-account-signing-key-file=" + saKeyPath,
				"--service-cluster-ip-range=10.0.0.0/24",
				// The loopback advertise address may not appear in
				// Endpoints, and nothing in the stack needs the kubernetes
				// Service's.
				"--endpoint-reconciler-type=none",
				// Without it a graceful stop waits for every open watch.
				"--shutdown-watch-termination-grace-period=2s",
				"--profiling=false",
			},
		}
		cp.apiSpec.Args = append(cp.apiSpec.Args, s.opts.APIServerArgs...)
		p, err := s.run(cp.apiSpec)
		s.setProcess(&cp.api, p)
		return p, err
	}, func(ctx context.Context, _ *process) error {
		return s.waitAPIServer(ctx)
	})
	if err != nil {
		return err
	}
	s.logf("kube-apiserver ready on %s", hostPort(apiPort))

	cp.adminKC = filepath.Join(s.opts.StateDir, "kubeconfig")
	if err := writeKubeconfig(cp.adminKC, cp.apiURL, cp.ca.CertPEM, credentials{CertPEM: cp.admin.CertPEM, KeyPEM: cp.admin.KeyPEM}); err != nil {
		return err
	}
	kcmKC := filepath.Join(cp.pkiDir, "kube-controller-manager.kubeconfig")
	if err := writeKubeconfig(kcmKC, cp.apiURL, cp.ca.CertPEM, credentials{CertPEM: kcmClient.CertPEM, KeyPEM: kcmClient.KeyPEM}); err != nil {
		return err
	}

	// kube-controller-manager: the controllers a cluster without nodes
	// needs, and ClusterRole aggregation, which the services' roles use.
	// Each controller uses its own ServiceAccount, as upstream does.
	var kcmPort int
	_, err = s.startOnFreePorts(ctx, 1, func(ports []int) (*process, error) {
		kcmPort = ports[0]
		cp.kcmURL = "https://" + hostPort(kcmPort)
		p, err := s.run(procSpec{
			Name: "kube-controller-manager",
			Path: filepath.Join(s.opts.K8sBinDir, "kube-controller-manager"),
			Args: []string{
				"--kubeconfig=" + kcmKC,
				"--authentication-kubeconfig=" + kcmKC,
				"--authorization-kubeconfig=" + kcmKC,
				"--bind-address=127.0.0.1",
				fmt.Sprintf("--secure-port=%d", kcmPort),
				"--tls-cert-file=" + kcmCert,
				"--tls-private-key-file=" + kcmKey,
				"--leader-elect=false",
				"--controllers=garbagecollector,namespace,serviceaccount,clusterrole-aggregation",
				"--use-service-account-credentials=true",
				"--root-ca-file=" + caPath,
				"--profiling=false",
			},
		})
		s.setProcess(&cp.kcm, p)
		return p, err
	}, func(ctx context.Context, p *process) error {
		return s.waitFor(ctx, "kube-controller-manager", p, func(ctx context.Context) error {
			return httpOK(ctx, cp.httpsCli, cp.kcmURL+"/healthz")
		})
	})
	if err != nil {
		return err
	}
	s.logf("kube-controller-manager ready on %s", hostPort(kcmPort))
	return nil
}

// adminRESTConfig returns a rest.Config with the admin client certificate.
func (cp *controlPlane) adminRESTConfig() *rest.Config {
	return &rest.Config{
		Host: cp.apiURL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   cp.ca.CertPEM,
			CertData: cp.admin.CertPEM,
			KeyData:  cp.admin.KeyPEM,
		},
	}
}

// waitAPIServer waits until kube-apiserver reports ready, which includes
// its post-start hooks (RBAC bootstrap roles, priority classes, ...).
func (s *Stack) waitAPIServer(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(s.cp.adminRESTConfig())
	if err != nil {
		return fmt.Errorf("cannot create client: %w", err)
	}
	return s.waitFor(ctx, "kube-apiserver", s.cp.api, func(ctx context.Context) error {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	})
}

// RestartAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after the
// grace period) and starts it again on the same port, returning once it
// is ready. Clients see connection errors in between, as in an API server
// roll-out. It fails for a stack that runs against an existing cluster.
func (s *Stack) RestartAPIServer(ctx context.Context) error {
	if s.cp == nil || s.cp.api == nil {
		return errors.New("cannot restart kube-apiserver: the stack did not start one")
	}
	s.cp.api.stop(s.grace(ctx))
	s.logf("kube-apiserver stopped; restarting")
	api, err := s.run(s.cp.apiSpec)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cp.api = api
	s.mu.Unlock()
	if err := s.waitAPIServer(ctx); err != nil {
		return err
	}
	s.logf("kube-apiserver ready again")
	return nil
}

// listenAttempts is how many times a component is started on fresh ports
// when another process took one of them between picking and binding.
const listenAttempts = 3

// startOnFreePorts picks n free ports, starts a process on them with start
// and waits with ready. If the process failed because a port was taken
// meanwhile, it tries again on other ports.
func (s *Stack) startOnFreePorts(ctx context.Context, n int, start func(ports []int) (*process, error), ready func(context.Context, *process) error) (*process, error) {
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(n)
		if err != nil {
			return nil, err
		}
		p, err := start(ports)
		if err != nil {
			return nil, err
		}
		err = ready(ctx, p)
		if err == nil {
			return p, nil
		}
		if attempt == listenAttempts || p.running() || !strings.Contains(p.tail(30), "address already in use") {
			return p, err
		}
		p.stop(s.opts.GracePeriod)
		s.logf("%s: a port was taken meanwhile; retrying on other ports", p.spec.Name)
	}
}

// setProcess records p in *field under the stack's lock, so Stop sees
// every process as soon as it runs.
func (s *Stack) setProcess(field **process, p *process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*field = p
}

// httpOK returns nil if GET url answers 200.
func httpOK(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return nil
}
