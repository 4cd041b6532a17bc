//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/stack"
)

// secretsNeedles holds what must never be captured: a value, raw and
// base64-encoded (as it is in a Secret's JSON).
type secretsNeedles [][]byte

func newSecretsNeedles(v string) secretsNeedles {
	return secretsNeedles{[]byte(v), []byte(base64.StdEncoding.EncodeToString([]byte(v)))}
}

func (n secretsNeedles) in(b []byte) bool {
	for _, x := range n {
		if bytes.Contains(b, x) {
			return true
		}
	}
	return false
}

// secretsTap records every NATS message of a stack (any subject: work
// streams, JetStream API, key-value buckets, dead letters) and which held a
// needle.
type secretsTap struct {
	needles secretsNeedles

	mu       sync.Mutex
	messages int
	leaks    []string
	subjects map[string]bool
}

func (tp *secretsTap) record(m *nats.Msg) {
	var hdr bytes.Buffer
	for k, vs := range m.Header {
		for _, v := range vs {
			fmt.Fprintf(&hdr, "%s: %s\n", k, v)
		}
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.messages++
	if tp.needles.in(m.Data) || tp.needles.in(hdr.Bytes()) || tp.needles.in([]byte(m.Subject)) {
		tp.leaks = append(tp.leaks, m.Subject)
	}
	tp.subjects[m.Subject] = true
}

// sawSubjectWith reports whether a message was seen on a subject containing
// each of parts.
func (tp *secretsTap) sawSubjectWith(parts ...string) bool {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for s := range tp.subjects {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(s, p)
		}
		if all {
			return true
		}
	}
	return false
}

// secretsSpans is an OTLP/gRPC trace receiver that records every exported
// span batch and which held a needle.
type secretsSpans struct {
	coltracepb.UnimplementedTraceServiceServer
	needles secretsNeedles

	mu    sync.Mutex
	spans int
	leaks int
	// last start of a span per service.name.
	latest map[string]time.Time
}

func (r *secretsSpans) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.needles.in(b) {
		r.leaks++
	}
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				r.spans++
				if t := time.Unix(0, int64(sp.GetStartTimeUnixNano())); t.After(r.latest[service]) {
					r.latest[service] = t
				}
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// startSecretsSpans serves a receiver on a free loopback port until t ends
// and returns it with its endpoint.
func startSecretsSpans(t *testing.T, needles secretsNeedles) (*secretsSpans, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &secretsSpans{needles: needles, latest: map[string]time.Time{}}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return r, "http://" + l.Addr().String()
}

// startSecretsStack starts a stack of the test's own, whose processes
// inherit the test's environment (set it first), and installs the secrets
// tests' kinds. It stops when t ends; its state folder is kept if t failed.
func startSecretsStack(t *testing.T, replicas map[string]int) *framework.Env {
	t.Helper()
	return startSecretsStackWith(t, replicas)
}

// startSecretsStackWith is startSecretsStack with further environment
// (stack.Options.Env) for the services, which overrides the stack's own.
func startSecretsStackWith(t *testing.T, replicas map[string]int, env ...string) *framework.Env {
	t.Helper()
	dir, err := os.MkdirTemp("", "loom-secrets-canary-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), framework.StartTimeout)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{StateDir: dir, Replicas: replicas, Env: env})
	if err != nil {
		t.Fatalf("cannot start a stack (state in %s): %v", dir, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("cannot stop the stack: %v", err)
		}
		if t.Failed() {
			t.Logf("stack state and logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	rc := rest.CopyConfig(s.RESTConfig())
	rc.QPS, rc.Burst = 200, 400
	e := &framework.Env{Stack: s, Config: rc}
	if e.Kube, err = kubernetes.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	if e.Dynamic, err = dynamic.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	e.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	if err := secretsInstall(t, s); err != nil {
		t.Fatalf("cannot install the secrets tests' kinds: %v", err)
	}
	return e
}

// TestSecretsCanary rotates a unique secret value through the whole flow
// (a composed resource's Secret, the XR's Secret, the claim's Secret) while
// every bus message, every log line of every process (services at debug
// level, provider, control plane, NATS) and every span the services export
// is captured, and checks that the value, raw or base64-encoded, appears in
// none of them, nor in any Event or in the XRs' and claims' status. Each
// capture has a positive control: it saw the secrets service's work on the
// XR, so that an empty capture cannot pass.
//
// The value also flows through a Pipeline Composition's function: the
// renderer reads the rotated composed Secret for the function, which
// returns the value as an XR connection detail, and the renderer hands it
// to the secrets service over mutual TLS (the staging Secret), whence it
// reaches the claim's Secret.
//
// It runs on a stack of its own, started with OTLP export to an in-process
// receiver and debug logging.
func TestSecretsCanary(t *testing.T) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	canary := "canary-" + hex.EncodeToString(b)
	needles := newSecretsNeedles(canary)

	spans, endpoint := startSecretsSpans(t, needles)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("LOOM_LOG_LEVEL", "debug")
	env := startSecretsStack(t, nil)
	ctx := t.Context()
	fnSecretsInstall(t, env, "nop-initial-pw")

	tap := &secretsTap{needles: needles, subjects: map[string]bool{}}
	nc, err := nats.Connect(env.Stack.NATSURL(), nats.Name("secrets-canary-tap"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.Subscribe(">", tap.record)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	secretsClaim(t, env, "canary-db", "")
	xr := secretsBoundXR(t, env, "canary-db")
	base := map[string]string{
		"username": "myadmin",
		"password": "nop-s3cr3t-password",
		"endpoint": xr.GetName() + ".mysql.database.azure.com:3306",
	}
	secretsWaitData(t, env, 3*time.Minute, secretsNamespace, "canary-db-conn", base)
	fnSecretsClaim(t, env, "canary-fn-db")
	fnXR := fnSecretsBoundXR(t, env, "canary-fn-db")
	secretsWaitData(t, env, 3*time.Minute, fnSecretsNamespace, "canary-fn-db-conn",
		map[string]string{"db-password": "nop-initial-pw", "endpoint": fnSecretsEndpoint})

	// Rotate the canary in, as the server's provider would.
	server, err := secretsComposed(ctx, env, xr, "server")
	if err != nil {
		t.Fatal(err)
	}
	ref, _, _ := unstructured.NestedStringMap(server.Object, "spec", "writeConnectionSecretToRef")
	rotation := time.Now()
	framework.Eventually(t, 30*time.Second, func() error {
		s, err := env.Kube.CoreV1().Secrets(ref["namespace"]).Get(ctx, ref["name"], metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Data["attribute.administrator_login_password"] = []byte(canary)
		_, err = env.Kube.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	want := map[string]string{"username": base["username"], "password": canary, "endpoint": base["endpoint"]}
	claimSecret := secretsWaitData(t, env, 30*time.Second, secretsNamespace, "canary-db-conn", want)
	// Control: the needles find the value where it belongs.
	if b, err := json.Marshal(claimSecret); err != nil || !needles.in(b) {
		t.Fatalf("the needles do not find the value in the claim's Secret (%v): the checks below could not fail", err)
	}
	secretsWaitData(t, env, 10*time.Second, secretsSystem, string(xr.GetUID()), want)

	// Through the function: the rotated composed Secret is observed by the
	// function, which returns the value for the XR; the renderer hands it
	// to the secrets service (the staging Secret), which publishes it.
	fnSecretsRotate(t, env, fnXR, canary)
	fnWant := map[string]string{"db-password": canary, "endpoint": fnSecretsEndpoint}
	fnClaimSecret := secretsWaitData(t, env, 30*time.Second, fnSecretsNamespace, "canary-fn-db-conn", fnWant)
	if b, err := json.Marshal(fnClaimSecret); err != nil || !needles.in(b) {
		t.Fatalf("the needles do not find the value in the Pipeline claim's Secret (%v)", err)
	}
	sns, sname := fnSecretsStaging(fnXR)
	secretsWaitData(t, env, 10*time.Second, sns, sname, map[string]string{"db-password": canary, "endpoint": fnSecretsEndpoint, "unlisted": "not-published"})

	// Spans: the rotation's handling by the secrets service is exported.
	framework.Eventually(t, 30*time.Second, func() error {
		spans.mu.Lock()
		defer spans.mu.Unlock()
		if !spans.latest["secrets"].After(rotation) || !spans.latest["renderer"].After(rotation) {
			return fmt.Errorf("no span of the secrets service and the renderer since the rotation among %d spans (services: %v)", spans.spans, spans.latest)
		}
		return nil
	})
	spans.mu.Lock()
	t.Logf("%d spans captured", spans.spans)
	if spans.leaks > 0 {
		t.Errorf("the secret value appeared in %d exported span batches", spans.leaks)
	}
	spans.mu.Unlock()

	// Bus: every message published so far has reached the tap.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	tap.mu.Lock()
	leaks, n := tap.leaks, tap.messages
	tap.mu.Unlock()
	t.Logf("%d bus messages captured", n)
	if len(leaks) > 0 {
		t.Errorf("the secret value appeared on the bus, subjects: %v", leaks)
	}
	if !tap.sawSubjectWith("loom.secrets.", string(xr.GetUID())) {
		t.Errorf("the tap saw no work for the secrets service about XR %s: it cannot vouch for the bus", xr.GetUID())
	}
	if !tap.sawSubjectWith("loom.renderer.", string(fnXR.GetUID())) || !tap.sawSubjectWith("loom.secrets.", string(fnXR.GetUID())) {
		t.Errorf("the tap saw no work for the renderer and the secrets service about Pipeline XR %s: it cannot vouch for the bus", fnXR.GetUID())
	}

	// Logs of every process.
	logs, err := filepath.Glob(filepath.Join(env.Stack.StateDir(), "logs", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sawHandling, sawRender := false, false
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if needles.in(b) {
			t.Errorf("the secret value appeared in log %s", p)
		}
		switch filepath.Base(p) {
		case "secrets-0.log":
			sawHandling = bytes.Contains(b, []byte(`msg="Handled composite resource"`)) && bytes.Contains(b, []byte(xr.GetName()))
		case "renderer-0.log":
			sawRender = bytes.Contains(b, []byte(`msg="Rendered composite resource"`)) && bytes.Contains(b, []byte(fnXR.GetName()))
		}
	}
	if !sawHandling {
		t.Errorf("the secrets service's log has no debug line about XR %s among %d logs: cannot vouch for the logs", xr.GetName(), len(logs))
	}
	if !sawRender {
		t.Errorf("the renderer's log has no debug line about Pipeline XR %s: cannot vouch for the logs", fnXR.GetName())
	}

	// Events, and the status of the XR and the claim.
	evs, err := env.Kube.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs := []any{evs}
	xrNow, err := env.Dynamic.Resource(secretsXRGVK.GroupVersion().WithResource("xmysqlinstances")).Get(ctx, xr.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claimNow, err := env.Dynamic.Resource(secretsClaimGVK.GroupVersion().WithResource("mysqlinstances")).Namespace(secretsNamespace).Get(ctx, "canary-db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fnXRNow, err := env.Dynamic.Resource(fnSecretsXRGVK.GroupVersion().WithResource("xfndbs")).Get(ctx, fnXR.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fnClaimNow, err := env.Dynamic.Resource(fnSecretsClaimGVK.GroupVersion().WithResource("fndbs")).Namespace(fnSecretsNamespace).Get(ctx, "canary-fn-db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, xrNow, claimNow, fnXRNow, fnClaimNow)
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if needles.in(b) {
			t.Errorf("the secret value appeared in an Event or a status (%T)", o)
		}
	}
}
