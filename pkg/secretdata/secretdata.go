// Package secretdata summarises connection details and Secret data (maps
// of key to bytes): services remember a digest of what they sent or wrote,
// never the values.
package secretdata

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
)

// Digest is a collision-resistant summary of data: equal data (nil and
// empty alike) gives equal digests, and keys and values that concatenate
// alike do not.
func Digest(data map[string][]byte) [sha256.Size]byte {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(data[k]))
		h.Write(data[k])
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
