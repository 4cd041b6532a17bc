//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/testing/poll"
)

// raceClaims is how many claims the race test creates at once.
const raceClaims = 50

// testBindingRace creates 50 claims at once while three binder replicas run,
// kills one replica once some claims are bound, and checks that every claim
// ends up bound to exactly one XR and that no XR is left unbound. It then
// measures the API writes the binder made per claim, and deletes the claims,
// checking that no XR is left behind.
func testBindingRace(t *testing.T, env *binderEnv) {
	ns := env.namespace(t, "binder-race")
	ctx := t.Context()
	claims := env.client(claimGVK, ns)

	resources := []string{"binderdbs", "xbinderdbs", "events"}
	before := map[string]float64{}
	for _, r := range resources {
		n, err := env.writes(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		before[r] = n
	}

	// Kill binder replica 1 as soon as the first claim is bound, while the
	// others are still being bound.
	killed := make(chan error, 1)
	go func() {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		killed <- poll.Wait(pctx, func(context.Context) error {
			l, err := claims.List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			bound := 0
			for _, c := range l.Items {
				if n, _, _ := unstructured.NestedString(c.Object, "spec", "resourceRef", "name"); n != "" {
					bound++
				}
			}
			if bound < 1 {
				return fmt.Errorf("%d claims bound", bound)
			}
			t.Logf("killing binder replica 1 with %d of %d claims bound", bound, raceClaims)
			return env.Stack.KillService("binder", 1)
		}, poll.Every(framework.PollInterval))
	}()

	var wg sync.WaitGroup
	errs := make(chan error, raceClaims)
	for i := range raceClaims {
		wg.Go(func() {
			c := &unstructured.Unstructured{Object: map[string]any{
				"spec": map[string]any{"parameters": map[string]any{"size": "small", "replicas": int64(i)}},
			}}
			c.SetGroupVersionKind(claimGVK)
			c.SetNamespace(ns)
			c.SetName(fmt.Sprintf("race-%02d", i))
			if _, err := claims.Create(ctx, c, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("cannot create claim: %v", err)
	}
	if err := <-killed; err != nil {
		t.Fatalf("cannot kill a binder replica mid-way: %v", err)
	}

	// Every claim bound to exactly one XR, every XR bound to a claim that
	// names it. (Without a renderer the XRs get no status, so neither do the
	// claims: a claim's first status waits for its XR's.)
	framework.Eventually(t, 3*time.Minute, func() error { return checkBindings(ctx, env, ns, raceClaims) })

	// Once bound, the binder must go quiet: a reconcile that changes nothing
	// writes nothing.
	after := waitQuiet(t, env, resources)
	perClaim := map[string]float64{}
	for _, r := range resources {
		perClaim[r] = (after[r] - before[r]) / raceClaims
	}
	// The test itself created each claim once (one POST per claim).
	perClaim["binderdbs"] -= 1
	total := perClaim["binderdbs"] + perClaim["xbinderdbs"] + perClaim["events"]
	t.Logf("API writes per claim by the binder while binding %d claims with %d racing replicas: claims %.2f, XRs %.2f, events %.2f, total %.2f",
		raceClaims, binderReplicas, perClaim["binderdbs"], perClaim["xbinderdbs"], perClaim["events"], total)
	// Binding costs one claim update (resourceRef and finalizer) and one XR
	// create; races and the killed replica may add a few conflicts, but
	// never a write per reconcile.
	if total > 3 {
		t.Errorf("the binder made %.2f API writes per claim; want at most 3 (2 without races)", total)
	}

	// Deleting the claims deletes their XRs and leaves nothing behind.
	if err := claims.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		l, err := claims.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		xrs, err := env.list(ctx, xrGVK, "")
		if err != nil {
			return err
		}
		left := 0
		for _, xr := range xrs {
			if ns2, _, _ := unstructured.NestedString(xr.Object, "spec", "claimRef", "namespace"); ns2 == ns {
				left++
			}
		}
		if len(l.Items) > 0 || left > 0 {
			return fmt.Errorf("%d claims and %d of their XRs remain", len(l.Items), left)
		}
		return nil
	})
}

// checkBindings checks the invariants of the race test in namespace ns.
func checkBindings(ctx context.Context, env *binderEnv, ns string, want int) error {
	claims, err := env.list(ctx, claimGVK, ns)
	if err != nil {
		return err
	}
	xrs, err := env.list(ctx, xrGVK, "")
	if err != nil {
		return err
	}
	if len(claims) != want {
		return fmt.Errorf("%d claims, want %d", len(claims), want)
	}
	var problems []string
	xrsOf := map[string][]string{}
	xrByName := map[string]*unstructured.Unstructured{}
	for i := range xrs {
		xr := &xrs[i]
		xrByName[xr.GetName()] = xr
		ref, ok, _ := unstructured.NestedStringMap(xr.Object, "spec", "claimRef")
		if !ok || ref["name"] == "" {
			problems = append(problems, fmt.Sprintf("XR %s is not bound to a claim", xr.GetName()))
			continue
		}
		if ref["namespace"] != ns {
			continue
		}
		xrsOf[ref["name"]] = append(xrsOf[ref["name"]], xr.GetName())
	}
	for _, c := range claims {
		name, _, _ := unstructured.NestedString(c.Object, "spec", "resourceRef", "name")
		switch {
		case name == "":
			problems = append(problems, fmt.Sprintf("claim %s has no resourceRef", c.GetName()))
		case len(xrsOf[c.GetName()]) != 1:
			problems = append(problems, fmt.Sprintf("claim %s is named by %d XRs %v", c.GetName(), len(xrsOf[c.GetName()]), xrsOf[c.GetName()]))
		case xrsOf[c.GetName()][0] != name:
			problems = append(problems, fmt.Sprintf("claim %s names XR %s but XR %s names the claim", c.GetName(), name, xrsOf[c.GetName()][0]))
		}
		if xr := xrByName[name]; xr != nil {
			replicas, _, _ := unstructured.NestedInt64(xr.Object, "spec", "parameters", "replicas")
			want, _, _ := unstructured.NestedInt64(c.Object, "spec", "parameters", "replicas")
			if replicas != want {
				problems = append(problems, fmt.Sprintf("XR %s has spec.parameters.replicas %d, claim %s has %d", name, replicas, c.GetName(), want))
			}
		}
		if s, _, m := condition(&c, "Synced"); s == "False" {
			problems = append(problems, fmt.Sprintf("claim %s is not Synced: %s", c.GetName(), m))
		}
		if len(c.GetFinalizers()) != 1 {
			problems = append(problems, fmt.Sprintf("claim %s has finalizers %v", c.GetName(), c.GetFinalizers()))
		}
	}
	return errorf(problems)
}

// waitQuiet waits until the API server's write counts of resources stay
// unchanged for three seconds, and returns them.
func waitQuiet(t *testing.T, env *binderEnv, resources []string) map[string]float64 {
	t.Helper()
	var last map[string]float64
	var since time.Time
	framework.Eventually(t, time.Minute, func() error {
		now := map[string]float64{}
		for _, r := range resources {
			n, err := env.writes(t.Context(), r)
			if err != nil {
				return err
			}
			now[r] = n
		}
		same := last != nil
		for _, r := range resources {
			same = same && now[r] == last[r]
		}
		if !same {
			last, since = now, time.Now()
			return errors.New("writes still happening")
		}
		if time.Since(since) < 3*time.Second {
			return fmt.Errorf("quiet for %s only", time.Since(since).Round(time.Millisecond))
		}
		return nil
	})
	return last
}

// testBindingNameTaken shows two claims racing for one generated XR name
// (claims of the same name in two namespaces generate names from the same
// base): the first claim's XR is created; the second claim's resourceRef is
// set to that name, as if it had generated the same name and lost the
// create. The binder must give the second claim a new name and its own XR,
// and the first XR must not change hands (same UID, same claimRef).
func testBindingNameTaken(t *testing.T, env *binderEnv) {
	ctx := t.Context()
	nsA := env.namespace(t, "binder-taken-a")
	nsB := env.namespace(t, "binder-taken-b")
	newClaim := func(ns string) *unstructured.Unstructured {
		c := &unstructured.Unstructured{Object: map[string]any{
			"spec": map[string]any{"parameters": map[string]any{"size": "small", "replicas": int64(1)}},
		}}
		c.SetGroupVersionKind(claimGVK)
		c.SetNamespace(ns)
		c.SetName("taken")
		return c
	}
	if _, err := env.client(claimGVK, nsA).Create(ctx, newClaim(nsA), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var first *unstructured.Unstructured
	framework.Eventually(t, 2*time.Minute, func() error {
		c, err := env.get(ctx, claimGVK, nsA, "taken")
		if err != nil || c == nil {
			return fmt.Errorf("claim: %v", err)
		}
		name, _, _ := unstructured.NestedString(c.Object, "spec", "resourceRef", "name")
		if name == "" {
			return errors.New("claim not bound yet")
		}
		xr, err := env.get(ctx, xrGVK, "", name)
		if err != nil || xr == nil {
			return fmt.Errorf("XR %q not created yet: %v", name, err)
		}
		first = xr
		return nil
	})

	b := newClaim(nsB)
	_ = unstructured.SetNestedMap(b.Object, map[string]any{"apiVersion": xrGVK.GroupVersion().String(), "kind": xrGVK.Kind, "name": first.GetName()}, "spec", "resourceRef")
	if _, err := env.client(claimGVK, nsB).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		c, err := env.get(ctx, claimGVK, nsB, "taken")
		if err != nil || c == nil {
			return fmt.Errorf("claim: %v", err)
		}
		name, _, _ := unstructured.NestedString(c.Object, "spec", "resourceRef", "name")
		if name == first.GetName() {
			return fmt.Errorf("the second claim still names %q", name)
		}
		xr, err := env.get(ctx, xrGVK, "", name)
		if err != nil || xr == nil {
			return fmt.Errorf("XR %q not created yet: %v", name, err)
		}
		if ns, _, _ := unstructured.NestedString(xr.Object, "spec", "claimRef", "namespace"); ns != nsB {
			return fmt.Errorf("XR %q is bound to a claim in namespace %q, want %q", name, ns, nsB)
		}
		return nil
	})
	xr, err := env.get(ctx, xrGVK, "", first.GetName())
	if err != nil || xr == nil {
		t.Fatalf("cannot get the first claim's XR %q: %v", first.GetName(), err)
	}
	ns, _, _ := unstructured.NestedString(xr.Object, "spec", "claimRef", "namespace")
	if xr.GetUID() != first.GetUID() || ns != nsA {
		t.Errorf("XR %q changed hands: UID %s (was %s), claim namespace %q (want %q)", xr.GetName(), xr.GetUID(), first.GetUID(), ns, nsA)
	}
}
