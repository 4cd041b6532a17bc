package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loomxr/loom/pkg/natsauth"
	"github.com/loomxr/loom/pkg/testing/poll"
)

func TestNATSFlags(t *testing.T) {
	cases := map[string]struct {
		reason  string
		env     map[string]string
		args    []string
		want    Config
		wantErr bool
	}{
		"Environment": {
			reason: "Environment variables provide NATS credentials and TLS files.",
			env: map[string]string{"LOOM_NATS_USER": "loom-binder", "LOOM_NATS_PASSWORD": "secret",
				"LOOM_NATS_TLS_CA": "/ca.crt", "LOOM_NATS_TLS_CERT": "/tls.crt", "LOOM_NATS_TLS_KEY": "/tls.key"},
			want: Config{NATSUser: "loom-binder", NATSPassword: "secret", NATSTLSCA: "/ca.crt", NATSTLSCert: "/tls.crt", NATSTLSKey: "/tls.key"},
		},
		"Flags": {
			reason: "Flags override the environment.",
			env:    map[string]string{"LOOM_NATS_CREDS": "/env.creds"},
			args:   []string{"--nats-creds=/flag.creds", "--nats-tls-ca=/flag-ca.crt"},
			want:   Config{NATSCreds: "/flag.creds", NATSTLSCA: "/flag-ca.crt"},
		},
		"NoPasswordFlag": {
			reason:  "A password on the command line would show in the process list.",
			args:    []string{"--nats-password=secret"},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var c Config
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c.RegisterFlags(fs, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			err := fs.Parse(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nParse(): error %v, want error %t", tc.reason, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			got := Config{NATSUser: c.NATSUser, NATSPassword: c.NATSPassword, NATSCreds: c.NATSCreds,
				NATSTLSCA: c.NATSTLSCA, NATSTLSCert: c.NATSTLSCert, NATSTLSKey: c.NATSTLSKey}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nNATS settings: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestNATSOptions(t *testing.T) {
	cases := map[string]struct {
		reason  string
		cfg     Config
		want    int
		wantErr string
	}{
		"None": {
			reason: "Without credentials only the inbox prefix is set.",
			want:   1,
		},
		"UserPassword": {
			reason: "A user and password authenticate.",
			cfg:    Config{NATSUser: "u", NATSPassword: "p"},
			want:   2,
		},
		"CredsAndTLS": {
			reason: "A credentials file, a CA and a client certificate.",
			cfg:    Config{NATSCreds: "/c", NATSTLSCA: "/ca", NATSTLSCert: "/crt", NATSTLSKey: "/key"},
			want:   4,
		},
		"UserAndCreds": {
			reason:  "Two ways to authenticate at once are ambiguous.",
			cfg:     Config{NATSUser: "u", NATSCreds: "/c"},
			wantErr: "not both",
		},
		"PasswordWithoutUser": {
			reason:  "A password alone is a mistake, not anonymous access.",
			cfg:     Config{NATSPassword: "p"},
			wantErr: "needs a user",
		},
		"CertWithoutKey": {
			reason:  "A client certificate needs its key.",
			cfg:     Config{NATSTLSCert: "/crt"},
			wantErr: "both",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts, err := tc.cfg.NATSOptions("binder")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nNATSOptions(): error %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nNATSOptions(): %v", tc.reason, err)
			}
			if len(opts) != tc.want {
				t.Errorf("%s\nNATSOptions(): %d options, want %d", tc.reason, len(opts), tc.want)
			}
		})
	}
}

// TestNewAuthenticatesToNATS connects a runtime to a server that enforces
// Loom's authorization: with the service's credentials it connects, uses its
// own inbox and gets JetStream replies; with a wrong password it never
// becomes ready.
func TestNewAuthenticatesToNATS(t *testing.T) {
	admin, err := natsauth.NewCredentials(natsauth.AdminUser)
	if err != nil {
		t.Fatal(err)
	}
	binder, err := natsauth.NewCredentials(natsauth.User("binder"))
	if err != nil {
		t.Fatal(err)
	}
	users, err := natsauth.ServerUsers(admin, map[string]natsauth.Credentials{"binder": binder})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: t.TempDir(), Users: users})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS not ready")
	}

	cfg := Config{Kubeconfig: kubeconfig(t), NATSURL: s.ClientURL(), ReplicaID: "b-0", NATSUser: binder.User, NATSPassword: binder.Password}
	rt, err := New("binder", cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Close(context.Background()) }()
	poll.Until(t, 2*time.Second, func() error {
		if !rt.NATS.IsConnected() {
			return fmt.Errorf("not connected with the binder's credentials (last error %v)", rt.NATS.LastError())
		}
		return nil
	})
	if in := rt.NATS.NewInbox(); !strings.HasPrefix(in, natsauth.InboxPrefix("binder")+".") {
		t.Errorf("NewInbox() = %q, want the binder's prefix %q", in, natsauth.InboxPrefix("binder"))
	}
	js, err := jetstream.New(rt.NATS)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Errorf("AccountInfo() as the binder: %v", err)
	}

	cfg.NATSPassword = "wrong"
	cfg.ReplicaID = "b-1"
	bad, err := New("binder", cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bad.Close(context.Background()) }()
	// Give it the time the good one needed many times over.
	wctx, wcancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer wcancel()
	if err := poll.Wait(wctx, func(context.Context) error {
		if !bad.NATS.IsConnected() {
			return errors.New("not connected")
		}
		return nil
	}); err == nil {
		t.Errorf("connected with a wrong password")
	}
	if failed := bad.ready(t.Context()); len(failed) == 0 {
		t.Errorf("ready with a wrong password")
	}
}
