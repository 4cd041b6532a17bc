package connection

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// FuzzPlanFor feeds arbitrary bytes to the parts of a Composition that
// PlanFor decodes itself (a template's base) or must leave alone (a
// pipeline step's input, which is the function's business), and to what a
// pipeline's functions return. It must never panic, and a plan it returns
// must compute without panicking.
func FuzzPlanFor(f *testing.F) {
	f.Add([]byte(`{"metadata":{"annotations":{"loom.dev/connection-secret-prefix":"a-"}}}`), []byte(`{"apiVersion":"pt.fn.crossplane.io/v1beta1","kind":"Resources","resources":[{"name":"a","connectionDetails":[{"name":"k","type":"FromValue","value":"v"}]}]}`))
	f.Add([]byte(`{}`), []byte(`{"apiVersion":"pt.fn.crossplane.io/v1beta1","kind":"Resources","resources":[{"name":"a","base":{"metadata":1}}]}`))
	f.Add([]byte(`null`), []byte(`[]`))
	f.Fuzz(func(t *testing.T, base, input []byte) {
		name := "a"
		resources := &v1.CompositionSpec{Resources: []v1.ComposedTemplate{{Name: &name, Base: runtime.RawExtension{Raw: base}}}}
		pipeline := &v1.CompositionSpec{Mode: v1.CompositionModePipeline, Pipeline: []v1.PipelineStep{{Step: "s", Input: &runtime.RawExtension{Raw: input}}}}
		for _, s := range []*v1.CompositionSpec{resources, pipeline} {
			p, err := PlanFor(s)
			if err != nil {
				continue
			}
			_, _ = Compute(Input{Plan: p, Resources: []Observed{{Name: "a", Object: map[string]any{}, HasSecretRef: true, Secret: map[string][]byte{"k": []byte("v")}}}, Keys: []string{"k"},
				Returned: map[string][]byte{string(input): base, "k": input}, HasReturned: len(base)%2 == 0})
		}
	})
}
