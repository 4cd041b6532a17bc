//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/stack"
	"github.com/loomxr/loom/pkg/testing/poll"
	"github.com/loomxr/loom/pkg/watchreq"
)

// clusterReport is what TestNATSCluster measured; LOOM_NATS_CLUSTER_REPORT
// names a file to write it to as JSON.
type clusterReport struct {
	// Claims is the number of claims of each phase.
	Claims int `json:"claims"`
	// SecondsWithoutLoss is the time from the first claim's creation to
	// every claim Ready, with all three servers up.
	SecondsWithoutLoss float64 `json:"seconds_without_loss"`
	// SecondsWithLoss is the same for the second phase, during which the
	// leader of the busiest stream was killed and started 20s later.
	SecondsWithLoss float64 `json:"seconds_with_loss"`
	// KilledServer and KilledStream name the server killed and the stream
	// it led.
	KilledServer string `json:"killed_server"`
	KilledStream string `json:"killed_stream"`
	// KilledAfterSeconds is when, in the second phase, the server was killed.
	KilledAfterSeconds float64 `json:"killed_after_seconds"`
	// NewLeader is the stream's leader once the server was back.
	NewLeader string `json:"new_leader"`
}

var (
	clusterClaimGVR = schema.GroupVersionResource{Group: "bench.loom.dev", Version: "v1alpha1", Resource: "benchdbs"}
	clusterXRGVR    = schema.GroupVersionResource{Group: "bench.loom.dev", Version: "v1alpha1", Resource: "xbenchdbs"}
)

// clusterDown is how long the killed NATS server stays down.
const clusterDown = 20 * time.Second

// TestNATSCluster runs Loom on a three-server JetStream cluster. It checks
// that every JetStream object Loom keeps has three replicas, converges
// LOOM_NATS_CLUSTER_CLAIMS claims (default 100; `make e2e-cluster` runs
// 500) of the benchmark's Composition with every server up, then as many
// again while the leader of Loom's busiest work stream is killed and
// started 20 seconds later. Every claim must become Ready with exactly one
// XR, nothing may be dead-lettered, and no service may have been restarted.
func TestNATSCluster(t *testing.T) {
	n := 100
	if v := os.Getenv("LOOM_NATS_CLUSTER_CLAIMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 4 {
			t.Fatalf("LOOM_NATS_CLUSTER_CLAIMS=%q: want a number of claims, at least 4", v)
		}
	}
	s, dyn := clusterStack(t)
	ctx := t.Context()
	nc, err := nats.Connect(s.NATSURL(), nats.Name("e2e-natscluster"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	clusterCheckReplicas(t, js)
	pids := clusterPIDs(s)
	t.Logf("service PIDs: %v", pids)

	setup, err := stack.ReadManifests(filepath.Join("bench", "testdata", "setup.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"natscluster-a", "natscluster-b"} {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind("Namespace")
		o.SetName(ns)
		setup = append(setup, o)
	}
	actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	_, err = s.ApplyObjects(actx, setup...)
	cancel()
	if err != nil {
		t.Fatal(err)
	}

	rep := clusterReport{Claims: n}
	d, err := clusterConverge(ctx, t, dyn, "natscluster-a", n, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep.SecondsWithoutLoss = d.Seconds()
	t.Logf("%d claims Ready in %s with every NATS server up", n, d.Round(100*time.Millisecond))

	var (
		faultErr  error
		faultDone = make(chan struct{})
		started   time.Time
	)
	fault := func() {
		defer close(faultDone)
		rep.KilledAfterSeconds = time.Since(started).Seconds()
		faultErr = clusterKillLeader(ctx, t, s, js, &rep)
	}
	started = time.Now()
	d, err = clusterConverge(ctx, t, dyn, "natscluster-b", n, fault)
	<-faultDone
	if err != nil {
		t.Fatal(err)
	}
	if faultErr != nil {
		t.Fatal(faultErr)
	}
	rep.SecondsWithLoss = d.Seconds()
	t.Logf("%d claims Ready in %s while NATS server %s (leader of %s) was killed after %.1fs and started %s later",
		n, d.Round(100*time.Millisecond), rep.KilledServer, rep.KilledStream, rep.KilledAfterSeconds, clusterDown)

	// With the server back: still converged, nothing dead-lettered, one XR
	// per claim, every replica current, no service restarted.
	for _, ns := range []string{"natscluster-a", "natscluster-b"} {
		if ready, total, err := clusterReady(ctx, dyn, ns); err != nil || ready != n || total != n {
			t.Errorf("namespace %s: %d of %d claims Ready (want %d), err %v", ns, ready, total, n, err)
		}
	}
	clusterCheckXRs(t, ctx, dyn, 2*n)
	clusterCheckDLQ(t, ctx, js)
	clusterCheckCurrent(t, ctx, js)
	if got := clusterPIDs(s); !clusterSamePIDs(got, pids) {
		t.Errorf("service PIDs changed (a service was restarted): before %v, after %v", pids, got)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	t.Logf("report:\n%s", b)
	if p := os.Getenv("LOOM_NATS_CLUSTER_REPORT"); p != "" {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// clusterStack starts a stack of its own on a three-server NATS cluster and
// stops it when t ends, keeping its state folder if t failed.
func clusterStack(t *testing.T) (*stack.Stack, dynamic.Interface) {
	t.Helper()
	dir, err := os.MkdirTemp("", "loom-natscluster-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{StateDir: dir, NATSServers: 3, Log: t.Output()})
	if err != nil {
		t.Fatalf("cannot start the stack: %v (state in %s)", err, dir)
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
	if got := s.BusReplicas(); got != 3 {
		t.Fatalf("BusReplicas: got %d, want 3", got)
	}
	rc := rest.CopyConfig(s.RESTConfig())
	rc.QPS, rc.Burst = 200, 400
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return s, dyn
}

// clusterPIDs returns the process id of every service replica.
func clusterPIDs(s *stack.Stack) map[string]int {
	out := map[string]int{}
	for _, svc := range stack.DefaultServices {
		out[svc] = s.ServicePID(svc, 0)
	}
	return out
}

// clusterSamePIDs reports whether a and b name the same running processes.
func clusterSamePIDs(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v || v == 0 {
			return false
		}
	}
	return true
}

// clusterStreams are every stream Loom keeps, key-value buckets included.
func clusterStreams() []string {
	out := []string{bus.DeadLetterStream, "KV_" + bus.MembersBucket, "KV_" + bus.LeasesBucket, "KV_" + watchreq.Bucket}
	for _, svc := range bus.Services {
		out = append(out, bus.StreamName(svc))
	}
	return out
}

// clusterCheckReplicas checks that every stream, bucket and consumer of the
// bus has three replicas.
func clusterCheckReplicas(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, name := range clusterStreams() {
		// A worker creates the urgent, resync and overflow consumers of a
		// partition when it first takes the partition, which may come
		// after the service reports ready: wait for them.
		err := poll.Wait(ctx, func(ctx context.Context) error {
			// Each attempt has its own deadline: a JetStream API request
			// that no server answers (the cluster's meta leader not
			// elected yet, say) would otherwise use up the whole minute
			// in one attempt.
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			st, err := js.Stream(ctx, name)
			if err != nil {
				return err
			}
			if info := st.CachedInfo(); info.Config.Replicas != 3 || info.Cluster == nil || info.Cluster.Leader == "" {
				return fmt.Errorf("%d replicas, cluster %+v; want 3 replicas and a leader", info.Config.Replicas, info.Cluster)
			}
			consumers := 0
			for info := range st.ListConsumers(ctx).Info() {
				consumers++
				if info.Config.Durable != "" && info.Config.Replicas != 3 {
					return fmt.Errorf("consumer %s: %d replicas, want 3", info.Name, info.Config.Replicas)
				}
			}
			// Four lanes per partition: urgent, normal, resync and
			// overflow.
			if slices.Contains(bus.Services, svcOfStream(name)) && consumers != 4*bus.DefaultPartitions {
				return fmt.Errorf("%d consumers, want %d (four per partition)", consumers, 4*bus.DefaultPartitions)
			}
			return nil
		}, poll.Every(500*time.Millisecond))
		if err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}
}

func svcOfStream(name string) string {
	for _, svc := range bus.Services {
		if bus.StreamName(svc) == name {
			return svc
		}
	}
	return ""
}

// clusterConverge creates n claims in namespace ns and returns how long they
// took, from the first creation, to be Ready. If fault is not nil it is
// started in its own goroutine once a quarter of the claims exist (creation
// goes on meanwhile); the caller waits for it.
func clusterConverge(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns string, n int, fault func()) (time.Duration, error) {
	start := time.Now()
	var (
		created  atomic.Int64
		once     sync.Once
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if err := clusterCreateClaim(ctx, dyn, ns, i); err != nil {
					errMu.Lock()
					firstErr = cmpOr(firstErr, err)
					errMu.Unlock()
				}
				if created.Add(1) >= int64(n/4) && fault != nil {
					once.Do(func() { go fault() })
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	t.Logf("%s: %d claims created in %s", ns, n, time.Since(start).Round(100*time.Millisecond))
	deadline := time.Now().Add(20 * time.Minute)
	lastLog := time.Now()
	for {
		ready, total, err := clusterReady(ctx, dyn, ns)
		if err == nil && ready == n && total == n {
			return time.Since(start), nil
		}
		if time.Since(lastLog) > 15*time.Second {
			lastLog = time.Now()
			t.Logf("%s: %s: %d/%d claims Ready (err %v)", ns, time.Since(start).Round(time.Second), ready, n, err)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s: only %d of %d claims Ready after %s", ns, ready, n, time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func clusterCreateClaim(ctx context.Context, dyn dynamic.Interface, ns string, i int) error {
	name := fmt.Sprintf("db-%04d", i)
	c := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bench.loom.dev/v1alpha1",
		"kind":       "BenchDB",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"parameters":                 map[string]any{"storageGB": int64(1 + i%50), "size": []string{"small", "large"}[i%2]},
			"writeConnectionSecretToRef": map[string]any{"name": name + "-conn"},
		},
	}}
	ri := dyn.Resource(clusterClaimGVR).Namespace(ns)
	// The claim's CRD may still be on its way right after setup.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := poll.Wait(cctx, func(ctx context.Context) error {
		_, err := ri.Create(ctx, c, metav1.CreateOptions{})
		if kerrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}, poll.Every(500*time.Millisecond)); err != nil {
		return fmt.Errorf("cannot create claim %s/%s: %w", ns, name, err)
	}
	return nil
}

// clusterReady counts the claims in ns, and those Ready.
func clusterReady(ctx context.Context, dyn dynamic.Interface, ns string) (ready, total int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l, err := dyn.Resource(clusterClaimGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	for i := range l.Items {
		conds, _, _ := unstructured.NestedSlice(l.Items[i].Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				ready++
			}
		}
	}
	return ready, len(l.Items), nil
}

// clusterKillLeader kills the NATS server leading Loom's busiest work stream
// (the one that has stored the most messages), starts it again clusterDown
// later, and records what it did in rep.
func clusterKillLeader(ctx context.Context, t *testing.T, s *stack.Stack, js jetstream.JetStream, rep *clusterReport) error {
	var (
		busiest string
		most    uint64
		leader  string
	)
	for _, svc := range bus.Services {
		ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := js.Stream(ictx, bus.StreamName(svc))
		cancel()
		if err != nil {
			return fmt.Errorf("cannot read stream %s: %w", bus.StreamName(svc), err)
		}
		info := st.CachedInfo()
		if info.State.LastSeq >= most && info.Cluster != nil {
			busiest, most, leader = info.Config.Name, info.State.LastSeq, info.Cluster.Leader
		}
	}
	idx := -1
	for i := range len(s.NATSURLs()) {
		if s.NATSServerName(i) == leader {
			idx = i
		}
	}
	if idx < 0 {
		return fmt.Errorf("the leader %q of %s is none of the stack's NATS servers", leader, busiest)
	}
	rep.KilledServer, rep.KilledStream = leader, busiest
	t.Logf("killing NATS server %s, leader of %s (%d messages so far)", leader, busiest, most)
	if err := s.KillNATSServer(idx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(clusterDown):
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.StartNATSServer(sctx, idx); err != nil {
		return err
	}
	t.Logf("NATS server %s started again", leader)
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if st, err := js.Stream(ictx, busiest); err == nil && st.CachedInfo().Cluster != nil {
		rep.NewLeader = st.CachedInfo().Cluster.Leader
	}
	return nil
}

// clusterCheckXRs checks that there are want XRs, one per claim.
func clusterCheckXRs(t *testing.T, ctx context.Context, dyn dynamic.Interface, want int) {
	t.Helper()
	l, err := dyn.Resource(clusterXRGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("cannot list XRs: %v", err)
		return
	}
	per := map[string]int{}
	for i := range l.Items {
		ns, _, _ := unstructured.NestedString(l.Items[i].Object, "spec", "claimRef", "namespace")
		name, _, _ := unstructured.NestedString(l.Items[i].Object, "spec", "claimRef", "name")
		per[ns+"/"+name]++
	}
	if len(l.Items) != want || len(per) != want {
		t.Errorf("%d XRs for %d claims, want %d for %d", len(l.Items), len(per), want, want)
	}
	for claim, k := range per {
		if k != 1 {
			t.Errorf("claim %s has %d XRs, want 1", claim, k)
		}
	}
}

// clusterCheckDLQ checks that nothing was dead-lettered.
func clusterCheckDLQ(t *testing.T, ctx context.Context, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, bus.DeadLetterStream)
	if err != nil {
		t.Errorf("cannot read %s: %v", bus.DeadLetterStream, err)
		return
	}
	if n := st.CachedInfo().State.Msgs; n != 0 {
		dls, _ := bus.ListDeadLetters(ctx, js, "")
		t.Errorf("%s holds %d messages, want none: %+v", bus.DeadLetterStream, n, dls)
	}
}

// clusterCheckCurrent waits until every replica of every stream is current
// again after the restart.
func clusterCheckCurrent(t *testing.T, ctx context.Context, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	for {
		last = nil
		for _, name := range clusterStreams() {
			st, err := js.Stream(ctx, name)
			if err != nil {
				last = err
				break
			}
			c := st.CachedInfo().Cluster
			if c == nil || c.Leader == "" || len(c.Replicas) != 2 {
				last = fmt.Errorf("stream %s: cluster %+v", name, c)
				break
			}
			for _, r := range c.Replicas {
				if !r.Current || r.Offline {
					last = fmt.Errorf("stream %s: replica %s is not current", name, r.Name)
				}
			}
		}
		if last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("replicas not current after the restart: %v", errors.Join(ctx.Err(), last))
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}
