//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/natsauth"
	"github.com/loomxr/loom/pkg/testing/poll"
)

// natsAuthClientPrefix names the connections of this test, so that the
// violations they cause on purpose can be told from the services' own.
const natsAuthClientPrefix = "e2e-natsauth-"

// natsAuthClient is a connection to the stack's NATS as one service's user,
// recording the permission violations the server reports to it.
type natsAuthClient struct {
	nc *nats.Conn
	js jetstream.JetStream

	mu         sync.Mutex
	violations []string
}

func natsAuthConnect(t *testing.T, env *framework.Env, service string) *natsAuthClient {
	t.Helper()
	url := env.Stack.ServiceNATSURL(service)
	if url == "" {
		t.Fatalf("the stack has no NATS user for %s", service)
	}
	c := &natsAuthClient{}
	nc, err := nats.Connect(url,
		nats.Name(natsAuthClientPrefix+service),
		nats.CustomInboxPrefix(natsauth.InboxPrefix(service)),
		nats.PermissionErrOnSubscribe(true),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				c.mu.Lock()
				c.violations = append(c.violations, err.Error())
				c.mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatalf("cannot connect to NATS as %s: %v", service, err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	if c.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return c
}

// violated waits until the server has reported a violation naming subject.
func (c *natsAuthClient) violated(subject string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return poll.Wait(ctx, func(context.Context) error {
		c.mu.Lock()
		vs := append([]string(nil), c.violations...)
		c.mu.Unlock()
		for _, v := range vs {
			if strings.Contains(v, fmt.Sprintf("%q", subject)) {
				return nil
			}
		}
		return fmt.Errorf("no permission violation for %q (reported: %q)", subject, vs)
	})
}

// TestNATSAuthorization checks, on the running stack where every service
// connects as its own NATS user, that a service whose credentials lack
// permission for a subject can neither publish to it nor consume from it,
// while it can use its own; and that none of the services, doing their real
// work in the other tests, hit a permission violation.
func TestNATSAuthorization(t *testing.T) {
	env := framework.StartStack(t)
	ctx := t.Context()
	const uid = "00000000-0000-4000-8000-00000000e2e9"

	t.Run("PublishToAnotherStream", func(t *testing.T) {
		// The renderer may publish only to its own stream: a JetStream
		// publish to the binder's is refused and never stored.
		c := natsAuthConnect(t, env, bus.Renderer)
		subject := bus.WorkSubject(bus.Binder, bus.DefaultPartitions, uid)
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := c.js.Publish(pctx, subject, []byte("not an event")); err == nil {
			t.Errorf("the renderer published to %s", subject)
		}
		if err := c.violated(subject); err != nil {
			t.Error(err)
		}
		// Nothing reached the binder's stream.
		admin, err := nats.Connect(env.Stack.NATSURL(), nats.Name(natsAuthClientPrefix+"admin"))
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		ajs, err := jetstream.New(admin)
		if err != nil {
			t.Fatal(err)
		}
		st, err := ajs.Stream(ctx, bus.StreamName(bus.Binder))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.GetLastMsgForSubject(ctx, subject); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("the binder's stream holds a message on %s (error %v), want none", subject, err)
		}
	})

	t.Run("ConsumeAnotherStream", func(t *testing.T) {
		// The renderer may not pull from the binder's consumers, nor bind to
		// them; the watcher may not pull from anyone's.
		for service, stream := range map[string]string{bus.Renderer: bus.Binder, natsauth.Watcher: bus.Renderer} {
			c := natsAuthConnect(t, env, service)
			next := "$JS.API.CONSUMER.MSG.NEXT." + bus.StreamName(stream) + "." + bus.ConsumerName(stream, 0)
			if _, err := c.nc.Request(next, []byte(`{"batch":1,"no_wait":true}`), time.Second); err == nil {
				t.Errorf("%s pulled from %s", service, bus.ConsumerName(stream, 0))
			}
			if err := c.violated(next); err != nil {
				t.Errorf("%s: %v", service, err)
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := c.js.Consumer(cctx, bus.StreamName(stream), bus.ConsumerName(stream, 0))
			cancel()
			if err == nil {
				t.Errorf("%s bound to %s", service, bus.ConsumerName(stream, 0))
			}
		}
	})

	t.Run("SubscribeToWork", func(t *testing.T) {
		// Work travels through consumers: subscribing to work subjects or to
		// another service's inbox (where its pulled messages arrive) is
		// refused.
		c := natsAuthConnect(t, env, bus.Binder)
		for _, subject := range []string{"loom.binder.>", natsauth.InboxPrefix(bus.Renderer) + ".>"} {
			sub, err := c.nc.SubscribeSync(subject)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sub.NextMsg(2 * time.Second); !errors.Is(err, nats.ErrPermissionViolation) {
				t.Errorf("subscribing the binder to %s: %v, want a permission violation", subject, err)
			}
		}
	})

	t.Run("DeadLetterForAnother", func(t *testing.T) {
		c := natsAuthConnect(t, env, bus.Secrets)
		subject := bus.DeadLetterSubject(bus.Binder)
		if err := c.nc.Publish(subject, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := c.violated(subject); err != nil {
			t.Error(err)
		}
	})

	t.Run("OwnStream", func(t *testing.T) {
		// The same users may use their own: the controls that make the
		// refusals above mean something.
		for _, s := range bus.Services {
			c := natsAuthConnect(t, env, s)
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.js.Consumer(cctx, bus.StreamName(s), bus.ConsumerName(s, 0))
			cancel()
			if err != nil {
				t.Errorf("%s cannot bind to its own consumer %s: %v", s, bus.ConsumerName(s, 0), err)
			}
		}
		w := natsAuthConnect(t, env, natsauth.Watcher)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := w.js.Stream(cctx, bus.StreamName(bus.Binder)); err != nil {
			t.Errorf("the watcher cannot read the binder's stream, which it publishes to: %v", err)
		}
	})

	t.Run("ServicesHitNoViolation", func(t *testing.T) {
		b, err := os.ReadFile(env.Stack.LogPath("nats"))
		if err != nil {
			t.Skipf("no log of a single NATS server: %v", err)
		}
		ours := 0
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case !strings.Contains(line, "Violation"):
			case strings.Contains(line, natsAuthClientPrefix):
				ours++
			default:
				t.Errorf("a service hit a permission violation: %s", line)
			}
		}
		// The subtests above caused some: the log does record them.
		if ours == 0 {
			t.Errorf("the NATS log records none of this test's violations; the check above cannot work")
		}
	})
}

// TestSecretAccess checks that the ServiceAccounts the stack runs the
// services with (the chart's RBAC) keep a claim's connection Secret from
// everyone but the secrets service, and the renderer's single get.
func TestSecretAccess(t *testing.T) {
	env := framework.StartStack(t)
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-secret-access"}}
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !kerrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// A claim's connection Secret, as the secrets service writes it.
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db-conn", Namespace: ns.Name},
		Type:       "connection.crossplane.io/v1alpha1",
		Data:       map[string][]byte{"password": []byte("s3cr3t")},
	}
	if _, err := env.Kube.CoreV1().Secrets(ns.Name).Create(ctx, sec, metav1.CreateOptions{}); err != nil && !kerrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})

	cases := map[string]struct {
		reason    string
		get, list bool
		watch     bool
		update    bool
	}{
		"watcher":  {reason: "The watcher never reads Secrets; the secrets service watches its own."},
		"binder":   {reason: "The binder has no access to Secrets at all."},
		"renderer": {reason: "The renderer may only get a Secret (function credentials, observed connection details).", get: true},
		"secrets":  {reason: "The secrets service alone lists, watches and writes Secrets.", get: true, list: true, watch: true, update: true},
	}
	for service, tc := range cases {
		t.Run(service, func(t *testing.T) {
			rc, err := clientcmd.BuildConfigFromFlags("", env.Stack.ServiceKubeconfig(service))
			if err != nil {
				t.Fatal(err)
			}
			cs, err := kubernetes.NewForConfig(rc)
			if err != nil {
				t.Fatal(err)
			}
			secrets := cs.CoreV1().Secrets(ns.Name)
			check := func(verb string, allowed bool, err error) {
				t.Helper()
				switch {
				case allowed && err != nil:
					t.Errorf("%s\n%s of the claim's Secret as loom-%s: %v, want allowed", tc.reason, verb, service, err)
				case !allowed && !kerrors.IsForbidden(err):
					t.Errorf("%s\n%s of the claim's Secret as loom-%s: %v, want Forbidden", tc.reason, verb, service, err)
				}
			}
			got, err := secrets.Get(ctx, sec.Name, metav1.GetOptions{})
			check("get", tc.get, err)
			if err == nil && !tc.get && len(got.Data) > 0 {
				t.Errorf("loom-%s read the Secret's data", service)
			}
			_, err = secrets.List(ctx, metav1.ListOptions{})
			check("list", tc.list, err)
			w, err := secrets.Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			check("watch", tc.watch, err)
			_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			check("update", tc.update, err)
		})
	}
}
