package natsauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/reconcile"
	"github.com/loomxr/loom/pkg/watchreq"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
)

// authServer is an embedded NATS server enforcing Loom's authorization, with
// credentials for the admin and every service.
type authServer struct {
	url   string
	admin Credentials
	creds map[string]Credentials
}

func startAuthServer(t *testing.T) *authServer {
	t.Helper()
	a := &authServer{creds: map[string]Credentials{}}
	var err error
	if a.admin, err = NewCredentials(AdminUser); err != nil {
		t.Fatal(err)
	}
	for _, s := range append([]string{"provider-nop"}, Services...) {
		if a.creds[s], err = NewCredentials(User(s)); err != nil {
			t.Fatal(err)
		}
	}
	users, err := ServerUsers(a.admin, a.creds)
	if err != nil {
		t.Fatalf("ServerUsers(): %v", err)
	}
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  t.TempDir(),
		Users:     users,
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		t.Fatalf("cannot create NATS server: %v", err)
	}
	go srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server did not become ready")
	}
	a.url = srv.ClientURL()
	return a
}

// client is a connection as one user that records the permission violations
// the server reports.
type client struct {
	nc *nats.Conn
	js jetstream.JetStream

	mu         sync.Mutex
	violations []string
}

func (a *authServer) connect(t *testing.T, service string) *client {
	t.Helper()
	c := &client{}
	creds := a.admin
	opts := []nats.Option{nats.Name("natsauth-test-" + service)}
	if service != "" {
		creds = a.creds[service]
		opts = append(opts, nats.CustomInboxPrefix(InboxPrefix(service)))
	}
	opts = append(opts, nats.UserInfo(creds.User, creds.Password),
		nats.PermissionErrOnSubscribe(true),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				c.mu.Lock()
				c.violations = append(c.violations, err.Error())
				c.mu.Unlock()
			}
		}))
	nc, err := nats.Connect(a.url, opts...)
	if err != nil {
		t.Fatalf("cannot connect as %q: %v", service, err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	if c.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *client) reported() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.violations...)
}

// waitViolation waits until the server has reported a violation that
// mentions subject.
func (c *client) waitViolation(ctx context.Context, subject string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		for _, v := range c.reported() {
			if strings.Contains(v, fmt.Sprintf("%q", subject)) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no permission violation reported for %q (reported: %q)", subject, c.reported())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

const testUID = "00000000-0000-4000-8000-000000000001"

func event(uid, resourceVersion string) *eventsv1.Event {
	return &eventsv1.Event{
		Object:          &eventsv1.ObjectRef{Group: "example.org", Version: "v1", Kind: "XThing", Name: "thing", Uid: uid},
		ResourceVersion: resourceVersion,
		Type:            eventsv1.EventType_EVENT_TYPE_MODIFIED,
	}
}

// TestServicesDoTheirWork runs, as each service's user, what that service
// does on the bus: the watcher ensures the streams, publishes to every worker
// and watches the watch requests; each worker ensures the streams, joins,
// consumes, requeues and dead-letters; the renderer writes a watch request.
// None of it may be refused.
func TestServicesDoTheirWork(t *testing.T) {
	ctx := t.Context()
	a := startAuthServer(t)
	cfg := bus.Config{Partitions: 4, LeaseTTL: 2 * time.Second, AckWait: time.Second}
	clients := map[string]*client{}
	for _, s := range Services {
		clients[s] = a.connect(t, s)
	}

	w := clients[Watcher]
	if err := bus.EnsureStreams(ctx, w.js, cfg); err != nil {
		t.Fatalf("watcher: EnsureStreams(): %v", err)
	}
	wkv, err := watchreq.EnsureBucket(ctx, w.js, 1)
	if err != nil {
		t.Fatalf("watcher: EnsureBucket(): %v", err)
	}
	watch, err := wkv.Watch(ctx, ">")
	if err != nil {
		t.Fatalf("watcher: Watch(): %v", err)
	}
	defer func() { _ = watch.Stop() }()

	rkv, err := watchreq.EnsureBucket(ctx, clients[bus.Renderer].js, 1)
	if err != nil {
		t.Fatalf("renderer: EnsureBucket(): %v", err)
	}
	if err := watchreq.Put(ctx, rkv, testUID, []watchreq.Request{{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}}); err != nil {
		t.Fatalf("renderer: watchreq.Put(): %v", err)
	}
	if err := waitWatch(ctx, watch, testUID); err != nil {
		t.Fatalf("watcher: %v", err)
	}

	pub := bus.NewPublisher(w.js, bus.WithConfig(cfg))
	for _, s := range bus.Services {
		if err := pub.Publish(ctx, s, event(testUID, "1")); err != nil {
			t.Fatalf("watcher: Publish(%s): %v", s, err)
		}
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatalf("watcher: Flush(): %v", err)
	}

	// Each worker handles its event three times: failed permanently
	// (dead-lettered); published again by the worker itself, requeued;
	// handled.
	for _, s := range bus.Services {
		c := clients[s]
		if err := bus.EnsureStreams(ctx, c.js, cfg); err != nil {
			t.Fatalf("%s: EnsureStreams(): %v", s, err)
		}
		var mu sync.Mutex
		calls := 0
		done := make(chan struct{})
		h := bus.HandlerFunc(func(context.Context, bus.Request) (bus.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			switch calls {
			case 1:
				return bus.Result{}, reconcile.Terminal(errors.New("test failure"))
			case 2:
				return bus.Result{RequeueAfter: time.Millisecond}, nil
			case 3:
				close(done)
			}
			return bus.Result{}, nil
		})
		wk, err := bus.NewWorker(c.nc, c.js, s, s+"-0", h, bus.WithConfig(cfg), bus.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- wk.Run(wctx) }()

		if err := waitDeadLetter(ctx, a.connect(t, ""), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		// A new resourceVersion, or deduplication would drop it.
		own := bus.NewPublisher(c.js, bus.WithConfig(cfg))
		if err := own.Publish(ctx, s, event(testUID, "2")); err != nil {
			t.Fatalf("%s: Publish(own stream): %v", s, err)
		}
		if err := own.Flush(ctx); err != nil {
			t.Fatalf("%s: Flush(): %v", s, err)
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the event published again was not handled", s)
		}
		stop()
		if err := <-ran; err != nil {
			t.Fatalf("%s: Run(): %v", s, err)
		}
	}

	// The secrets service asks the renderer to render an XR whose
	// functions observe a connection Secret that changed.
	sp := bus.NewPublisher(clients[bus.Secrets].js, bus.WithConfig(cfg))
	if err := sp.Publish(ctx, bus.Renderer, event(testUID, "3")); err != nil {
		t.Fatalf("secrets: Publish(renderer): %v", err)
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := sp.Flush(fctx); err != nil {
		t.Fatalf("secrets: Flush() of a render request: %v", err)
	}

	for _, s := range Services {
		if v := clients[s].reported(); len(v) > 0 {
			t.Errorf("%s: permission violations: %q", s, v)
		}
	}
}

func waitWatch(ctx context.Context, w jetstream.KeyWatcher, key string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		select {
		case e := <-w.Updates():
			if e != nil && e.Key() == key {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("key %s not seen by the watch: %w", key, ctx.Err())
		}
	}
}

func waitDeadLetter(ctx context.Context, admin *client, service string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		dls, err := bus.ListDeadLetters(ctx, admin.js, service)
		if err == nil && len(dls) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no dead letter of %s (last error: %v)", service, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestServicesCannotDoOthersWork checks that the server refuses what a
// service must not do: consume, acknowledge on or publish to another
// service's stream, dead-letter for another, touch another's leases or
// inbox, delete or purge streams.
func TestServicesCannotDoOthersWork(t *testing.T) {
	a := startAuthServer(t)
	cases := map[string]struct {
		reason    string
		service   string
		publish   string
		subscribe string
	}{
		"WatcherConsumes": {
			reason:  "The watcher only publishes; it may not pull from a work stream.",
			service: Watcher, publish: "$JS.API.CONSUMER.MSG.NEXT.LOOM_RENDERER.renderer-p00",
		},
		"WatcherDeadLetters": {
			reason:  "The watcher consumes nothing, so it has nothing to dead-letter.",
			service: Watcher, publish: "loom.dlq.renderer",
		},
		"WatcherWritesWatchRequests": {
			reason:  "The watcher reads the watch requests the renderer writes.",
			service: Watcher, publish: "$KV.loom-watches." + testUID,
		},
		"RendererPublishesToBinder": {
			reason:  "A worker publishes only to its own stream.",
			service: bus.Renderer, publish: "loom.binder.0." + testUID,
		},
		"RendererPullsFromBinder": {
			reason:  "A worker pulls only from its own consumers.",
			service: bus.Renderer, publish: "$JS.API.CONSUMER.MSG.NEXT.LOOM_BINDER.binder-p00",
		},
		"BinderAcksForSecrets": {
			reason:  "A worker acknowledges only its own stream's messages.",
			service: bus.Binder, publish: "$JS.ACK.LOOM_SECRETS.secrets-p00.1.1.1.1.0",
		},
		"SecretsDeadLettersForRenderer": {
			reason:  "A worker dead-letters only its own messages.",
			service: bus.Secrets, publish: "loom.dlq.renderer",
		},
		"BinderTakesRendererLease": {
			reason:  "A worker writes only its own service's leases.",
			service: bus.Binder, publish: "$KV.LOOM_LEASES.renderer.0",
		},
		"BinderWritesWatchRequests": {
			reason:  "Only the renderer writes watch requests.",
			service: bus.Binder, publish: "$KV.loom-watches." + testUID,
		},
		"RendererDeletesStream": {
			reason:  "No service may delete a stream.",
			service: bus.Renderer, publish: "$JS.API.STREAM.DELETE.LOOM_BINDER",
		},
		"SecretsPublishesToBinder": {
			reason:  "The secrets service publishes to the renderer's stream only, besides its own.",
			service: bus.Secrets, publish: "loom.binder.0." + testUID,
		},
		"SecretsPullsFromRenderer": {
			reason:  "Asking the renderer to render is not consuming its work.",
			service: bus.Secrets, publish: "$JS.API.CONSUMER.MSG.NEXT.LOOM_RENDERER.renderer-p00",
		},
		"SecretsPurgesStream": {
			reason:  "No service may purge a stream.",
			service: bus.Secrets, publish: "$JS.API.STREAM.PURGE.LOOM_SECRETS",
		},
		"RendererDeletesConsumer": {
			reason:  "No service may delete a partition consumer.",
			service: bus.Renderer, publish: "$JS.API.CONSUMER.DELETE.LOOM_RENDERER.renderer-p00",
		},
		"RendererSubscribesToWork": {
			reason:  "Work is pulled through consumers, never subscribed to.",
			service: bus.Renderer, subscribe: "loom.>",
		},
		"BinderReadsRendererInbox": {
			reason:  "Replies, pulled messages included, go to each service's own inbox.",
			service: bus.Binder, subscribe: InboxPrefix(bus.Renderer) + ".>",
		},
		"RendererReadsDefaultInbox": {
			reason:  "The default inbox prefix is nobody's.",
			service: bus.Renderer, subscribe: "_INBOX.>",
		},
		"ProviderPublishes": {
			reason:  "A process that is not a Loom service may connect and do nothing else.",
			service: "provider-nop", publish: "loom.renderer.0." + testUID,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := a.connect(t, tc.service)
			subject := tc.publish
			if subject != "" {
				if err := c.nc.Publish(subject, []byte("x")); err != nil {
					t.Fatalf("Publish(): %v", err)
				}
			} else {
				subject = tc.subscribe
				if _, err := c.nc.SubscribeSync(subject); err != nil {
					t.Fatalf("SubscribeSync(): %v", err)
				}
			}
			if err := c.nc.Flush(); err != nil {
				t.Fatalf("Flush(): %v", err)
			}
			if err := c.waitViolation(t.Context(), subject); err != nil {
				t.Errorf("%s\n%v", tc.reason, err)
			}
		})
	}
}

func TestFor(t *testing.T) {
	cases := map[string]struct {
		reason  string
		service string
		has     []string
		hasNot  []string
		wantErr bool
	}{
		"Watcher": {
			reason:  "The watcher publishes to every work stream and reads watch requests.",
			service: Watcher,
			has:     []string{"loom.renderer.>", "loom.binder.>", "loom.secrets.>", "$JS.API.CONSUMER.CREATE.KV_loom-watches.*.$KV.loom-watches.>"},
			hasNot:  []string{"loom.dlq.renderer", "$KV.loom-watches.>", "$JS.ACK.LOOM_RENDERER.>"},
		},
		"Renderer": {
			reason:  "The renderer consumes its stream and writes watch requests.",
			service: bus.Renderer,
			has:     []string{"loom.renderer.>", "loom.dlq.renderer", "$JS.API.CONSUMER.MSG.NEXT.LOOM_RENDERER.*", "$JS.ACK.LOOM_RENDERER.>", "$KV.loom-watches.>", "$KV.LOOM_LEASES.renderer.>"},
			hasNot:  []string{"loom.binder.>", "$JS.API.CONSUMER.MSG.NEXT.LOOM_BINDER.*", "$KV.LOOM_LEASES.binder.>"},
		},
		"Secrets": {
			reason:  "The secrets service consumes its stream and asks the renderer to render XRs, but never dead-letters or acknowledges for it.",
			service: bus.Secrets,
			has:     []string{"loom.secrets.>", "loom.dlq.secrets", "$JS.ACK.LOOM_SECRETS.>", "loom.renderer.>"},
			hasNot:  []string{"loom.binder.>", "loom.dlq.renderer", "$JS.ACK.LOOM_RENDERER.>", "$JS.API.CONSUMER.MSG.NEXT.LOOM_RENDERER.*", "$KV.loom-watches.>"},
		},
		"Binder": {
			reason:  "The binder consumes its stream and does not write watch requests.",
			service: bus.Binder,
			has:     []string{"loom.binder.>", "loom.dlq.binder", "$JS.ACK.LOOM_BINDER.>"},
			hasNot:  []string{"loom.renderer.>", "$KV.loom-watches.>", "loom.dlq.renderer"},
		},
		"Unknown": {
			reason:  "Only Loom's services have permissions.",
			service: "provider-nop",
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := For(tc.service)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nFor(%q): error %v, want error %t", tc.reason, tc.service, err, tc.wantErr)
			}
			for _, s := range tc.has {
				if !contains(p.Publish, s) {
					t.Errorf("%s\nFor(%q).Publish lacks %q", tc.reason, tc.service, s)
				}
			}
			for _, s := range tc.hasNot {
				if contains(p.Publish, s) {
					t.Errorf("%s\nFor(%q).Publish has %q", tc.reason, tc.service, s)
				}
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff([]string{InboxPrefix(tc.service) + ".>"}, p.Subscribe); diff != "" {
				t.Errorf("%s\nFor(%q).Subscribe: -want, +got:\n%s", tc.reason, tc.service, diff)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
