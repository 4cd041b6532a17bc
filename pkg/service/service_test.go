package service

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/loomxr/loom/pkg/bus/bustest"
	"github.com/loomxr/loom/pkg/telemetry"
	"github.com/loomxr/loom/pkg/testing/poll"
)

func TestRegisterFlags(t *testing.T) {
	cases := map[string]struct {
		reason string
		env    map[string]string
		args   []string
		want   Config
	}{
		"Environment": {
			reason: "Environment variables provide the defaults.",
			env: map[string]string{"KUBECONFIG": "/k", "LOOM_NATS_URL": "nats://n:4222", "LOOM_REPLICA_ID": "r-1",
				"LOOM_HEALTH_ADDR": "127.0.0.1:1", "LOOM_METRICS_ADDR": "127.0.0.1:2", "LOOM_PPROF": "true", "LOOM_DRAIN_PERIOD": "3s",
				"LOOM_LOG_LEVEL": "debug", "LOOM_LOG_FORMAT": "json"},
			want: Config{Kubeconfig: "/k", NATSURL: "nats://n:4222", ReplicaID: "r-1", HealthAddr: "127.0.0.1:1", MetricsAddr: "127.0.0.1:2", Pprof: true,
				LogLevel: "debug", LogFormat: "json", DrainPeriod: 3 * time.Second},
		},
		"FlagsWin": {
			reason: "Flags override the environment.",
			env:    map[string]string{"KUBECONFIG": "/env", "LOOM_REPLICA_ID": "env"},
			args:   []string{"--kubeconfig=/flag", "--replica-id=flag", "--nats-url=nats://f:1", "--health-addr=", "--drain-period=1s", "--log-level=warn"},
			want:   Config{Kubeconfig: "/flag", NATSURL: "nats://f:1", ReplicaID: "flag", HealthAddr: "", LogLevel: "warn", LogFormat: "text", DrainPeriod: time.Second},
		},
		"Defaults": {
			reason: "Without either, the documented defaults apply.",
			env:    map[string]string{"LOOM_REPLICA_ID": "fixed"},
			want:   Config{NATSURL: "nats://127.0.0.1:4222", ReplicaID: "fixed", HealthAddr: ":8081", LogLevel: "info", LogFormat: "text", DrainPeriod: 10 * time.Second},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var c Config
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			c.RegisterFlags(fs, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c); diff != "" {
				t.Errorf("%s\nConfig: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestReadyz(t *testing.T) {
	cases := map[string]struct {
		reason   string
		checks   map[string]Check
		closing  bool
		wantCode int
		wantBody string
	}{
		"AllPass": {
			reason:   "Ready when every check passes.",
			checks:   map[string]Check{"a": func(context.Context) error { return nil }},
			wantCode: http.StatusOK,
			wantBody: "ok\n",
		},
		"OneFails": {
			reason: "Not ready when a check fails; failures are listed sorted by name.",
			checks: map[string]Check{
				"b": func(context.Context) error { return errors.New("boom") },
				"a": func(context.Context) error { return errors.New("bang") },
				"c": func(context.Context) error { return nil },
			},
			wantCode: http.StatusServiceUnavailable,
			wantBody: "a: bang\nb: boom\n",
		},
		"Closing": {
			reason:   "Not ready while shutting down.",
			closing:  true,
			wantCode: http.StatusServiceUnavailable,
			wantBody: "shutting down\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := &Runtime{checks: map[string]Check{}, closing: tc.closing}
			for n, c := range tc.checks {
				rt.AddReadinessCheck(n, c)
			}
			srv := httptest.NewServer(rt.Handler())
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			if resp.StatusCode != tc.wantCode || body.String() != tc.wantBody {
				t.Errorf("%s\n/readyz: got %d %q, want %d %q", tc.reason, resp.StatusCode, body.String(), tc.wantCode, tc.wantBody)
			}
			if resp, err := http.Get(srv.URL + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("%s\n/healthz: want 200 whatever readiness says, got %v %v", tc.reason, resp, err)
			}
		})
	}
}

func TestLogger(t *testing.T) {
	cases := map[string]struct {
		reason  string
		cfg     Config
		want    []string
		wantErr bool
	}{
		"Default": {
			reason: "The zero Config logs text at info and above.",
			want:   []string{"level=INFO msg=info"},
		},
		"DebugJSON": {
			reason: "Debug lines appear at level debug; json is JSON.",
			cfg:    Config{LogLevel: "debug", LogFormat: "json"},
			want:   []string{`"level":"DEBUG","msg":"debug"`, `"level":"INFO","msg":"info"`},
		},
		"BadLevel": {
			reason:  "An unknown level is an error.",
			cfg:     Config{LogLevel: "chatty"},
			wantErr: true,
		},
		"BadFormat": {
			reason:  "An unknown format is an error.",
			cfg:     Config{LogFormat: "xml"},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			log, err := tc.cfg.Logger(&out)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nLogger(): error %v, want error %t", tc.reason, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			log.Debug("debug")
			log.Info("info")
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("%s\ngot %d lines, want %d:\n%s", tc.reason, len(lines), len(tc.want), out.String())
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("%s\nline %d = %s; want it to contain %s", tc.reason, i, lines[i], w)
				}
			}
		})
	}
}

func TestMetricsEndpoints(t *testing.T) {
	url := runNATS(t)
	health, metrics := freeAddr(t), freeAddr(t)
	cfg := Config{Kubeconfig: kubeconfig(t), NATSURL: url, ReplicaID: "m-0", HealthAddr: health, MetricsAddr: metrics, Pprof: true}
	shutdown, err := telemetry.Setup(t.Context(), "test", "m-0", telemetry.WithLookupEnv(func(string) (string, bool) { return "", false }))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	rt, err := New("test", cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Close(context.Background()) }()
	for _, addr := range []string{health, metrics} {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatalf("GET %s/metrics: %v", addr, err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), "process_resident_memory_bytes") {
			t.Errorf("GET %s/metrics: %d\n%s", addr, resp.StatusCode, body.String())
		}
	}
	for addr, want := range map[string]int{health: http.StatusOK, metrics: http.StatusNotFound} {
		resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
		if err != nil {
			t.Fatalf("GET %s/debug/pprof/heap: %v", addr, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s/debug/pprof/heap: status %d, want %d (profiles only on the health address)", addr, resp.StatusCode, want)
		}
	}
	if rt.REST.WrapTransport == nil {
		t.Errorf("the REST config's transport is not instrumented")
	}
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// runNATS starts an in-process NATS server for the test.
func runNATS(t *testing.T) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS not ready")
	}
	return s.ClientURL()
}

// kubeconfig writes a kubeconfig for a server that is never contacted.
func kubeconfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	const kc = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMainExitCodes(t *testing.T) {
	url := runNATS(t)
	kc := kubeconfig(t)
	args := []string{"--kubeconfig=" + kc, "--nats-url=" + url, "--replica-id=t-0", "--health-addr="}
	cases := map[string]struct {
		reason string
		args   []string
		run    RunFunc
		want   int
	}{
		"Success": {
			reason: "run returning nil exits 0.",
			args:   args,
			run: func(_ context.Context, rt *Runtime) error {
				if rt.REST.Host != "https://127.0.0.1:1" {
					return errors.New("wrong REST config")
				}
				return nil
			},
			want: 0,
		},
		"RunFails": {
			reason: "run returning an error exits 1.",
			args:   args,
			run:    func(context.Context, *Runtime) error { return errors.New("boom") },
			want:   1,
		},
		"BadFlag": {
			reason: "An unknown flag exits 2.",
			args:   []string{"--nope"},
			run:    func(context.Context, *Runtime) error { return nil },
			want:   2,
		},
		"NoKubeconfig": {
			reason: "Outside a cluster, no kubeconfig is a start-up failure.",
			args:   []string{"--kubeconfig=", "--nats-url=" + url, "--health-addr="},
			run:    func(context.Context, *Runtime) error { return nil },
			want:   1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			got := main("test", tc.run, nil, tc.args, func(string) (string, bool) { return "", false }, &out)
			if got != tc.want {
				t.Errorf("%s\nmain(...): exit %d, want %d; output:\n%s", tc.reason, got, tc.want, out.String())
			}
		})
	}
}

func TestMainStopsOnSIGTERM(t *testing.T) {
	cases := map[string]struct {
		reason string
		ret    error
	}{
		"ReturnsNil": {
			reason: "run returning nil after SIGTERM exits 0.",
		},
		"ReturnsCanceled": {
			reason: "run returning an error that wraps context.Canceled after SIGTERM (a set-up still retrying) exits 0 too.",
			ret:    fmt.Errorf("cannot set up: %w", context.Canceled),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			url := runNATS(t)
			started := make(chan struct{})
			var out bytes.Buffer
			code := make(chan int, 1)
			go func() {
				code <- main("test", func(ctx context.Context, rt *Runtime) error {
					close(started)
					<-ctx.Done()
					return tc.ret
				}, nil, []string{"--kubeconfig=" + kubeconfig(t), "--nats-url=" + url, "--health-addr=", "--drain-period=5s"},
					func(string) (string, bool) { return "", false }, &out)
			}()
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("run did not start")
			}
			// main has installed its handler before run starts, so this SIGTERM
			// reaches main rather than ending the test binary.
			if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case c := <-code:
				if c != 0 {
					t.Errorf("%s\nexit %d after SIGTERM, want 0; output:\n%s", tc.reason, c, out.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("main did not return after SIGTERM")
			}
			if !strings.Contains(out.String(), "shutting down") {
				t.Errorf("output %q: want a shutdown line", out.String())
			}
		})
	}
}

// Given every server of a cluster, the runtime's connection moves to another
// server when its own goes away, and a subscription keeps receiving, with
// no action from the service.
func TestNATSFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server cluster")
	}
	c := bustest.RunCluster(t, 3)
	rt, err := New("test", Config{Kubeconfig: kubeconfig(t), NATSURL: c.URLs(), ReplicaID: "f-0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Close(context.Background()) }()
	got := make(chan string, 16)
	if _, err := rt.NATS.Subscribe("failover", func(m *nats.Msg) { got <- string(m.Data) }); err != nil {
		t.Fatal(err)
	}
	_, pub := bustest.Connect(t, c.URLs(), nats.MaxReconnects(-1))
	receive := func(what string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			// Interest moves between servers asynchronously: publish until
			// a message arrives.
			if err := pub.Conn().Publish("failover", []byte(what)); err != nil {
				t.Fatal(err)
			}
			select {
			case m := <-got:
				if m == what {
					return
				}
			case <-time.After(100 * time.Millisecond):
			case <-deadline:
				t.Fatalf("no message %q within 30s", what)
			}
		}
	}
	receive("before")

	first := rt.NATS.ConnectedServerName()
	for _, s := range c.Servers {
		if s.Name() == first {
			s.Stop()
		}
	}
	poll.Until(t, 30*time.Second, func() error {
		if !rt.NATS.IsConnected() || rt.NATS.ConnectedServerName() == first {
			return fmt.Errorf("still not connected to another server than %s: %s", first, rt.NATS.Status())
		}
		return nil
	})
	if failed := rt.ready(t.Context()); len(failed) > 0 {
		t.Errorf("not ready after the failover: %v", failed)
	}
	receive("after")
}
