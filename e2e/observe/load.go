//go:build e2e

package observe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/stack"
)

// Namespace holds the load's claims.
const Namespace = "observe"

var (
	claimGVR = schema.GroupVersionResource{Group: "observe.e2e.loom.dev", Version: "v1alpha1", Resource: "observedbs"}
	xrGVR    = schema.GroupVersionResource{Group: "observe.e2e.loom.dev", Version: "v1alpha1", Resource: "xobservedbs"}
)

// Kinds of claim the load creates.
const (
	Healthy     = "healthy"     // Composition observe-ok, size small or large: becomes Ready
	FatalResult = "fatal"       // Composition observe-fatal: its function returns a Fatal result
	Unreachable = "unreachable" // Composition observe-unreachable: its function cannot be reached
	BadPatch    = "bad-patch"   // Composition observe-ok, size medium: its map transform fails
)

// brokenEvery is how often a claim is broken: of every brokenEvery claims,
// one of each broken kind.
const brokenEvery = 20

// kindOf says which kind the i-th claim of the load is.
func kindOf(i int) string {
	switch i % brokenEvery {
	case 5:
		return FatalResult
	case 10:
		return Unreachable
	case 15:
		return BadPatch
	}
	return Healthy
}

// Claim is one claim of the load.
type Claim struct {
	Name, Kind string
	UID        string
}

// LoadResult says what a load did.
type LoadResult struct {
	Claims   []Claim
	Start    time.Time
	AllReady time.Duration // from the first create to the last healthy claim Ready
	Ready    int           // healthy claims Ready
	// DeadLettered is the subject of the poison message published to the
	// binder's work stream.
	DeadLettered string
}

// First returns the first claim of kind.
func (r LoadResult) First(kind string) (Claim, bool) {
	for _, c := range r.Claims {
		if c.Kind == kind {
			return c, true
		}
	}
	return Claim{}, false
}

// Load installs the load's kinds, creates n claims (one in every
// brokenEvery of each broken kind) with creators concurrent clients,
// publishes one message that is no event to the binder (dead-lettered), and
// waits until every healthy claim is Ready and every broken one reports
// its failure in a condition.
func (s *Session) Load(ctx context.Context, n, creators int) (LoadResult, error) {
	logf := func(format string, args ...any) { fmt.Fprintf(s.cfg.Log, format+"\n", args...) }
	res := LoadResult{}
	if err := s.install(ctx); err != nil {
		return res, err
	}
	claims := s.dyn.Resource(claimGVR).Namespace(Namespace)
	for i := range n {
		res.Claims = append(res.Claims, Claim{Name: fmt.Sprintf("observe-%04d", i), Kind: kindOf(i)})
	}

	// The first claim waits for the services' roles to cover the kinds
	// (kube-controller-manager aggregates them).
	res.Start = time.Now()
	if err := poll(ctx, 2*time.Minute, 500*time.Millisecond, func() error {
		return s.create(ctx, claims, &res.Claims[0])
	}); err != nil {
		return res, fmt.Errorf("cannot create the first claim: %w", err)
	}
	if err := poll(ctx, 2*time.Minute, 500*time.Millisecond, func() error {
		c, err := claims.Get(ctx, res.Claims[0].Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return readyTrue(c)
	}); err != nil {
		return res, fmt.Errorf("the first claim did not become Ready: %w", err)
	}

	logf("creating %d claims (%d broken on purpose) with %d clients", n, brokenCount(n), creators)
	work := make(chan int)
	errs := make(chan error, creators)
	var wg sync.WaitGroup
	for range creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := s.create(ctx, claims, &res.Claims[i]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	deadLettered := make(chan error, 1)
	go func() { deadLettered <- s.poison(ctx, &res) }()
	for i := 1; i < n; i++ {
		select {
		case work <- i:
		case err := <-errs:
			close(work)
			wg.Wait()
			return res, err
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return res, err
	default:
	}
	if err := <-deadLettered; err != nil {
		return res, err
	}

	want := n - brokenCount(n)
	timeout := 3*time.Minute + time.Duration(n)*time.Second
	var last string
	err := poll(ctx, timeout, time.Second, func() error {
		list, err := claims.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		xrs, err := s.dyn.Resource(xrGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		xrSyncedFalse := map[string]bool{} // by claim name
		for i := range xrs.Items {
			name, _, _ := unstructured.NestedString(xrs.Items[i].Object, "spec", "claimRef", "name")
			xrSyncedFalse[name] = syncedFalse(&xrs.Items[i])
		}
		ready, failing := 0, 0
		var waiting []string
		for i := range list.Items {
			c := &list.Items[i]
			switch kind := kindByName(res.Claims, c.GetName()); {
			case kind == Healthy && readyTrue(c) == nil:
				ready++
			case kind != Healthy && (syncedFalse(c) || xrSyncedFalse[c.GetName()]):
				failing++
			default:
				waiting = append(waiting, c.GetName())
			}
		}
		res.Ready = ready
		last = fmt.Sprintf("%d of %d healthy claims Ready, %d of %d broken ones failing; waiting for %s",
			ready, want, failing, brokenCount(n), strings.Join(first(waiting, 5), ", "))
		if ready < want || failing < brokenCount(n) {
			return errors.New(last)
		}
		return nil
	})
	res.AllReady = time.Since(res.Start)
	if err != nil {
		return res, fmt.Errorf("the load did not settle in %s: %w", timeout, err)
	}
	logf("%d healthy claims Ready and %d broken ones failing, %s after the first create", res.Ready, brokenCount(n), res.AllReady.Round(100*time.Millisecond))
	return res, nil
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "...")
	}
	return s
}

func brokenCount(n int) int {
	c := 0
	for i := range n {
		if kindOf(i) != Healthy {
			c++
		}
	}
	return c
}

func kindByName(cs []Claim, name string) string {
	for _, c := range cs {
		if c.Name == name {
			return c.Kind
		}
	}
	return ""
}

// install applies testdata/load.yaml, pointing the fatal Function at the
// harness's server.
func (s *Session) install(ctx context.Context) error {
	path := filepath.Join(s.cfg.RepoRoot, "e2e", "observe", "testdata", "load.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read the load's kinds: %w", err)
	}
	objs, err := stack.DecodeManifests([]byte(strings.ReplaceAll(string(b), "FUNCTION_ENDPOINT", s.fn.addr)))
	if err != nil {
		return fmt.Errorf("cannot decode %s: %w", path, err)
	}
	actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if _, err := s.Stack.ApplyObjects(actx, objs...); err != nil {
		return fmt.Errorf("cannot install the load's kinds: %w", err)
	}
	return nil
}

// create creates c's claim and records its UID.
func (s *Session) create(ctx context.Context, claims dynamic.ResourceInterface, c *Claim) error {
	composition, size := "observe-ok", "small"
	switch c.Kind {
	case FatalResult:
		composition = "observe-fatal"
	case Unreachable:
		composition = "observe-unreachable"
	case BadPatch:
		size = "medium"
	}
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": claimGVR.GroupVersion().String(),
		"kind":       "ObserveDB",
		"metadata":   map[string]any{"name": c.Name, "namespace": Namespace},
		"spec": map[string]any{
			"compositionRef":             map[string]any{"name": composition},
			"parameters":                 map[string]any{"size": size},
			"writeConnectionSecretToRef": map[string]any{"name": c.Name + "-conn"},
		},
	}}
	got, err := claims.Create(ctx, o, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("cannot create claim %s/%s: %w", Namespace, c.Name, err)
	}
	c.UID = string(got.GetUID())
	return nil
}

// poison publishes a message that is no event to the binder's work stream:
// the binder dead-letters it.
func (s *Session) poison(ctx context.Context, res *LoadResult) error {
	nc, err := nats.Connect(s.Stack.NATSURL())
	if err != nil {
		return fmt.Errorf("cannot connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	subject := bus.WorkSubject(bus.Binder, bus.DefaultPartitions, "00000000-0000-4000-8000-0000000dead1")
	res.DeadLettered = subject
	return poll(ctx, 30*time.Second, 200*time.Millisecond, func() error {
		_, err := js.Publish(ctx, subject, []byte("observe: not an event"))
		return err
	})
}

// readyTrue returns nil if o's Ready condition is True.
func readyTrue(o *unstructured.Unstructured) error {
	if conditionStatus(o, "Ready") != "True" {
		return fmt.Errorf("%s is not Ready", o.GetName())
	}
	return nil
}

// syncedFalse reports whether o's Synced condition is False, as an XR's is
// when it cannot be rendered.
func syncedFalse(o *unstructured.Unstructured) bool {
	return conditionStatus(o, "Synced") == "False"
}

func conditionStatus(o *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
