package watch

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/services/watcher/internal/object"
)

func TestPendingReferencesWanted(t *testing.T) {
	nops := schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}
	byLabel := []object.Want{{GK: nops.GroupKind(), BySelector: true, Labels: map[string]string{"role": "network"}}}
	meta := func(uid, name, role string) object.Meta {
		return object.Meta{GVK: nops, UID: types.UID(uid), Name: name, Labels: map[string]string{"role": role}}
	}
	network, cache := meta("n", "network", "network"), meta("c", "cache", "cache")

	var p pendingReferences
	if p.wanted("xr", network, nil) {
		t.Error("an XR with no pending reference wants no target")
	}
	p.set("xr", "db", true, byLabel)
	if !p.wanted("xr", network, nil) {
		t.Error("a pending selector must want the target carrying its labels")
	}
	if p.wanted("xr", cache, nil) {
		t.Error("a pending selector must not want a target without its labels")
	}
	if p.wanted("other", network, nil) {
		t.Error("a pending selector of one XR must not want another XR's target")
	}
	relabelled := meta("c", "cache", "cache")
	was := meta("c", "cache", "network")
	if !p.wanted("xr", relabelled, &was) {
		t.Error("a target the selector would have picked before its labels changed must be wanted")
	}
	// A source that is its own target's kind never selects itself.
	p.set("xr", "db", true, nil)
	if p.wanted("xr", meta("db", "database", "network"), nil) {
		t.Error("a pending resource must not want itself")
	}
	if !p.wanted("xr", cache, nil) {
		t.Error("a pending resource whose wants are unknown must want any target")
	}
	p.set("xr", "db", false, nil)
	if p.wanted("xr", network, nil) || p.pending("xr") {
		t.Error("a resolved resource must want nothing and leave nothing pending")
	}
}
