package xcrd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// FuzzForCompositeResource feeds arbitrary user schemas to the generator: it
// must never panic, and must either fail with an *InvalidError or produce the
// same CRDs every time.
func FuzzForCompositeResource(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"type":"object","properties":{"spec":{"type":"object","required":["a"],"properties":{"a":{"type":"string"}}}}}`))
	f.Add([]byte(`{"properties":{"metadata":{"properties":{"name":{"maxLength":10}}},"status":{"oneOf":[{"required":["x"]}]}}}`))
	f.Add([]byte(`{"type":"string"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		x := newXRD(withClaimNames())
		x.Spec.Versions[0].Schema = &v1.CompositeResourceValidation{OpenAPIV3Schema: runtime.RawExtension{Raw: raw}}

		xr, err := ForCompositeResource(x)
		if err != nil {
			if !IsInvalid(err) {
				t.Fatalf("ForCompositeResource(...): want an *InvalidError, got %T: %v", err, err)
			}
			return
		}
		claim, err := ForCompositeResourceClaim(x)
		if err != nil {
			t.Fatalf("ForCompositeResourceClaim(...) failed where ForCompositeResource succeeded: %v", err)
		}
		xr2, _ := ForCompositeResource(x)
		claim2, _ := ForCompositeResourceClaim(x)
		if diff := cmp.Diff(xr, xr2); diff != "" {
			t.Fatalf("not deterministic: -first, +second:\n%s", diff)
		}
		if diff := cmp.Diff(claim, claim2); diff != "" {
			t.Fatalf("not deterministic: -first, +second:\n%s", diff)
		}
	})
}
