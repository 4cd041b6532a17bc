//go:build e2e

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/stack"
	"github.com/loomxr/loom/pkg/testing/poll"
)

// Report is what a chaos run measured, written as JSON with -out.
type Report struct {
	// Claims is how many claims were created.
	Claims int `json:"claims"`
	// ClaimsReady is how many claims had Ready=True at the end.
	ClaimsReady int `json:"claims_ready"`
	// MaxXRsPerClaim is the most XRs whose claimRef names one claim.
	MaxXRsPerClaim int `json:"max_xrs_per_claim"`
	// OrphanedComposed counts composed resources whose controlling XR is
	// gone (or that have none).
	OrphanedComposed int `json:"orphaned_composed"`
	// UnboundXRs counts XRs without a claim that points back at them.
	UnboundXRs int `json:"unbound_xrs"`
	// ClaimsWithWrongSecret counts claims whose connection Secret is
	// missing or does not hold exactly their own XR's details.
	ClaimsWithWrongSecret int `json:"claims_with_wrong_secret"`
	// UnresolvedReferences counts composed resources with a network
	// selector whose network value is not their own XR's network's
	// selfLink (the binder's reference resolution, the ReferenceRule of
	// testdata/setup.yaml).
	UnresolvedReferences int `json:"unresolved_references"`
	// DeadLetters is how many messages the dead-letter stream holds.
	DeadLetters int `json:"dead_letters"`
	// DeadLetterReasons counts them by service and the reason's first
	// words (names and numbers left out), so that a run says why.
	DeadLetterReasons map[string]int `json:"dead_letter_reasons,omitempty"`
	// Kills is how many Loom service replicas got SIGKILL.
	Kills int `json:"kills"`
	// NATSRestarts and APIServerRestarts count the restarts done.
	NATSRestarts      int `json:"nats_restarts"`
	APIServerRestarts int `json:"apiserver_restarts"`
	// WatcherMirrorCrashes counts watcher replicas that exited between
	// writing a change to the object mirror and publishing its events (a
	// fault armed once per wave of claims; see watch.WithCrashFile).
	WatcherMirrorCrashes int `json:"watcher_mirror_crashes"`
	// SecondsToConverge is from the first claim's creation until every
	// invariant held with every fault done; when Converged is false, until
	// the run gave up.
	SecondsToConverge float64 `json:"seconds_to_converge"`
	Converged         bool    `json:"converged"`
	// SecondsToClaimsReady is from the first claim's creation until every
	// claim was first seen Ready (Secrets may still be missing then).
	SecondsToClaimsReady float64 `json:"seconds_to_claims_ready"`
	// Replicas is the replica count of each Loom service.
	Replicas int `json:"replicas"`
	// ComposedResources and XRs are the totals seen at the end.
	ComposedResources int `json:"composed_resources"`
	XRs               int `json:"xrs"`
}

// services are the Loom services the run kills at random.
var services = []string{"watcher", "renderer", "binder", "secrets"}

const (
	replicas    = 2
	namespaces  = 10
	composedPer = 3 // NopResources per XR in testdata/setup.yaml
	group       = "chaos.loom.dev"
)

var (
	claimGVR = schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "chaosdbs"}
	xrGVR    = schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "xchaosdbs"}
	nopGVR   = schema.GroupVersionResource{Group: "nop.crossplane.io", Version: "v1alpha1", Resource: "nopresources"}
)

// TestChaos creates -claims claims on a stack with every Loom service at two
// replicas, injects faults while they converge, and checks that every
// claim ends Ready with exactly one XR, its own connection Secret, and no
// orphaned composed resource.
func TestChaos(t *testing.T) {
	n := *flagClaims
	crashFile := filepath.Join(t.TempDir(), "watcher-crash")
	s, kube, dyn := startStack(t, "LOOM_WATCHER_FAULT_CRASH_FILE="+crashFile)
	ctx := t.Context()

	setup, err := stack.ReadManifests(filepath.Join("testdata", "setup.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range namespaces {
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(namespace(i))
		setup = append(setup, ns)
	}
	actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	_, err = s.ApplyObjects(actx, setup...)
	cancel()
	if err != nil {
		t.Fatal(err)
	}

	rep := Report{Claims: n, Replicas: replicas}
	start := time.Now()
	var kills atomic.Int64
	stopKills := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { killLoop(t, s, stopKills, &kills) })
	defer func() {
		select {
		case <-stopKills:
		default:
			close(stopKills)
		}
		wg.Wait()
	}()

	// Claims come in three waves, the NATS restart right after the first
	// and the API server restart right after the second, so each restart
	// hits claims in flight whatever their number.
	waves := []int{0, n * 4 / 10, n * 7 / 10, n}
	faults := []struct {
		what  string
		do    func(context.Context) error
		count *int
	}{
		{"NATS", s.RestartNATS, &rep.NATSRestarts},
		{"kube-apiserver", s.RestartAPIServer, &rep.APIServerRestarts},
	}
	for w := range 3 {
		if err := createClaims(ctx, dyn, waves[w], waves[w+1]); err != nil {
			t.Fatalf("cannot create claims: %v", err)
		}
		t.Logf("claims %d to %d created (%s)", waves[w], waves[w+1]-1, time.Since(start).Round(time.Millisecond))
		// A watcher dies after writing a change to the mirror, before
		// publishing it: the change must still reach the workers.
		if *flagMirrorCrash {
			if err := crashWatcherAfterMirrorWrite(ctx, crashFile); err != nil {
				t.Fatal(err)
			}
			rep.WatcherMirrorCrashes++
		}
		if w < len(faults) {
			f := faults[w]
			t.Logf("restarting %s", f.what)
			rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			err := f.do(rctx)
			cancel()
			if err != nil {
				t.Fatalf("cannot restart %s: %v", f.what, err)
			}
			*f.count++
		}
	}

	deadline := time.Now().Add(*flagConverge)
	lastLog := time.Time{}
	var last Report
	var problems []string
	for {
		obs, probs, err := observe(ctx, s, kube, dyn, n)
		if err == nil {
			last, problems = obs, probs
			if rep.SecondsToClaimsReady == 0 && obs.ClaimsReady == n {
				rep.SecondsToClaimsReady = time.Since(start).Seconds()
			}
		}
		if err == nil && len(problems) == 0 {
			rep.Converged = true
			break
		}
		if time.Since(lastLog) > 15*time.Second {
			lastLog = time.Now()
			t.Logf("%s: %d/%d claims Ready, %d XRs, %d composed, %d kills, %d problems%s",
				time.Since(start).Round(time.Second), last.ClaimsReady, n, last.XRs, last.ComposedResources, kills.Load(), len(problems), firstProblems(problems, 3))
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
	rep.SecondsToConverge = time.Since(start).Seconds()
	close(stopKills)
	wg.Wait()

	// Kills are over: what converged must stay converged; the counts are
	// taken afresh.
	final, finalProblems, err := observe(ctx, s, kube, dyn, n)
	if err != nil {
		t.Fatalf("cannot observe the stack: %v", err)
	}
	final.Kills = int(kills.Load())
	final.NATSRestarts, final.APIServerRestarts = rep.NATSRestarts, rep.APIServerRestarts
	final.WatcherMirrorCrashes = rep.WatcherMirrorCrashes
	final.SecondsToConverge, final.Converged, final.SecondsToClaimsReady = rep.SecondsToConverge, rep.Converged, rep.SecondsToClaimsReady
	final.Replicas = replicas
	b, err := json.MarshalIndent(final, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", b)
	if *flagOut != "" {
		if err := os.MkdirAll(filepath.Dir(*flagOut), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*flagOut, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !rep.Converged {
		t.Errorf("not converged within %s: %d problems%s", *flagConverge, len(finalProblems), firstProblems(finalProblems, 20))
	}
	var errs []error
	check := func(name string, got, want int) {
		if got != want {
			errs = append(errs, fmt.Errorf("%s = %d, want %d", name, got, want))
		}
	}
	check("claims_ready", final.ClaimsReady, n)
	check("max_xrs_per_claim", final.MaxXRsPerClaim, 1)
	check("orphaned_composed", final.OrphanedComposed, 0)
	check("unbound_xrs", final.UnboundXRs, 0)
	check("claims_with_wrong_secret", final.ClaimsWithWrongSecret, 0)
	check("unresolved_references", final.UnresolvedReferences, 0)
	check("nats_restarts", final.NATSRestarts, 1)
	check("apiserver_restarts", final.APIServerRestarts, 1)
	if final.Kills == 0 {
		errs = append(errs, errors.New("no Loom process was killed"))
	}
	if err := errors.Join(errs...); err != nil {
		t.Errorf("invariants broken:\n%v%s", err, firstProblems(finalProblems, 20))
	}
}

// startStack starts a stack of its own, every Loom service at two
// replicas, and stops it when t ends (keeping its state folder, logs
// included, if t failed).
// crashWatcherAfterMirrorWrite arms the watchers' crash fault and waits
// until a watcher replica took it: it removes the file just before it
// exits, with a live change written to the mirror and not published.
func crashWatcherAfterMirrorWrite(ctx context.Context, file string) error {
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		return fmt.Errorf("cannot arm the watcher crash fault: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := poll.Wait(wctx, func(context.Context) error {
		if _, err := os.Stat(file); err == nil {
			return errors.New("no watcher has crashed at the armed fault yet")
		}
		return nil
	}, poll.Every(100*time.Millisecond)); err != nil {
		return fmt.Errorf("the watcher crash fault was never taken (no live change reached a watcher?): %w", err)
	}
	return nil
}

func startStack(t *testing.T, env ...string) (*stack.Stack, kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	dir, err := os.MkdirTemp("", "loom-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	reps := map[string]int{}
	for _, s := range services {
		reps[s] = replicas
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var progress = os.Stderr
	s, err := stack.Start(ctx, stack.Options{StateDir: dir, Replicas: reps, Log: progress, Env: env})
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
	rc := rest.CopyConfig(s.RESTConfig())
	rc.QPS, rc.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return s, kube, dyn
}

// killLoop sends SIGKILL to a random Loom service replica every
// -kill-every until stop closes. The stack restarts what it kills.
func killLoop(t *testing.T, s *stack.Stack, stop <-chan struct{}, kills *atomic.Int64) {
	tick := time.NewTicker(*flagKillEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		svc := services[rand.IntN(len(services))]
		r := rand.IntN(replicas)
		if s.ServicePID(svc, r) == 0 {
			continue // still restarting from an earlier kill
		}
		if err := s.KillService(svc, r); err != nil {
			t.Logf("cannot kill %s-%d: %v", svc, r, err)
			continue
		}
		kills.Add(1)
	}
}

func namespace(i int) string { return fmt.Sprintf("chaos-%02d", i) }

func claimName(i int) string { return fmt.Sprintf("db-%04d", i) }

// createClaims creates claims from to to-1 spread over the namespaces, each
// asking for its connection Secret <name>-conn. It retries what fails (the
// API server restarts meanwhile); AlreadyExists means an earlier try worked.
func createClaims(ctx context.Context, dyn dynamic.Interface, from, to int) error {
	work := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if err := createClaim(ctx, dyn, i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := from; i < to; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func createClaim(ctx context.Context, dyn dynamic.Interface, i int) error {
	c := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1alpha1",
		"kind":       "ChaosDB",
		"metadata":   map[string]any{"name": claimName(i), "namespace": namespace(i % namespaces)},
		"spec": map[string]any{
			"parameters":                 map[string]any{"storageGB": int64(1 + i%50), "size": []string{"small", "large"}[i%2]},
			"writeConnectionSecretToRef": map[string]any{"name": claimName(i) + "-conn"},
		},
	}}
	ri := dyn.Resource(claimGVR).Namespace(c.GetNamespace())
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := poll.Wait(cctx, func(ctx context.Context) error {
		_, err := ri.Create(ctx, c, metav1.CreateOptions{})
		if kerrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}, poll.Every(500*time.Millisecond)); err != nil {
		return fmt.Errorf("cannot create claim %s/%s: %w", c.GetNamespace(), c.GetName(), err)
	}
	return nil
}

// observe reads every claim, XR, composed resource and claim Secret and
// counts what the report holds, with a line per broken invariant.
func observe(ctx context.Context, s *stack.Stack, kube kubernetes.Interface, dyn dynamic.Interface, n int) (Report, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep := Report{Claims: n}
	var problems []string
	claims, err := dyn.Resource(claimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return rep, nil, fmt.Errorf("cannot list claims: %w", err)
	}
	xrs, err := dyn.Resource(xrGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return rep, nil, fmt.Errorf("cannot list XRs: %w", err)
	}
	nops, err := dyn.Resource(nopGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return rep, nil, fmt.Errorf("cannot list composed resources: %w", err)
	}
	secrets := map[string]*corev1.Secret{}
	for i := range namespaces {
		l, err := kube.CoreV1().Secrets(namespace(i)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return rep, nil, fmt.Errorf("cannot list Secrets: %w", err)
		}
		for j := range l.Items {
			secrets[l.Items[j].Namespace+"/"+l.Items[j].Name] = &l.Items[j]
		}
	}
	rep.XRs, rep.ComposedResources = len(xrs.Items), len(nops.Items)

	claimByKey := map[string]*unstructured.Unstructured{}
	for i := range claims.Items {
		c := &claims.Items[i]
		claimByKey[c.GetNamespace()+"/"+c.GetName()] = c
	}
	if len(claims.Items) != n {
		problems = append(problems, fmt.Sprintf("%d claims exist, want %d", len(claims.Items), n))
	}

	xrUIDs := map[string]bool{}
	xrsPerClaim := map[string]int{}
	for i := range xrs.Items {
		xr := &xrs.Items[i]
		xrUIDs[string(xr.GetUID())] = true
		ns, _, _ := unstructured.NestedString(xr.Object, "spec", "claimRef", "namespace")
		name, _, _ := unstructured.NestedString(xr.Object, "spec", "claimRef", "name")
		key := ns + "/" + name
		if name == "" {
			rep.UnboundXRs++
			problems = append(problems, fmt.Sprintf("XR %s has no claimRef", xr.GetName()))
			continue
		}
		xrsPerClaim[key]++
		var ref string
		c := claimByKey[key]
		if c != nil {
			ref, _, _ = unstructured.NestedString(c.Object, "spec", "resourceRef", "name")
		}
		if ref != xr.GetName() {
			rep.UnboundXRs++
			problems = append(problems, fmt.Sprintf("XR %s claims %s, whose resourceRef is %q", xr.GetName(), key, ref))
		}
	}
	for key, k := range xrsPerClaim {
		rep.MaxXRsPerClaim = max(rep.MaxXRsPerClaim, k)
		if k > 1 {
			problems = append(problems, fmt.Sprintf("claim %s has %d XRs", key, k))
		}
	}
	composedPerXR := map[string]int{}
	selfLinks := map[string]string{}                     // the network's, by XR UID
	sources := map[string][]*unstructured.Unstructured{} // resources with a network selector, by XR UID
	for i := range nops.Items {
		o := &nops.Items[i]
		ctrl := metav1.GetControllerOf(o)
		if ctrl == nil || !xrUIDs[string(ctrl.UID)] {
			rep.OrphanedComposed++
			problems = append(problems, fmt.Sprintf("composed resource %s has no live controlling XR", o.GetName()))
			continue
		}
		composedPerXR[string(ctrl.UID)]++
		if o.GetLabels()["chaos.loom.dev/role"] == "network" {
			selfLinks[string(ctrl.UID)], _, _ = unstructured.NestedString(o.Object, "status", "atProvider", "fields", "selfLink")
		}
		if _, ok, _ := unstructured.NestedMap(o.Object, "spec", "forProvider", "fields", "networkSelector"); ok {
			sources[string(ctrl.UID)] = append(sources[string(ctrl.UID)], o)
		}
	}
	for xr, os := range sources {
		for _, o := range os {
			got, _, _ := unstructured.NestedString(o.Object, "spec", "forProvider", "fields", "network")
			if want := selfLinks[xr]; got == "" || got != want {
				rep.UnresolvedReferences++
				problems = append(problems, fmt.Sprintf("composed resource %s: spec.forProvider.fields.network is %q, want its network's selfLink %q", o.GetName(), got, want))
			}
		}
	}

	for key, c := range claimByKey {
		if status(c, "Ready") == "True" {
			rep.ClaimsReady++
		} else {
			problems = append(problems, fmt.Sprintf("claim %s is not Ready: %s", key, condition(c, "Ready")))
		}
		xrName, _, _ := unstructured.NestedString(c.Object, "spec", "resourceRef", "name")
		if err := checkSecret(secrets, c, xrName); err != nil {
			rep.ClaimsWithWrongSecret++
			problems = append(problems, fmt.Sprintf("claim %s: %v", key, err))
		}
	}
	for i := range xrs.Items {
		if k := composedPerXR[string(xrs.Items[i].GetUID())]; k != composedPer {
			problems = append(problems, fmt.Sprintf("XR %s controls %d composed resources, want %d", xrs.Items[i].GetName(), k, composedPer))
		}
	}
	dl, err := deadLetters(ctx, s.NATSURL())
	if err != nil {
		return rep, nil, err
	}
	rep.DeadLetters = dl
	if dl > 0 {
		reasons, err := deadLetterReasons(ctx, s.NATSURL(), dl)
		if err != nil {
			reasons["(not all read: "+err.Error()+")"]++
		}
		rep.DeadLetterReasons = reasons
	}
	sort.Strings(problems)
	return rep, problems, nil
}

// checkSecret checks that the claim's connection Secret holds exactly the
// details of the claim's own XR (testdata/setup.yaml says which).
func checkSecret(secrets map[string]*corev1.Secret, c *unstructured.Unstructured, xrName string) error {
	name, _, _ := unstructured.NestedString(c.Object, "spec", "writeConnectionSecretToRef", "name")
	sec := secrets[c.GetNamespace()+"/"+name]
	if sec == nil {
		return fmt.Errorf("connection Secret %s does not exist", name)
	}
	if xrName == "" {
		return errors.New("no resourceRef")
	}
	want := map[string]string{
		"username": "chaos",
		"password": "chaos-s3cr3t",
		"endpoint": "projects/chaos/global/networks/" + xrName,
	}
	got := map[string]string{}
	for k, v := range sec.Data {
		got[k] = string(v)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("connection Secret %s holds %v, want %v", name, keysAndValues(got), keysAndValues(want))
	}
	return nil
}

func keysAndValues(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

// deadLetters returns how many messages the dead-letter stream holds (zero
// when it does not exist yet).
func deadLetters(ctx context.Context, url string) (int, error) {
	nc, err := nats.Connect(url, nats.Name("chaos-test"), nats.Timeout(5*time.Second))
	if err != nil {
		return 0, fmt.Errorf("cannot connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, fmt.Errorf("cannot open JetStream: %w", err)
	}
	st, err := js.Stream(ctx, bus.DeadLetterStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cannot open stream %s: %w", bus.DeadLetterStream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("cannot read stream %s: %w", bus.DeadLetterStream, err)
	}
	return int(info.State.Msgs), nil
}

// deadLetterReasons reads the first n messages of the dead-letter stream and
// counts them by the service that gave up and the kind of reason: its text
// up to the first colon, digits dropped, at most 60 characters.
func deadLetterReasons(ctx context.Context, url string, n int) (map[string]int, error) {
	out := map[string]int{}
	nc, err := nats.Connect(url, nats.Name("chaos-test"), nats.Timeout(5*time.Second))
	if err != nil {
		return out, fmt.Errorf("cannot connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return out, fmt.Errorf("cannot open JetStream: %w", err)
	}
	c, err := js.OrderedConsumer(ctx, bus.DeadLetterStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return out, fmt.Errorf("cannot read stream %s: %w", bus.DeadLetterStream, err)
	}
	for range n {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return out, fmt.Errorf("cannot read a dead letter: %w", err)
		}
		kind, _, _ := strings.Cut(m.Headers().Get(bus.HeaderDLQReason), ":")
		kind = strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return -1
			}
			return r
		}, kind)
		if len(kind) > 60 {
			kind = kind[:60]
		}
		out[m.Headers().Get(bus.HeaderDLQService)+": "+kind]++
	}
	return out, nil
}

func status(o *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

func condition(o *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprintf("%v/%v: %v", m["status"], m["reason"], m["message"])
		}
	}
	return "no " + typ + " condition"
}

func firstProblems(p []string, k int) string {
	if len(p) == 0 {
		return ""
	}
	out := "\n  " + strings.Join(p[:min(k, len(p))], "\n  ")
	if len(p) > k {
		out += fmt.Sprintf("\n  ... and %d more", len(p)-k)
	}
	return out
}
