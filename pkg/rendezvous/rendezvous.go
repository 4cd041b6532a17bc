// Package rendezvous scores candidates for highest-random-weight
// (rendezvous) hashing: whoever scores highest for a key wins it, the same
// key always goes to the same candidate, keys spread evenly, and adding or
// removing a candidate moves only the keys it wins or won.
package rendezvous

import "hash/fnv"

// Score returns the score of parts (typically a key and a candidate):
// FNV-1a over the parts, each followed by a zero byte, then splitmix64's
// finalizer, which spreads FNV's output evenly (FNV alone spreads names
// that differ only in their last characters poorly).
func Score(parts ...string) uint64 {
	h := fnv.New64a()
	for i, p := range parts {
		if i > 0 {
			_, _ = h.Write([]byte{0})
		}
		_, _ = h.Write([]byte(p))
	}
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
