//go:build e2e

package bench

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ceiling measures how many NopResource creates per second the API server
// accepts from cfg.Creators clients with nothing else writing: the test
// provider is stopped (SIGSTOP) meanwhile, and the NopResources carry no
// crossplane.io/composite label, so Loom's watcher ignores them. They are
// deleted, and the system is quiet again, before it returns.
func (r *run) ceiling(ctx context.Context) error {
	if err := r.waitQuiet(ctx, "before the ceiling"); err != nil {
		return err
	}
	nops := r.dyn.Resource(nopGVR)
	provider := r.pids("provider-nop")
	signal(provider, syscall.SIGSTOP)
	resumed := false
	resume := func() {
		if !resumed {
			signal(provider, syscall.SIGCONT)
			resumed = true
		}
	}
	defer resume()

	r.logf("raw ceiling: %d clients create NopResources for %s (provider stopped)", r.cfg.Creators, r.cfg.Ceiling)
	type tally struct{ ok, failed int }
	results := make(chan tally, r.cfg.Creators)
	r.procs.sample()
	cpuBefore := r.procs.cpuSeconds()
	start := time.Now()
	deadline := start.Add(r.cfg.Ceiling)
	for w := range r.cfg.Creators {
		go func() {
			// Requests in flight at the deadline finish; the rate counts
			// them over the time they took.
			var t tally
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				o := ceilingNop(fmt.Sprintf("ceiling-%02d-%06d", w, i))
				if _, err := nops.Create(ctx, o, metav1.CreateOptions{}); err != nil {
					t.failed++
					continue
				}
				t.ok++
			}
			results <- t
		}()
	}
	var total tally
	for range r.cfg.Creators {
		t := <-results
		total.ok += t.ok
		total.failed += t.failed
	}
	elapsed := time.Since(start)
	r.procs.sample()
	cpuAfter := r.procs.cpuSeconds()
	r.res.RawCeilingCPUMsPerWrite = map[string]float64{}
	var used float64
	for p, v := range cpuAfter {
		d := v - cpuBefore[p]
		used += d
		if (p == "kube-apiserver" || p == "etcd") && total.ok > 0 {
			r.res.RawCeilingCPUMsPerWrite[p] = round(d*1000/float64(total.ok), 2)
		}
	}
	r.res.RawCeilingCPUShare = round(used/(elapsed.Seconds()*float64(r.res.Machine.NProc)), 3)
	r.res.RawCeilingSeconds = round(elapsed.Seconds(), 1)
	r.res.RawCeilingCreators = r.cfg.Creators
	r.res.RawCeilingErrors = total.failed
	r.res.RawCeilingWritesPerS = round(float64(total.ok)/elapsed.Seconds(), 1)
	r.logf("raw ceiling: %d creates in %s = %.0f writes/s (%d errors)", total.ok, elapsed.Round(time.Millisecond), r.res.RawCeilingWritesPerS, total.failed)

	// Delete them while the provider is still stopped, so it has nothing
	// to do for them when it resumes.
	if err := nops.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: labelCeiling}); err != nil {
		return fmt.Errorf("cannot delete the ceiling's NopResources: %w", err)
	}
	if err := poll(ctx, 5*time.Minute, time.Second, func() error {
		l, err := nops.List(ctx, metav1.ListOptions{LabelSelector: labelCeiling, Limit: 1})
		if err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return errors.New("the ceiling's NopResources are still being deleted")
		}
		return nil
	}); err != nil {
		return err
	}
	resume()
	return r.waitQuiet(ctx, "after the ceiling")
}

// ceilingNop is a NopResource like the benchmark's composed ones, but not
// composed (no crossplane.io/composite label).
func ceilingNop(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nop.crossplane.io/v1alpha1",
		"kind":       "NopResource",
		"metadata": map[string]any{
			"name":   name,
			"labels": map[string]any{labelCeiling: "true"},
		},
		"spec": map[string]any{"forProvider": map[string]any{
			"conditionAfter": []any{map[string]any{"time": "0s", "conditionType": "Ready", "conditionStatus": "True"}},
			"fields":         map[string]any{"kind": "Database", "storageMB": int64(20480)},
		}},
	}}
}

// pids returns the process ids of every running replica of service.
func (r *run) pids(service string) []int {
	var out []int
	for i := 0; ; i++ {
		pid := r.s.ServicePID(service, i)
		if pid == 0 {
			return out
		}
		out = append(out, pid)
	}
}

func signal(pids []int, sig syscall.Signal) {
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}
