package composite

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// TestMemoBound crosses the memo's bound: with room for 8 XRs, 20 rendered
// XRs leave the 8 most recent remembered (unchanged, nothing to write) and
// the 12 oldest forgotten (checked again), instead of forgetting all of them
// at once.
func TestMemoBound(t *testing.T) {
	const size, xrs = 8, 20
	m := newMemo(size)
	uid := func(i int) types.UID { return types.UID(fmt.Sprintf("xr-%02d", i)) }
	for i := range xrs {
		if !m.watchesChanged(uid(i), "key") {
			t.Fatalf("watchesChanged(%s): false for an XR never seen", uid(i))
		}
	}
	// Look at the most recent first, so that looking does not evict.
	var unchanged, recheck []int
	for i := xrs - 1; i >= 0; i-- {
		if m.watchesChanged(uid(i), "key") {
			recheck = append(recheck, i)
		} else {
			unchanged = append(unchanged, i)
		}
	}
	if diff := cmp.Diff([]int{19, 18, 17, 16, 15, 14, 13, 12}, unchanged); diff != "" {
		t.Errorf("XRs still remembered as unchanged: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(xrs-size, len(recheck)); diff != "" {
		t.Errorf("XRs checked again: -want, +got:\n%s", diff)
	}
}
