package composite

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/pkg/apply"
)

// writeBack returns the merge patch that persists what the patches of a
// patch-and-transform render wrote to the XR outside its status: its spec
// and its labels and annotations, as Crossplane v1.20 persists the whole XR
// after composing it. It is nil when they wrote nothing that differs from
// the observed XR, so that a Composition that does not patch the XR's spec
// or metadata costs no write. The status is applied apart (writeStatus).
func writeBack(observed, desired *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	have, _, _ := unstructured.NestedMap(observed.Object, "spec")
	want, _, _ := unstructured.NestedMap(desired.Object, "spec")
	if d := mergeDiff(have, want); d != nil {
		out["spec"] = d
	}
	meta := map[string]any{}
	for _, k := range []string{"labels", "annotations"} {
		have, _, _ := unstructured.NestedMap(observed.Object, "metadata", k)
		want, _, _ := unstructured.NestedMap(desired.Object, "metadata", k)
		if d := mergeDiff(have, want); d != nil {
			meta[k] = d
		}
	}
	if len(meta) > 0 {
		out["metadata"] = meta
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// mergeDiff returns the JSON merge patch (RFC 7386) that turns have into
// want, nil when they are equal. Objects are diffed key by key; any other
// value, lists included, is replaced whole; a key want lacks is removed
// (null).
func mergeDiff(have, want map[string]any) map[string]any {
	out := map[string]any{}
	for k, w := range want {
		h, ok := have[k]
		if ok && apply.Equal(h, w) {
			continue
		}
		hm, hok := h.(map[string]any)
		wm, wok := w.(map[string]any)
		if ok && hok && wok {
			if d := mergeDiff(hm, wm); d != nil {
				out[k] = d
			}
			continue
		}
		out[k] = w
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			out[k] = nil
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// mergeInto merges the merge patch src into dst, src winning: the patch
// that applies both.
func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		sm, sok := v.(map[string]any)
		dm, dok := dst[k].(map[string]any)
		if sok && dok {
			mergeInto(dm, sm)
			continue
		}
		dst[k] = v
	}
}
