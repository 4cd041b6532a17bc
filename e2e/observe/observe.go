//go:build e2e

package observe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/loomxr/loom/pkg/stack"
)

// Versions of the servers the Makefile builds into .cache/tools (pinned in
// tools/prometheus/go.mod and tools/jaeger/go.mod).
const (
	PrometheusVersion = "v0.316.0"
	JaegerVersion     = "v1.76.0"
)

// loomServices are the services Prometheus scrapes and whose spans a claim's
// trace must hold.
var loomServices = []string{"watcher", "binder", "renderer", "secrets"}

// ErrNoServers is returned (wrapped) by Start when the Prometheus or Jaeger
// binary is missing: `make observe-tools` builds them.
var ErrNoServers = errors.New("run `make observe-tools` to build Prometheus and Jaeger")

// Config configures Start.
type Config struct {
	// RepoRoot is the Loom checkout; default: found from the working
	// directory.
	RepoRoot string
	// StateDir holds the stack's state (pkg/stack) and, under observe/,
	// Prometheus's and Jaeger's configuration, data and logs. Default:
	// <RepoRoot>/.loom.
	StateDir string
	// PrometheusBin and JaegerBin are the servers' binaries. Default:
	// $LOOM_PROMETHEUS and $LOOM_JAEGER, else
	// <RepoRoot>/.cache/tools/{prometheus,jaeger}-<version>.
	PrometheusBin, JaegerBin string
	// ScrapeInterval is Prometheus's scrape interval. Default 2s.
	ScrapeInterval time.Duration
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// StackLog receives the stack's progress lines; nil discards them.
	StackLog io.Writer
}

func (c Config) withDefaults() (Config, error) {
	if c.RepoRoot == "" {
		wd, err := os.Getwd()
		if err != nil {
			return c, err
		}
		if c.RepoRoot, err = stack.FindRepoRoot(wd); err != nil {
			return c, err
		}
	}
	if c.StateDir == "" {
		c.StateDir = filepath.Join(c.RepoRoot, ".loom")
	}
	tools := filepath.Join(c.RepoRoot, ".cache", "tools")
	if c.PrometheusBin == "" {
		c.PrometheusBin = os.Getenv("LOOM_PROMETHEUS")
	}
	if c.PrometheusBin == "" {
		c.PrometheusBin = filepath.Join(tools, "prometheus-"+PrometheusVersion)
	}
	if c.JaegerBin == "" {
		c.JaegerBin = os.Getenv("LOOM_JAEGER")
	}
	if c.JaegerBin == "" {
		c.JaegerBin = filepath.Join(tools, "jaeger-"+JaegerVersion)
	}
	for _, b := range []string{c.PrometheusBin, c.JaegerBin} {
		if _, err := os.Stat(b); err != nil {
			return c, fmt.Errorf("cannot find %s: %w (%w)", b, ErrNoServers, err)
		}
	}
	if c.ScrapeInterval <= 0 {
		c.ScrapeInterval = 2 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c, nil
}

// Session is a running stack with Prometheus and Jaeger watching it.
type Session struct {
	cfg      Config
	Stack    *stack.Stack
	dyn      dynamic.Interface
	jaeger   *proc
	prom     *proc
	exporter *natsExporter
	fn       *fatalFunction

	// PrometheusURL and JaegerURL are the base URLs of the servers' HTTP
	// APIs (and UIs, where their assets are built in).
	PrometheusURL, JaegerURL string
	// Started is when the stack was up.
	Started time.Time
}

// Start starts Jaeger, the stack (its services exporting traces to Jaeger,
// NATS's monitoring endpoint on), the NATS exporter, the fatal function and
// Prometheus scraping the services, the exporter and kube-apiserver. On
// error it stops what it started.
func Start(ctx context.Context, cfg Config) (s *Session, err error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.StateDir, "observe")
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("cannot clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", dir, err)
	}
	s = &Session{cfg: c}
	defer func() {
		if err != nil {
			_ = s.Stop(context.Background())
			s = nil
		}
	}()
	logf := func(format string, args ...any) { fmt.Fprintf(c.Log, format+"\n", args...) }

	t0 := time.Now()
	var otlp string
	if s.jaeger, otlp, s.JaegerURL, err = startJaeger(ctx, c.JaegerBin, dir); err != nil {
		return s, err
	}
	logf("jaeger %s ready in %s: OTLP on %s, API on %s", JaegerVersion, time.Since(t0).Round(time.Millisecond), otlp, s.JaegerURL)

	st, err := stack.Start(ctx, stack.Options{
		RepoRoot:       c.RepoRoot,
		StateDir:       c.StateDir,
		Log:            c.StackLog,
		NATSMonitoring: true,
		Env: []string{
			"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + otlp,
			"OTEL_BSP_SCHEDULE_DELAY=500",
		},
	})
	if err != nil {
		return s, fmt.Errorf("cannot start the stack: %w", err)
	}
	s.Stack = st
	s.Started = time.Now()
	if s.dyn, err = dynamic.NewForConfig(st.RESTConfig()); err != nil {
		return s, err
	}
	if s.exporter, err = startNATSExporter(st.NATSMonitorURLs()); err != nil {
		return s, err
	}
	if s.fn, err = startFatalFunction(); err != nil {
		return s, err
	}

	jobs, err := s.scrapeJobs(dir)
	if err != nil {
		return s, err
	}
	t0 = time.Now()
	if s.prom, s.PrometheusURL, err = startPrometheus(ctx, c.PrometheusBin, dir, c.ScrapeInterval, jobs); err != nil {
		return s, err
	}
	logf("prometheus %s ready in %s on %s, scraping every %s", PrometheusVersion, time.Since(t0).Round(time.Millisecond), s.PrometheusURL, c.ScrapeInterval)
	return s, s.waitTargetsUp(ctx)
}

// scrapeJobs are Prometheus's jobs: one per Loom service (job = service
// name), nats (the exporter) and apiserver (kube-apiserver's /metrics with
// the admin's client certificate), as kube-prometheus-stack names it.
func (s *Session) scrapeJobs(dir string) ([]scrapeJob, error) {
	var jobs []scrapeJob
	for _, svc := range loomServices {
		var targets []string
		for i := 0; ; i++ {
			a := s.Stack.ServiceHealthAddr(svc, i)
			if a == "" {
				break
			}
			targets = append(targets, a)
		}
		jobs = append(jobs, scrapeJob{JobName: svc, ScrapeProtocols: openMetricsFirst, StaticConfigs: []staticConfig{{Targets: targets}}})
	}
	jobs = append(jobs, scrapeJob{JobName: "nats", StaticConfigs: []staticConfig{{Targets: []string{s.exporter.addr}}}})

	rc := s.Stack.RESTConfig()
	tc := &tlsConfig{CAFile: rc.CAFile, CertFile: rc.CertFile, KeyFile: rc.KeyFile}
	for _, f := range []struct {
		data []byte
		path *string
		name string
	}{{rc.CAData, &tc.CAFile, "ca.crt"}, {rc.CertData, &tc.CertFile, "admin.crt"}, {rc.KeyData, &tc.KeyFile, "admin.key"}} {
		if len(f.data) == 0 {
			continue
		}
		*f.path = filepath.Join(dir, f.name)
		if err := os.WriteFile(*f.path, f.data, 0o600); err != nil {
			return nil, fmt.Errorf("cannot write %s: %w", *f.path, err)
		}
	}
	host := strings.TrimPrefix(strings.TrimPrefix(rc.Host, "https://"), "http://")
	jobs = append(jobs, scrapeJob{JobName: "apiserver", Scheme: "https", TLSConfig: tc, StaticConfigs: []staticConfig{{Targets: []string{host}}}})
	return jobs, nil
}

// waitTargetsUp polls until every scrape target is up.
func (s *Session) waitTargetsUp(ctx context.Context) error {
	pc := promClient{s.PrometheusURL}
	var last map[string]string
	err := poll(ctx, 2*time.Minute, time.Second, func() error {
		t, err := pc.targetsUp(ctx)
		if err != nil {
			return err
		}
		last = t
		for k, h := range t {
			if h != "up" {
				return fmt.Errorf("target %s is %s", k, h)
			}
		}
		if len(t) < len(loomServices)+2 {
			return fmt.Errorf("only %d targets", len(t))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("prometheus's targets are not all up: %w (%v)", err, last)
	}
	return nil
}

// Stop stops Prometheus, the stack, Jaeger and the rest, in that order.
func (s *Session) Stop(ctx context.Context) error {
	var errs []error
	s.prom.stop(10 * time.Second)
	s.exporter.stop()
	if s.Stack != nil {
		errs = append(errs, s.Stack.Stop(ctx))
	}
	s.fn.stop()
	s.jaeger.stop(10 * time.Second)
	return errors.Join(errs...)
}

// poll calls f every interval until it returns nil, timeout passes or ctx
// ends; it returns f's last error then.
func poll(ctx context.Context, timeout, interval time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(interval):
		}
	}
}
