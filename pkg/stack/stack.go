package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// Stack is a running local stack. Its methods are safe for concurrent use.
type Stack struct {
	opts  Options
	start time.Time
	sp    *spawner
	lock  *os.File

	mu       sync.Mutex
	cp       *controlPlane // nil when running against an existing cluster
	nats     *natsCluster
	natsAuth *natsAuth
	rc       *rest.Config
	adminKC  string
	services map[string][]*process // by service name, index = replica

	stopOnce sync.Once
	stopErr  error
}

// Start brings a stack up: the embedded NATS server, the control plane
// (unless opts.Kubeconfig names an existing cluster), Loom's CRDs, one
// ServiceAccount with its RBAC and kubeconfig per service, and every
// service replica as its own supervised OS process. It returns once each
// part is ready, writing progress lines to opts.Log.
//
// ctx bounds start-up only; the stack runs until Stop. If start-up fails
// or ctx ends first, Start stops whatever it started and returns an error.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Stack{opts: o, start: time.Now(), services: map[string][]*process{}}
	if err := s.prepareStateDir(); err != nil {
		return nil, err
	}
	s.sp = newSpawner()
	if err := s.up(ctx); err != nil {
		s.logf("start-up failed: %v", err)
		_ = s.Stop(context.Background())
		return nil, err
	}
	return s, nil
}

func (s *Stack) up(ctx context.Context) error {
	s.logf("state folder %s", s.opts.StateDir)
	if err := s.checkBinaries(); err != nil {
		return err
	}
	if err := s.startNATS(ctx); err != nil {
		return err
	}
	if s.opts.Kubeconfig != "" {
		rc, err := restConfigFromKubeconfig(s.opts.Kubeconfig)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.rc, s.adminKC = rc, s.opts.Kubeconfig
		s.mu.Unlock()
		s.logf("using the existing cluster at %s", rc.Host)
	} else {
		if err := s.startControlPlane(ctx); err != nil {
			return err
		}
		s.mu.Lock()
		s.rc, s.adminKC = s.cp.adminRESTConfig(), s.cp.adminKC
		s.mu.Unlock()
	}
	if err := s.install(ctx); err != nil {
		return err
	}
	if err := s.startServices(ctx); err != nil {
		return err
	}
	if err := s.writeInfo(); err != nil {
		return err
	}
	s.logf("stack ready in %s; kubeconfig: %s", since(s.start), s.AdminKubeconfig())
	return nil
}

// prepareStateDir creates the state folder, takes its lock, and removes
// what a previous stack left in it.
func (s *Stack) prepareStateDir() error {
	dir := s.opts.StateDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create state folder: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "stack.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("cannot open state folder lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("cannot use %s: %w", dir, ErrStateDirInUse)
		}
		return fmt.Errorf("cannot lock state folder: %w", err)
	}
	s.lock = f
	for _, p := range []string{"etcd", "nats", "pki", "kubeconfigs", "logs", "kubeconfig", infoFile} {
		if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
			s.unlock()
			return fmt.Errorf("cannot clear state folder: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		s.unlock()
		return fmt.Errorf("cannot create log folder: %w", err)
	}
	return nil
}

func (s *Stack) unlock() {
	if s.lock != nil {
		_ = s.lock.Close()
		s.lock = nil
	}
}

func (s *Stack) checkBinaries() error {
	var missing []string
	for _, svc := range s.opts.Services {
		if s.opts.replicas(svc) == 0 {
			continue
		}
		if _, err := os.Stat(filepath.Join(s.opts.BinDir, svc)); err != nil {
			missing = append(missing, svc)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cannot find %s in %s (run `make build`)", strings.Join(missing, ", "), s.opts.BinDir)
	}
	return nil
}

// startServices starts every replica of every service and waits until
// each answers /readyz.
func (s *Stack) startServices(ctx context.Context) error {
	type replica struct {
		name string
		p    *process
		addr string
	}
	var all []replica
	channel, err := s.prepareSecretsChannel()
	if err != nil {
		return err
	}
	admission, err := s.prepareAdmission()
	if err != nil {
		return err
	}
	for _, svc := range s.opts.Services {
		for i := range s.opts.replicas(svc) {
			port, err := freePort()
			if err != nil {
				return err
			}
			name := fmt.Sprintf("%s-%d", svc, i)
			addr := hostPort(port)
			p, err := s.run(procSpec{
				Name: name,
				Path: filepath.Join(s.opts.BinDir, svc),
				Args: []string{
					"--kubeconfig=" + s.ServiceKubeconfig(svc),
					"--nats-url=" + s.serviceNATSURL(),
					"--replica-id=" + name,
					"--health-addr=" + addr,
				},
				// The services' --bus-replicas default; the test provider
				// ignores it (it takes no such flag). Each process has its own
				// NATS user. The renderer and the secrets service get the
				// gRPC channel of connection details (secretsChannel).
				Env: slices.Concat([]string{fmt.Sprintf("LOOM_BUS_REPLICAS=%d", s.BusReplicas())}, s.natsAuth.env(svc),
					channel.env(svc, i), admission.env(svc, i), s.opts.mirrorEnv(), s.opts.Env),
				Echo:    s.opts.ServiceLog,
				Restart: true,
			})
			if err != nil {
				return err
			}
			s.mu.Lock()
			s.services[svc] = append(s.services[svc], p)
			s.mu.Unlock()
			all = append(all, replica{name: name, p: p, addr: addr})
		}
	}
	for _, r := range all {
		if err := s.waitFor(ctx, r.name, r.p, func(ctx context.Context) error {
			return httpOK(ctx, http.DefaultClient, "http://"+r.addr+"/readyz")
		}); err != nil {
			return err
		}
		s.logf("%s ready (pid %d, health %s)", r.name, r.p.pid(), r.addr)
	}
	return s.registerWebhooks(ctx, admission)
}

// run starts spec with the stack's log folder and progress output.
func (s *Stack) run(spec procSpec) (*process, error) {
	if spec.LogPath == "" {
		spec.LogPath = filepath.Join(s.opts.StateDir, "logs", spec.Name+".log")
	}
	return startProcess(s.sp, spec, s.logf)
}

// waitFor polls check until it succeeds, p stops running, ReadyTimeout
// passes, or ctx ends. Errors quote the end of p's log.
func (s *Stack) waitFor(ctx context.Context, what string, p *process, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ReadyTimeout)
	defer cancel()
	err := waitUntil(ctx, 100*time.Millisecond, func(ctx context.Context) error {
		if !p.running() {
			cancel() // no point waiting for a process that is gone
			return errExited
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return check(cctx)
	})
	if err == nil {
		return nil
	}
	if !p.running() {
		err = errExited
	}
	return fmt.Errorf("%s did not become ready: %w; last lines of %s:\n%s", what, err, p.spec.LogPath, p.tail(15))
}

var errExited = errors.New("process exited")

// Stop stops the stack: the services first, then kube-controller-manager,
// kube-apiserver, etcd, and the NATS server. Each process gets SIGTERM and,
// after the grace period (shortened to ctx's deadline), SIGKILL, to its
// whole process group. It returns once every process has exited. Calling
// Stop again returns the first call's result.
func (s *Stack) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(ctx) })
	return s.stopErr
}

func (s *Stack) stop(ctx context.Context) error {
	s.logf("stopping")
	grace := s.grace(ctx)
	s.mu.Lock()
	services := s.services
	cp := s.cp
	s.mu.Unlock()

	var wg sync.WaitGroup
	for _, reps := range services {
		for _, p := range reps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.stop(grace)
			}()
		}
	}
	wg.Wait()
	if cp != nil {
		s.mu.Lock()
		kcm, api, etcd := cp.kcm, cp.api, cp.etcd
		s.mu.Unlock()
		// kube-apiserver must go before etcd, or it spins on a dead backend.
		for _, p := range []*process{kcm, api, etcd} {
			if p != nil {
				p.stop(grace)
			}
		}
	}
	s.mu.Lock()
	if s.nats != nil {
		s.nats.stop()
	}
	s.mu.Unlock()
	if s.sp != nil {
		s.sp.close()
	}
	_ = os.Remove(filepath.Join(s.opts.StateDir, infoFile))
	s.unlock()
	s.logf("stopped")
	return nil
}

// grace returns the grace period, shortened to what is left of ctx.
func (s *Stack) grace(ctx context.Context) time.Duration {
	g := s.opts.GracePeriod
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left < g {
			g = max(left, 0)
		}
	}
	return g
}

// KillService sends SIGKILL to replica (0-based) of service. Supervision
// continues: the replica is started again after a short backoff.
func (s *Stack) KillService(service string, replica int) error {
	s.mu.Lock()
	reps := s.services[service]
	s.mu.Unlock()
	if replica < 0 || replica >= len(reps) {
		return fmt.Errorf("cannot kill %s replica %d: the stack runs %d replicas of it", service, replica, len(reps))
	}
	return reps[replica].kill()
}

// ServicePID returns the process id of a service replica, or 0 if it is not
// running at the moment (for example between a crash and its restart).
func (s *Stack) ServicePID(service string, replica int) int {
	s.mu.Lock()
	reps := s.services[service]
	s.mu.Unlock()
	if replica < 0 || replica >= len(reps) {
		return 0
	}
	return reps[replica].pid()
}

// ServiceHealthAddr returns the address (host:port) where the given replica
// of service serves /healthz, /readyz and /metrics, or "" if there is no
// such replica.
func (s *Stack) ServiceHealthAddr(service string, replica int) string {
	s.mu.Lock()
	reps := s.services[service]
	s.mu.Unlock()
	if replica < 0 || replica >= len(reps) {
		return ""
	}
	for _, a := range reps[replica].spec.Args {
		if addr, ok := strings.CutPrefix(a, "--health-addr="); ok {
			return addr
		}
	}
	return ""
}

// AdminKubeconfig returns the path of a kubeconfig with cluster-admin
// rights (a client certificate in group system:masters), or the
// Options.Kubeconfig of an existing cluster.
func (s *Stack) AdminKubeconfig() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.adminKC
}

// RESTConfig returns a copy of the admin client configuration, ready for
// client-go.
func (s *Stack) RESTConfig() *rest.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	rc := rest.CopyConfig(s.rc)
	rc.QPS, rc.Burst = 100, 200
	return rc
}

// NATSURL returns the URL of the embedded NATS server, or on a cluster the
// URLs of every server, comma-separated (as nats.Connect and the services'
// --nats-url accept them), with the user name and password of the NATS
// administrator (natsauth.AdminUser), who may do anything. It stays the same
// across restarts. The services connect as their own users
// (ServiceNATSURL).
func (s *Stack) NATSURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nats == nil {
		return ""
	}
	return withUserInfo(s.nats.url(), s.natsAuth.admin)
}

// serviceNATSURL is the NATS URL(s) without credentials, for the services'
// --nats-url; their credentials come from the environment.
func (s *Stack) serviceNATSURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nats.url()
}

// ServiceKubeconfig returns the path of the kubeconfig service runs with
// (a token of its ServiceAccount).
func (s *Stack) ServiceKubeconfig(service string) string {
	return filepath.Join(s.opts.StateDir, "kubeconfigs", ServiceAccountName(service)+".kubeconfig")
}

// StateDir returns the stack's state folder.
func (s *Stack) StateDir() string { return s.opts.StateDir }

// LogPath returns the log file of a process of the stack: "etcd",
// "kube-apiserver", "kube-controller-manager", "nats", or
// "<service>-<replica>".
func (s *Stack) LogPath(process string) string {
	return filepath.Join(s.opts.StateDir, "logs", process+".log")
}

// logf writes a progress line with the time since start.
func (s *Stack) logf(format string, args ...any) {
	echoMu.Lock()
	defer echoMu.Unlock()
	fmt.Fprintf(s.opts.Log, "[%6s] %s\n", since(s.start), fmt.Sprintf(format, args...))
}

func since(t time.Time) string {
	return time.Since(t).Round(100 * time.Millisecond).String()
}

// infoFile names the file, in the state folder, that describes a running
// stack to other programs (loomctl subcommands).
const infoFile = "stack.json"

// Info describes a running stack to programs other than the one that
// started it.
type Info struct {
	// Kubeconfig is the admin kubeconfig.
	Kubeconfig string `json:"kubeconfig"`
	// NATSURL is the URL of the NATS server, or the comma-separated URLs of
	// every server of a cluster.
	NATSURL string `json:"natsURL"`
	// PID is the process that runs the stack (and the embedded NATS server).
	PID int `json:"pid"`
	// Services maps each service to its replica count.
	Services map[string]int `json:"services"`
}

func (s *Stack) writeInfo() error {
	info := Info{Kubeconfig: s.AdminKubeconfig(), NATSURL: s.NATSURL(), PID: os.Getpid(), Services: map[string]int{}}
	names := make([]string, 0, len(s.opts.Services))
	names = append(names, s.opts.Services...)
	sort.Strings(names)
	for _, n := range names {
		info.Services[n] = s.opts.replicas(n)
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode stack info: %w", err)
	}
	p := filepath.Join(s.opts.StateDir, infoFile)
	// Readable by its owner only: the NATS URL carries the admin's password.
	if err := os.WriteFile(p+".tmp", append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("cannot write %s: %w", p, err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		return fmt.Errorf("cannot write %s: %w", p, err)
	}
	return nil
}

// ReadInfo returns the description of the stack running in stateDir, or an
// error wrapping os.ErrNotExist if none is running there (including when
// the process that ran it died without cleaning up).
func ReadInfo(stateDir string) (Info, error) {
	var info Info
	b, err := os.ReadFile(filepath.Join(stateDir, infoFile))
	if err != nil {
		return info, fmt.Errorf("cannot read stack info: %w", err)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("cannot decode stack info: %w", err)
	}
	if info.PID <= 0 || errors.Is(syscall.Kill(info.PID, 0), syscall.ESRCH) {
		return Info{}, fmt.Errorf("cannot use stack info: process %d is gone: %w", info.PID, os.ErrNotExist)
	}
	return info, nil
}
