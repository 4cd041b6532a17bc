package compose

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// maxCachedBases bounds the template bases a process keeps decoded; past it
// the cache is emptied (templates are few: a handful per Composition
// revision).
const maxCachedBases = 1024

// bases holds the decoded bases of templates, by their JSON. Every render of
// every XR decodes the bases of its Composition's templates, and the same
// bytes decode to the same value each time: a render takes a deep copy of
// the cached value, which costs a fraction of decoding (BenchmarkDecodeBase).
var bases = &baseCache{m: map[string]map[string]any{}} //nolint:gochecknoglobals // A process-wide cache of immutable values.

// baseCache is a bounded map from a base's JSON to its decoded object. It is
// safe for concurrent use; the values it holds are never modified.
type baseCache struct {
	mu sync.RWMutex
	m  map[string]map[string]any
}

// get returns the object raw decodes to, shared: the caller must not modify
// it. raw must be a JSON object.
func (c *baseCache) get(raw []byte) (map[string]any, error) {
	c.mu.RLock()
	m, ok := c.m[string(raw)]
	c.mu.RUnlock()
	if ok {
		return m, nil
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	m, ok = v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("is %s, want an object", TypeOf(v))
	}
	c.mu.Lock()
	if len(c.m) >= maxCachedBases {
		c.m = map[string]map[string]any{}
	}
	c.m[string(raw)] = m
	c.mu.Unlock()
	return m, nil
}

// copyBase returns a copy of the object raw decodes to, the caller's own.
func copyBase(raw []byte) (map[string]any, error) {
	m, err := bases.get(raw)
	if err != nil {
		return nil, err
	}
	return runtime.DeepCopyJSON(m), nil
}
