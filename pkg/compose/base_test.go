package compose

import (
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

func TestDecodeBaseIsTheCallersOwn(t *testing.T) {
	raw := []byte(`{"apiVersion":"nop.crossplane.io/v1alpha1","kind":"NopResource","metadata":{"namespace":"ns","labels":{"a":"b"}},"spec":{"forProvider":{"n":3,"f":1.5,"l":[1,"x",true,null]}}}`)
	tmpl := &v1.ComposedTemplate{Base: runtime.RawExtension{Raw: raw}}
	want, err := decodeJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	first, err := decodeBase(tmpl)
	if err != nil {
		t.Fatalf("decodeBase(): %v", err)
	}
	if !reflect.DeepEqual(first, want) {
		t.Fatalf("decodeBase() = %v, want %v (what the JSON decodes to)", first, want)
	}
	// A render writes into the base it got: the next render must not see it.
	first["kind"] = "Changed"
	first["metadata"].(map[string]any)["labels"].(map[string]any)["a"] = "changed" //nolint:forcetypeassert // The test's own object.
	first["spec"].(map[string]any)["forProvider"].(map[string]any)["l"].([]any)[0] = int64(9)
	second, err := decodeBase(tmpl)
	if err != nil {
		t.Fatalf("decodeBase(): %v", err)
	}
	if !reflect.DeepEqual(second, want) {
		t.Errorf("decodeBase() after a caller changed an earlier result = %v, want %v", second, want)
	}
	if got := TemplateNamespace(&v1.CompositionSpec{Resources: []v1.ComposedTemplate{*tmpl}}, 0); got != "ns" {
		t.Errorf("TemplateNamespace() = %q, want %q", got, "ns")
	}
	for _, bad := range []string{`[1]`, `null`, `{"kind":`} {
		if _, err := decodeBase(&v1.ComposedTemplate{Base: runtime.RawExtension{Raw: []byte(bad)}}); err == nil {
			t.Errorf("decodeBase(%s): want an error", bad)
		}
	}
}

func TestBaseCacheBounded(t *testing.T) {
	c := &baseCache{m: map[string]map[string]any{}}
	for i := range maxCachedBases + 10 {
		if _, err := c.get(fmt.Appendf(nil, `{"kind":"K","i":%d}`, i)); err != nil {
			t.Fatal(err)
		}
		if len(c.m) > maxCachedBases {
			t.Fatalf("the cache holds %d bases, want at most %d", len(c.m), maxCachedBases)
		}
	}
}

// BenchmarkDecodeBase compares decoding a template's base (what every render
// did) with copying the cached decoded base (what it does).
func BenchmarkDecodeBase(b *testing.B) {
	raw := []byte(`{"apiVersion":"nop.crossplane.io/v1alpha1","kind":"NopResource","metadata":{"labels":{"bench.loom.dev/role":"database"}},"spec":{"forProvider":{"conditionAfter":[{"conditionType":"Ready","conditionStatus":"True","conditionReason":"Available","time":"0s"}],"connectionDetails":[{"name":"password","value":"bench-s3cr3t"}],"fields":{"kind":"Database","storageMB":20480,"networkSelector":{"matchControllerRef":true,"matchLabels":{"bench.loom.dev/role":"network"}}}}}}`)
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := copyBase(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
