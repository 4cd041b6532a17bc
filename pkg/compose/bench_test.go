package compose

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// benchSetup is the scale benchmark's manifests, whose Composition
// BenchmarkRenderBenchComposition renders.
const benchSetup = "../../e2e/bench/testdata/setup.yaml"

// benchComposition returns the spec of the Composition in the scale
// benchmark's manifests.
func benchComposition(b *testing.B) *v1.CompositionSpec {
	b.Helper()
	raw, err := os.ReadFile(benchSetup)
	if err != nil {
		b.Fatalf("cannot read the benchmark's manifests: %v", err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var c v1.Composition
		if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
			b.Fatalf("cannot decode a document of %s: %v", benchSetup, err)
		}
		if c.Kind == "Composition" {
			return &c.Spec
		}
	}
	b.Fatalf("%s has no Composition", benchSetup)
	return nil
}

// cpuTime returns the user and system CPU time of the process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("cannot read the CPU time: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRenderBenchComposition renders a claimed XR of the scale benchmark
// (e2e/bench) through its Composition, with all three composed resources
// observed Ready, so every patch (to the composed resources and back to the
// XR), connection detail and readiness check runs. Besides wall time it
// reports the process's CPU time per render (cpu-ns/op), which a loaded
// machine disturbs less.
func BenchmarkRenderBenchComposition(b *testing.B) {
	spec := benchComposition(b)
	observed := func(name, fields string) *unstructured.Unstructured {
		return u(b, `{"apiVersion":"nop.crossplane.io/v1alpha1","kind":"NopResource",
			"metadata":{"name":"s-00000-x-`+name+`","annotations":{"crossplane.io/composition-resource-name":"`+name+`"}},
			"spec":{"forProvider":{"fields":`+fields+`},"writeConnectionSecretToRef":{"namespace":"crossplane-system","name":"7c9e-database"}},
			"status":{"atProvider":{"fields":`+fields+`},"conditions":[{"type":"Ready","status":"True","reason":"Available","lastTransitionTime":"2026-01-01T00:00:00Z"},{"type":"Synced","status":"True","reason":"ReconcileSuccess","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)
	}
	req := Request{
		Composite: u(b, `{"apiVersion":"bench.loom.dev/v1alpha1","kind":"XBenchDB",
			"metadata":{"name":"s-00000-x","uid":"7c9e6679-7425-40de-944b-e07fc1f90ae7","generation":1,
				"labels":{"crossplane.io/composite":"s-00000-x","crossplane.io/claim-name":"s-00000","crossplane.io/claim-namespace":"bench"}},
			"spec":{"parameters":{"storageGB":20,"size":"small"},"compositionRef":{"name":"xbenchdbs.bench.loom.dev"},
				"claimRef":{"apiVersion":"bench.loom.dev/v1alpha1","kind":"BenchDB","namespace":"bench","name":"s-00000"},
				"writeConnectionSecretToRef":{"namespace":"crossplane-system","name":"7c9e6679-7425-40de-944b-e07fc1f90ae7"}},
			"status":{}}`),
		Composition: spec,
		Observed: map[string]*unstructured.Unstructured{
			"network":  observed("network", `{"kind":"Network","selfLink":"projects/bench/global/networks/s-00000-x"}`),
			"database": observed("database", `{"kind":"Database","storageMB":20480}`),
			"cache":    observed("cache", `{"kind":"Cache","tier":"cache-s"}`),
		},
	}
	if res, err := Render(req); err != nil || res.Err() != nil || !res.Ready {
		b.Fatalf("the render fails or is not Ready: %v, %v", err, res.Err())
	}
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		if _, err := Render(req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}
