//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/stack"
)

// otlpSpan is a span as the in-test OTLP receiver stores it.
type otlpSpan struct {
	service  string // the resource's service.name
	traceID  string
	spanID   string
	parentID string
	name     string
	attrs    map[string]string
}

// otlpReceiver is a minimal OTLP/gRPC trace collector: it keeps every span
// it is sent.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	addr string

	mu    sync.Mutex
	spans []otlpSpan
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := attrMap(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, otlpSpan{
					service:  service,
					traceID:  hex.EncodeToString(s.GetTraceId()),
					spanID:   hex.EncodeToString(s.GetSpanId()),
					parentID: hex.EncodeToString(s.GetParentSpanId()),
					name:     s.GetName(),
					attrs:    attrMap(s.GetAttributes()),
				})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			m[kv.GetKey()] = v.GetStringValue()
		case v.GetIntValue() != 0:
			m[kv.GetKey()] = strconv.FormatInt(v.GetIntValue(), 10)
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}

// find returns the spans for which keep is true.
func (r *otlpReceiver) find(keep func(otlpSpan) bool) []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []otlpSpan
	for _, s := range r.spans {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

// startOTLPReceiver serves an otlpReceiver on a free loopback port until
// the test ends.
func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{addr: l.Addr().String()}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	done := make(chan struct{})
	go func() { _ = srv.Serve(l); close(done) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return r
}

// telemetryServices are the services whose telemetry the tests check.
var telemetryServices = []string{"watcher", "binder", "renderer", "secrets"}

// TestTelemetry runs a stack of its own whose services export traces to an
// in-process OTLP receiver, creates a claim that becomes Ready (and one
// whose function cannot be reached, and a message no service can decode),
// then checks the trace of the claim's creation and every service's
// /metrics against the dashboard's queries.
func TestTelemetry(t *testing.T) {
	recv := startOTLPReceiver(t)
	dir, err := os.MkdirTemp("", "loom-telemetry-")
	if err != nil {
		t.Fatal(err)
	}
	progress := io.Writer(io.Discard)
	if testing.Verbose() {
		progress = os.Stderr
	}
	sctx, cancel := context.WithTimeout(t.Context(), framework.StartTimeout)
	st, err := stack.Start(sctx, stack.Options{
		StateDir: dir,
		Log:      progress,
		Env: []string{
			"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + recv.addr,
			"OTEL_BSP_SCHEDULE_DELAY=100",
		},
	})
	cancel()
	if err != nil {
		t.Fatalf("cannot start a stack: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := st.Stop(ctx); err != nil {
			t.Errorf("cannot stop the stack: %v", err)
		}
		if t.Failed() {
			t.Logf("stack state and logs kept in %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	})
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(st.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := installTraceKinds(ctx, st); err != nil {
		t.Fatalf("cannot install the trace kinds: %v", err)
	}
	apply := func(doc string) {
		t.Helper()
		objs, err := stack.DecodeManifests([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.ApplyObjects(ctx, objs...); err != nil {
			t.Fatal(err)
		}
	}

	ready := func(name string) *unstructured.Unstructured {
		t.Helper()
		var claim *unstructured.Unstructured
		framework.Eventually(t, 2*time.Minute, func() error {
			var err error
			if claim, err = traceClaims(dyn).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
			if err := hasCondition(claim, "Ready", "True", "Available"); err != nil {
				return err
			}
			_, err = dyn.Resource(secretGVR).Namespace(traceNamespace).Get(ctx, name+"-conn", metav1.GetOptions{})
			return err
		})
		return claim
	}

	// A first claim lets the Composition's revision and every watch settle:
	// the second one's creation then runs undisturbed, as it does in a
	// cluster in use. (An XR rendered because its Composition's revision
	// appeared is rendered in the revision's trace, not its claim's.)
	apply(traceClaim("telemetry-warm-up", "trace-ok", "small"))
	ready("telemetry-warm-up")
	apply(traceClaim("telemetry", "trace-ok", "small"))
	claim := ready("telemetry")

	// A claim whose pipeline cannot reach its function (retried with
	// backoff), and a message on the binder's work stream that is no event
	// (dead-lettered), for the metrics of failures.
	apply(traceClaim("telemetry-fn", "trace-fn", "small"))
	deadLetter(t, st.NATSURL())

	t.Run("OneTraceFromWatcherToSecrets", func(t *testing.T) {
		testClaimTrace(t, recv, string(claim.GetUID()))
	})
	t.Run("DashboardMetrics", func(t *testing.T) {
		testDashboardMetrics(t, st)
	})
}

var secretGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// deadLetter publishes a message that is not an event to the binder's work
// stream.
func deadLetter(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("cannot connect to NATS: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	subject := bus.WorkSubject(bus.Binder, bus.DefaultPartitions, "00000000-0000-4000-8000-00000000dead")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// The stream may not exist until a service has started; retry.
	framework.Eventually(t, 30*time.Second, func() error {
		_, err := js.Publish(ctx, subject, []byte("not an event"))
		return err
	})
}

// testClaimTrace checks that the claim's creation is one trace holding
// spans of the watcher, binder, renderer and secrets services, and API
// calls of the three that make them.
func testClaimTrace(t *testing.T, recv *otlpReceiver, uid string) {
	var root otlpSpan
	framework.Eventually(t, time.Minute, func() error {
		roots := recv.find(func(s otlpSpan) bool {
			return s.name == "watch TraceDB" && s.attrs["k8s.uid"] == uid && s.attrs["loom.event.type"] == "EVENT_TYPE_ADDED"
		})
		if len(roots) == 0 {
			return errors.New("no watcher span for the claim's ADDED event yet")
		}
		root = roots[0]
		return nil
	})
	if root.parentID != "" {
		t.Errorf("the claim's first watch span has a parent %s; want it to start the trace", root.parentID)
	}
	var trace []otlpSpan
	framework.Eventually(t, time.Minute, func() error {
		trace = recv.find(func(s otlpSpan) bool { return s.traceID == root.traceID })
		var missing []string
		for _, svc := range telemetryServices {
			if !slices.ContainsFunc(trace, func(s otlpSpan) bool { return s.service == svc }) {
				missing = append(missing, "a span of "+svc)
			}
		}
		for _, want := range []struct{ service, prefix string }{
			{"binder", "k8s create xtracedbs"}, // the binder creates the XR (name-then-create)
			{"renderer", "k8s apply nopresources"},
			{"renderer", "k8s apply xtracedbs/status"},
			{"secrets", "k8s "},
			{"binder", "handle binder"},
			{"renderer", "handle renderer"},
			{"secrets", "handle secrets"},
			{"watcher", "watch XTraceDB"},
			{"watcher", "watch NopResource"},
		} {
			if !slices.ContainsFunc(trace, func(s otlpSpan) bool {
				return s.service == want.service && strings.HasPrefix(s.name, want.prefix)
			}) {
				missing = append(missing, fmt.Sprintf("%s span %q", want.service, want.prefix))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("trace %s lacks %s; it has:\n%s", root.traceID, strings.Join(missing, ", "), describeSpans(trace))
		}
		return nil
	})

	// Every span's parent is in the trace: one connected tree.
	ids := map[string]bool{}
	for _, s := range trace {
		ids[s.spanID] = true
	}
	framework.Eventually(t, 30*time.Second, func() error {
		trace = recv.find(func(s otlpSpan) bool { return s.traceID == root.traceID })
		for _, s := range trace {
			ids[s.spanID] = true
		}
		for _, s := range trace {
			if s.parentID != "" && !ids[s.parentID] {
				return fmt.Errorf("span %s %q of %s has parent %s, which is not in the trace", s.spanID, s.name, s.service, s.parentID)
			}
		}
		return nil
	})
	t.Logf("the claim's trace %s has %d spans:\n%s", root.traceID, len(trace), describeSpans(trace))
}

func describeSpans(spans []otlpSpan) string {
	counts := map[string]int{}
	for _, s := range spans {
		counts[s.service+" | "+s.name]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %3d  %s\n", counts[k], k)
	}
	return b.String()
}

// dashboardMetricsMayBeZero are gauges the dashboard queries that a quiet
// stack may report as zero.
var dashboardMetricsMayBeZero = map[string]bool{
	"loom_bus_consumer_pending":      true,
	"loom_bus_consumer_ack_pending":  true,
	"loom_bus_consumer_redelivered":  true,
	"loom_binder_references_waiting": true,
	// By tenant, at zero once the tenant's providers caught up.
	"loom_renderer_admission_outstanding": true,
	"loom_renderer_admission_waiting":     true,
}

// notServedByLoom reports whether the dashboard's metric name is served by
// kube-apiserver or NATS (through an exporter), not by Loom's services:
// TestObserve checks those against a real Prometheus.
func notServedByLoom(name string) bool {
	return strings.HasPrefix(name, "apiserver_") || strings.HasPrefix(name, "gnatsd_")
}

// metricSelector finds the metric names in a PromQL expression: the
// dashboard writes every selector with braces.
var metricSelector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)

// dashboardMetrics reads the names of the metrics the dashboard queries.
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	root, err := stack.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(root + "/deploy/helm/loom/dashboards/loom.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("cannot decode the dashboard: %v", err)
	}
	set := map[string]bool{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range metricSelector.FindAllStringSubmatch(tg.Expr, -1) {
				if notServedByLoom(m[1]) {
					continue
				}
				set[m[1]] = true
			}
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) < 10 {
		t.Fatalf("found only %d metrics in the dashboard: %v", len(names), names)
	}
	return names
}

// scrape reads a /metrics endpoint into metric name -> sum of its samples.
func scrape(ctx context.Context, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", addr, rsp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(rsp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(line, '{'); i >= 0 && i < len(name) {
			name = line[:i]
			rest = line[strings.LastIndexByte(line, '}')+2:]
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	return out, sc.Err()
}

// testDashboardMetrics scrapes every service's /metrics and finds every
// metric the dashboard queries, non-zero unless it is a gauge that may
// rightly be zero.
func testDashboardMetrics(t *testing.T, st *stack.Stack) {
	names := dashboardMetrics(t)
	framework.Eventually(t, 2*time.Minute, func() error {
		total := map[string]float64{}
		seen := map[string][]string{}
		for _, svc := range telemetryServices {
			addr := st.ServiceHealthAddr(svc, 0)
			if addr == "" {
				return fmt.Errorf("no health address for %s", svc)
			}
			m, err := scrape(t.Context(), addr)
			if err != nil {
				return err
			}
			for n, v := range m {
				total[n] += v
				seen[n] = append(seen[n], svc)
			}
		}
		var problems []string
		for _, n := range names {
			switch {
			case len(seen[n]) == 0:
				problems = append(problems, n+" is missing")
			case total[n] == 0 && !dashboardMetricsMayBeZero[n]:
				problems = append(problems, n+" is zero")
			}
		}
		if len(problems) > 0 {
			return errors.New(strings.Join(problems, "; "))
		}
		for _, n := range names {
			t.Logf("%-50s %12g  (%s)", n, total[n], strings.Join(seen[n], ", "))
		}
		return nil
	})
}
