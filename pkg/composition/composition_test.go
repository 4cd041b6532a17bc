package composition

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestChoose(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	counts := map[string]int{}
	for i := range 400 {
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		got := Choose(uid, names)
		if again := Choose(uid, []string{"d", "c", "b", "a"}); again != got {
			t.Fatalf("Choose is not deterministic for %s: %q then %q (other order)", uid, got, again)
		}
		counts[got]++
		// Removing a Composition the XR did not choose keeps its choice.
		for _, n := range names {
			if n == got {
				continue
			}
			var rest []string
			for _, m := range names {
				if m != n {
					rest = append(rest, m)
				}
			}
			if c := Choose(uid, rest); c != got {
				t.Fatalf("removing %q moved %s from %q to %q", n, uid, got, c)
			}
		}
	}
	for _, n := range names {
		if counts[n] < 50 {
			t.Errorf("Choose picked %q %d times in 400; want an even spread (%v)", n, counts[n], counts)
		}
	}
}
