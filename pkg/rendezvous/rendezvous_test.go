package rendezvous

import (
	"hash/fnv"
	"testing"
)

// TestScoreFixed pins the bytes Score hashes: replicas of different
// versions must agree on who owns what.
func TestScoreFixed(t *testing.T) {
	h := fnv.New64a()
	_, _ = h.Write([]byte("renderer\x003\x00renderer-1"))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	if got := Score("renderer", "3", "renderer-1"); got != x {
		t.Errorf("Score = %#x, want %#x (the parts joined by zero bytes, FNV-1a 64, splitmix64's finalizer)", got, x)
	}
	if Score("ab", "c") == Score("a", "bc") {
		t.Error("Score does not separate its parts")
	}
}
