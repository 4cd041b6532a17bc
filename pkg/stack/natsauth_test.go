package stack

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/loomxr/loom/pkg/natsauth"
)

func TestWithUserInfo(t *testing.T) {
	c := natsauth.Credentials{User: "loom-admin", Password: "p@ss"}
	cases := map[string]struct {
		reason string
		urls   string
		want   string
	}{
		"One": {
			reason: "A single URL gets the credentials.",
			urls:   "nats://127.0.0.1:4222",
			want:   "nats://loom-admin:p%40ss@127.0.0.1:4222",
		},
		"Several": {
			reason: "Every URL of a cluster gets them.",
			urls:   "nats://127.0.0.1:1,nats://127.0.0.1:2",
			want:   "nats://loom-admin:p%40ss@127.0.0.1:1,nats://loom-admin:p%40ss@127.0.0.1:2",
		},
		"Replace": {
			reason: "Credentials already in a URL are replaced.",
			urls:   "nats://old:old@127.0.0.1:1",
			want:   "nats://loom-admin:p%40ss@127.0.0.1:1",
		},
		"Empty": {
			reason: "No URL, no credentials.",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, withUserInfo(tc.urls, c)); diff != "" {
				t.Errorf("%s\nwithUserInfo(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// The stack's NATS enforces Loom's authorization: the administrator and each
// service connect with their own users, a service only within its
// permissions, and nobody without credentials.
func TestNATSAuthorization(t *testing.T) {
	s := &Stack{opts: Options{StateDir: t.TempDir(), Services: []string{"renderer", "provider-nop"}, Log: io.Discard}, start: time.Now()}
	if err := os.MkdirAll(filepath.Join(s.opts.StateDir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.startNATS(t.Context()); err != nil {
		t.Fatalf("startNATS: %v", err)
	}
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.nats.stop()
	}()

	admin, err := nats.Connect(s.NATSURL())
	if err != nil {
		t.Fatalf("cannot connect as the administrator: %v", err)
	}
	defer admin.Close()

	if nc, err := nats.Connect(s.serviceNATSURL()); err == nil {
		nc.Close()
		t.Errorf("connected without credentials")
	}

	url := s.ServiceNATSURL("renderer")
	if url == "" {
		t.Fatal("ServiceNATSURL(renderer) is empty")
	}
	violations := make(chan error, 10)
	nc, err := nats.Connect(url, nats.CustomInboxPrefix(natsauth.InboxPrefix("renderer")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatalf("cannot connect as the renderer: %v", err)
	}
	defer nc.Close()
	if err := nc.Publish("loom.binder.0.x", nil); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-violations:
		if !strings.Contains(err.Error(), "loom.binder.0.x") {
			t.Errorf("violation %v, want one for loom.binder.0.x", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the renderer published to the binder's stream without a permission violation")
	}

	if got := s.ServiceNATSURL("unknown"); got != "" {
		t.Errorf("ServiceNATSURL(unknown) = %q, want empty", got)
	}
	if diff := cmp.Diff([]string{"LOOM_NATS_USER=loom-provider-nop", "LOOM_NATS_PASSWORD=" + s.natsAuth.procs["provider-nop"].Password},
		s.natsAuth.env("provider-nop")); diff != "" {
		t.Errorf("env(provider-nop): -want, +got:\n%s", diff)
	}
}
