// Package service is the small runtime every Loom process shares: standard
// flags with environment-variable fallbacks, the Kubernetes client
// configuration, a NATS connection that reconnects forever, /healthz,
// /readyz and /metrics endpoints, telemetry (pkg/telemetry: OTLP traces when
// the OTEL_* environment asks for them, a span for every Kubernetes API
// request made within a traced context, logs carrying trace IDs), and signal
// handling with a drain period.
//
// For the services that use the bus, Runtime.Bus sets up JetStream (streams
// ensured with retries, the service's publisher, flushed by Close, its
// worker with a readiness check); KubeFlags and WorkerFlags are the
// flags every such service offers under its own environment prefix
// (--kube-qps, --kube-burst, --concurrency, and the bus's --bus-replicas,
// --bus-partitions, --fair-key, --target-budget). pkg/kube.NewClients makes
// the Kubernetes clients and pkg/event.StartRecorder the event recorder.
//
// A service's main only wires it:
//
//	func main() {
//		service.Main("renderer", func(ctx context.Context, rt *service.Runtime) error {
//			// start workers, register readiness checks ...
//			rt.Log.Info("ready")
//			<-ctx.Done()
//			return nil
//		})
//	}
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/natsauth"
	"github.com/loomxr/loom/pkg/telemetry"
)

// Config is the standard configuration of a Loom process. RegisterFlags
// binds it to command-line flags whose defaults come from environment
// variables.
type Config struct {
	// Kubeconfig is the path of a kubeconfig; empty means in-cluster
	// configuration. Flag --kubeconfig, env KUBECONFIG.
	Kubeconfig string
	// NATSURL is the NATS server (or comma-separated servers) to connect
	// to. Give every server of a cluster: the connection starts on any of
	// them and moves to another when its server goes away (the servers also
	// tell clients about their peers). Flag --nats-url, env LOOM_NATS_URL.
	NATSURL string
	// ReplicaID names this replica in logs, NATS client names and leases.
	// Flag --replica-id, env LOOM_REPLICA_ID, default the host name.
	ReplicaID string
	// HealthAddr is where /healthz, /readyz and /metrics are served; empty
	// disables them. Flag --health-addr, env LOOM_HEALTH_ADDR, default :8081.
	HealthAddr string
	// MetricsAddr is a further address serving only /metrics, for setups
	// that scrape on a port of their own; empty means none. Flag
	// --metrics-addr, env LOOM_METRICS_ADDR.
	MetricsAddr string
	// Pprof adds Go's runtime profiles (heap, CPU, goroutines) under
	// /debug/pprof/ to the health address, for diagnosing memory and CPU
	// use. Off by default: profiles reveal the process's internals, so
	// enable it only where the health address is not exposed. Flag
	// --pprof, env LOOM_PPROF.
	Pprof bool
	// LogLevel is the least severe level logged: debug, info, warn or
	// error. At debug every handled event is logged. Flag --log-level, env
	// LOOM_LOG_LEVEL, default info.
	LogLevel string
	// LogFormat is text (logfmt-style key=value) or json. Flag --log-format,
	// env LOOM_LOG_FORMAT, default text.
	LogFormat string
	// DrainPeriod is how long the service may take to finish after
	// SIGTERM before it exits anyway. Flag --drain-period, env
	// LOOM_DRAIN_PERIOD, default 10s.
	DrainPeriod time.Duration

	// NATSUser and NATSPassword authenticate to NATS by user name and
	// password (pkg/natsauth names each service's user). Flag --nats-user,
	// env LOOM_NATS_USER; the password comes from env LOOM_NATS_PASSWORD
	// only, since a flag would show it in the process list.
	NATSUser     string
	NATSPassword string
	// NATSCreds is a NATS credentials file (user JWT and NKey seed), the
	// alternative to a user name and password. Flag --nats-creds, env
	// LOOM_NATS_CREDS.
	NATSCreds string
	// NATSTLSCA is a PEM file of the CAs that sign the NATS servers'
	// certificates; setting it requires TLS. Flag --nats-tls-ca, env
	// LOOM_NATS_TLS_CA.
	NATSTLSCA string
	// NATSTLSCert and NATSTLSKey are a PEM client certificate and key for
	// mutual TLS; both or neither. Flags --nats-tls-cert, --nats-tls-key,
	// env LOOM_NATS_TLS_CERT, LOOM_NATS_TLS_KEY.
	NATSTLSCert string
	NATSTLSKey  string

	// NoNATS leaves Runtime.NATS nil: the process does not use the bus
	// (MainWithoutBus sets it). The NATS flags are still accepted, so that
	// the local stack and the chart can start every Loom process alike.
	NoNATS bool
}

// RegisterFlags binds c to fs, with defaults taken from the environment
// (lookup is os.LookupEnv in production; tests pass their own).
func (c *Config) RegisterFlags(fs *flag.FlagSet, lookup func(string) (string, bool)) {
	env := func(k, def string) string {
		if v, ok := lookup(k); ok && v != "" {
			return v
		}
		return def
	}
	host, _ := os.Hostname()
	drain := 10 * time.Second
	if d, err := time.ParseDuration(env("LOOM_DRAIN_PERIOD", "")); err == nil {
		drain = d
	}
	fs.StringVar(&c.Kubeconfig, "kubeconfig", env("KUBECONFIG", ""), "path of a kubeconfig; empty means in-cluster configuration (env KUBECONFIG)")
	fs.StringVar(&c.NATSURL, "nats-url", env("LOOM_NATS_URL", nats.DefaultURL), "NATS server URL(s), comma-separated (env LOOM_NATS_URL)")
	fs.StringVar(&c.ReplicaID, "replica-id", env("LOOM_REPLICA_ID", host), "name of this replica (env LOOM_REPLICA_ID)")
	fs.StringVar(&c.HealthAddr, "health-addr", env("LOOM_HEALTH_ADDR", ":8081"), "address of /healthz, /readyz and /metrics; empty disables them (env LOOM_HEALTH_ADDR)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", env("LOOM_METRICS_ADDR", ""), "further address serving only /metrics; empty means none (env LOOM_METRICS_ADDR)")
	fs.BoolVar(&c.Pprof, "pprof", env("LOOM_PPROF", "") == "true", "serve Go runtime profiles at /debug/pprof/ on the health address (env LOOM_PPROF)")
	fs.StringVar(&c.LogLevel, "log-level", env("LOOM_LOG_LEVEL", "info"), "least severe level logged: debug, info, warn or error (env LOOM_LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", env("LOOM_LOG_FORMAT", "text"), "log format: text or json (env LOOM_LOG_FORMAT)")
	fs.DurationVar(&c.DrainPeriod, "drain-period", drain, "how long to finish work after SIGTERM (env LOOM_DRAIN_PERIOD)")
	fs.StringVar(&c.NATSUser, "nats-user", env("LOOM_NATS_USER", ""), "NATS user name; its password comes from env LOOM_NATS_PASSWORD (env LOOM_NATS_USER)")
	c.NATSPassword = env("LOOM_NATS_PASSWORD", "")
	fs.StringVar(&c.NATSCreds, "nats-creds", env("LOOM_NATS_CREDS", ""), "NATS credentials file (user JWT and NKey seed) (env LOOM_NATS_CREDS)")
	fs.StringVar(&c.NATSTLSCA, "nats-tls-ca", env("LOOM_NATS_TLS_CA", ""), "PEM file of the CAs of the NATS servers; requires TLS (env LOOM_NATS_TLS_CA)")
	fs.StringVar(&c.NATSTLSCert, "nats-tls-cert", env("LOOM_NATS_TLS_CERT", ""), "PEM client certificate for mutual TLS with NATS (env LOOM_NATS_TLS_CERT)")
	fs.StringVar(&c.NATSTLSKey, "nats-tls-key", env("LOOM_NATS_TLS_KEY", ""), "PEM key of the client certificate (env LOOM_NATS_TLS_KEY)")
}

// NATSOptions returns the connection options that authenticate the service
// name to NATS and secure the connection, as Config says: user and password
// or a credentials file (not both), TLS with a CA and an optional client
// certificate, and the service's own inbox prefix, which the servers'
// permissions require (natsauth.InboxPrefix). It returns an error if the
// settings contradict each other; files are read when connecting.
func (c Config) NATSOptions(name string) ([]nats.Option, error) {
	opts := []nats.Option{nats.CustomInboxPrefix(natsauth.InboxPrefix(name))}
	switch {
	case c.NATSUser != "" && c.NATSCreds != "":
		return nil, errors.New("cannot configure NATS authentication: give a user or a credentials file, not both")
	case c.NATSUser != "":
		opts = append(opts, nats.UserInfo(c.NATSUser, c.NATSPassword))
	case c.NATSPassword != "":
		return nil, errors.New("cannot configure NATS authentication: a password (LOOM_NATS_PASSWORD) needs a user (--nats-user)")
	case c.NATSCreds != "":
		opts = append(opts, nats.UserCredentials(c.NATSCreds))
	}
	if (c.NATSTLSCert == "") != (c.NATSTLSKey == "") {
		return nil, errors.New("cannot configure NATS TLS: give both a client certificate and its key, or neither")
	}
	if c.NATSTLSCA != "" {
		opts = append(opts, nats.RootCAs(c.NATSTLSCA))
	}
	if c.NATSTLSCert != "" {
		opts = append(opts, nats.ClientCert(c.NATSTLSCert, c.NATSTLSKey))
	}
	return opts, nil
}

// RESTConfig builds the Kubernetes client configuration: from Kubeconfig
// if set, else in-cluster.
func (c Config) RESTConfig() (*rest.Config, error) {
	if c.Kubeconfig == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("cannot load in-cluster configuration (and no --kubeconfig): %w", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cannot load kubeconfig %s: %w", c.Kubeconfig, err)
	}
	return rc, nil
}

// Logger builds the process's logger from LogLevel and LogFormat, writing to
// out. Records logged with a context inside a span carry its trace and span
// IDs (telemetry.LogHandler).
func (c Config) Logger(out io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if c.LogLevel != "" {
		if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
			return nil, fmt.Errorf("cannot use log level %q: %w", c.LogLevel, err)
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch strings.ToLower(c.LogFormat) {
	case "", "text":
		h = slog.NewTextHandler(out, opts)
	case "json":
		h = slog.NewJSONHandler(out, opts)
	default:
		return nil, fmt.Errorf("cannot use log format %q: want text or json", c.LogFormat)
	}
	return slog.New(telemetry.LogHandler(h)), nil
}

// Check is a readiness check: nil means ready.
type Check func(ctx context.Context) error

// Runtime is what a service's run function gets: clients and logging set
// up from Config, and the readiness endpoint it can add checks to.
type Runtime struct {
	// Name is the service's name, for example "renderer".
	Name string
	// Config is the configuration the runtime was started with.
	Config Config
	// REST is the Kubernetes client configuration. Copy it before
	// changing it (rest.CopyConfig).
	REST *rest.Config
	// NATS is connected, or still connecting: it retries and reconnects
	// forever, so a NATS server that starts after the service is fine.
	NATS *nats.Conn
	// Log is the service's structured logger; every record carries
	// service and replica.
	Log *slog.Logger

	mu         sync.Mutex
	checks     map[string]Check
	servers    []*http.Server
	publishers []*bus.Publisher
	closing    bool
}

// AddReadinessCheck registers a check that /readyz runs; the endpoint
// answers 200 only if every check passes. Checks must be fast and must not
// call the API server (probes are frequent). Adding a name twice replaces
// the first check.
func (rt *Runtime) AddReadinessCheck(name string, c Check) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.checks[name] = c
}

// ready runs every check and returns the failures, sorted by name.
func (rt *Runtime) ready(ctx context.Context) []string {
	rt.mu.Lock()
	if rt.closing {
		rt.mu.Unlock()
		return []string{"shutting down"}
	}
	names := make([]string, 0, len(rt.checks))
	checks := make(map[string]Check, len(rt.checks))
	for n, c := range rt.checks {
		names = append(names, n)
		checks[n] = c
	}
	rt.mu.Unlock()
	sort.Strings(names)
	var failed []string
	for _, n := range names {
		if err := checks[n](ctx); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", n, err))
		}
	}
	return failed
}

// Handler serves /healthz (the process is alive), /readyz (every
// readiness check passes) and /metrics (telemetry.Handler).
func (rt *Runtime) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", telemetry.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if failed := rt.ready(ctx); len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, strings.Join(failed, "\n")+"\n")
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// New sets up a Runtime from cfg: the logger, the Kubernetes client
// configuration (whose transport traces requests, telemetry.WrapTransport),
// the NATS connection (which keeps retrying in the background), and the
// health and metrics endpoints. Close releases it. It does not install the
// process's telemetry providers: Main does (telemetry.Setup).
func New(name string, cfg Config, logOut io.Writer) (*Runtime, error) {
	log, err := cfg.Logger(logOut)
	if err != nil {
		return nil, err
	}
	log = log.With("service", name, "replica", cfg.ReplicaID)
	rt := &Runtime{Name: name, Config: cfg, Log: log, checks: map[string]Check{}}
	rc, err := cfg.RESTConfig()
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "loom-" + name + "/" + cfg.ReplicaID
	rc.WarningHandlerWithContext = &warnOnce{log: log}
	rc.Wrap(telemetry.WrapTransport)
	rt.REST = rc

	if cfg.NoNATS {
		return rt, rt.serveHealth(cfg)
	}
	natsOpts, err := cfg.NATSOptions(name)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(cfg.NATSURL, append(natsOpts,
		nats.Name("loom-"+name+"/"+cfg.ReplicaID),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		// A server that vanishes without closing its sockets (a lost host)
		// is noticed within about 30s, not the default 4 minutes; the
		// connection then moves to another server of the cluster.
		nats.PingInterval(10*time.Second),
		nats.MaxPingsOutstanding(3),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("NATS reconnected", "url", c.ConnectedUrl()) }),
		// Permission violations and other asynchronous errors would
		// otherwise go unnoticed: a refused publish fails silently.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Warn("NATS error", "err", err, "subject", sub.Subject)
				return
			}
			log.Warn("NATS error", "err", err)
		}),
	)...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to NATS at %s: %w", cfg.NATSURL, err)
	}
	rt.NATS = nc
	rt.AddReadinessCheck("nats", func(context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("not connected to %s (%s)", cfg.NATSURL, nc.Status())
		}
		return nil
	})
	if err := rt.serveHealth(cfg); err != nil {
		return nil, err
	}
	return rt, nil
}

// serveHealth starts the health and metrics endpoints Config asks for; on
// failure it closes rt.
func (rt *Runtime) serveHealth(cfg Config) error {
	if cfg.HealthAddr != "" {
		h := rt.Handler()
		if cfg.Pprof {
			mux := http.NewServeMux()
			mux.Handle("/", h)
			mux.HandleFunc("GET /debug/pprof/", pprof.Index)
			mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
			mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
			h = mux
		}
		if err := rt.serve(cfg.HealthAddr, h); err != nil {
			_ = rt.Close(context.Background())
			return err
		}
	}
	if cfg.MetricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", telemetry.Handler())
		if err := rt.serve(cfg.MetricsAddr, mux); err != nil {
			_ = rt.Close(context.Background())
			return err
		}
	}
	return nil
}

func (rt *Runtime) serve(addr string, h http.Handler) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	rt.mu.Lock()
	rt.servers = append(rt.servers, srv)
	rt.mu.Unlock()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			rt.Log.Error("HTTP server failed", "addr", addr, "err", err)
		}
	}()
	return nil
}

// Close marks the runtime not ready, waits for the events that the
// publishers of Bus published to be stored (a failure is logged: the next
// resync publishes them again), drains the NATS connection (pending
// publishes are flushed, subscriptions finish their messages) and stops
// the HTTP servers, within ctx.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.mu.Lock()
	rt.closing = true
	servers, pubs := rt.servers, rt.publishers
	rt.mu.Unlock()
	for _, p := range pubs {
		if err := p.Flush(ctx); err != nil {
			rt.Log.Warn("some published events may not have been stored", "err", err)
		}
	}
	var errs []error
	if rt.NATS != nil {
		if rt.NATS.IsConnected() {
			if err := rt.NATS.Drain(); err != nil {
				errs = append(errs, fmt.Errorf("cannot drain NATS connection: %w", err))
			}
			for !rt.NATS.IsClosed() && ctx.Err() == nil {
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		rt.NATS.Close()
	}
	for _, s := range servers {
		if err := s.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("cannot stop HTTP server: %w", err))
		}
	}
	return errors.Join(errs...)
}

// RunFunc is a service's body. It runs until ctx is cancelled (SIGTERM or
// SIGINT), then should finish in-flight work and return. An error that
// wraps context.Canceled, returned after ctx was cancelled, is a clean stop
// (a set-up that was still retrying, see Runtime.Bus), not a failure.
type RunFunc func(ctx context.Context, rt *Runtime) error

// Main is the whole main function of a Loom process: it parses the
// standard flags (plus any registered by extraFlags, which may be nil),
// builds the Runtime, and calls run with a context that SIGTERM or SIGINT
// cancels. run then has Config.DrainPeriod to return; a second signal or
// the end of the drain period exits at once. Main exits the process with
// status 0 if run returned nil, 1 otherwise.
func Main(name string, run RunFunc, extraFlags func(*flag.FlagSet)) {
	os.Exit(main(name, run, extraFlags, os.Args[1:], os.LookupEnv, os.Stderr))
}

// MainWithoutBus is Main for a process that does not use NATS (the RBAC
// manager): Runtime.NATS is nil and readiness does not wait for a
// connection. The NATS flags are accepted and ignored.
func MainWithoutBus(name string, run RunFunc, extraFlags func(*flag.FlagSet)) {
	os.Exit(main(name, run, extraFlags, os.Args[1:], os.LookupEnv, os.Stderr, Config{NoNATS: true}))
}

// main runs a process; base supplies the fields of Config that no flag
// sets (NoNATS).
func main(name string, run RunFunc, extraFlags func(*flag.FlagSet), args []string, lookup func(string) (string, bool), out io.Writer, base ...Config) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	var cfg Config
	if len(base) > 0 {
		cfg = base[0]
	}
	cfg.RegisterFlags(fs, lookup)
	if extraFlags != nil {
		extraFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	shutdown, err := telemetry.Setup(context.Background(), name, cfg.ReplicaID, telemetry.WithLookupEnv(lookup))
	if err != nil {
		fmt.Fprintf(out, "%s: %v\n", name, err)
		return 1
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			fmt.Fprintf(out, "%s: cannot flush telemetry: %v\n", name, err)
		}
	}()
	rt, err := New(name, cfg, out)
	if err != nil {
		fmt.Fprintf(out, "%s: %v\n", name, err)
		return 1
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	done := make(chan error, 1)
	go func() { done <- run(ctx, rt) }()

	var runErr error
	select {
	case runErr = <-done:
	case sig := <-sigs:
		rt.Log.Info("shutting down", "signal", sig.String(), "drain", cfg.DrainPeriod)
		cancel()
		select {
		case runErr = <-done:
		case <-time.After(cfg.DrainPeriod):
			runErr = fmt.Errorf("did not finish within the drain period %s", cfg.DrainPeriod)
		case sig := <-sigs:
			runErr = fmt.Errorf("stopped by a second %s", sig)
		}
	}
	if runErr != nil && ctx.Err() != nil && errors.Is(runErr, context.Canceled) {
		runErr = nil
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if err := rt.Close(cctx); err != nil {
		rt.Log.Warn("unclean shutdown", "err", err)
	}
	if runErr != nil {
		rt.Log.Error("exiting", "err", runErr)
		return 1
	}
	rt.Log.Info("stopped")
	return 0
}
