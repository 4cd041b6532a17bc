package fn

import (
	"container/list"
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

// Defaults of a Cache.
const (
	DefaultCacheSize   = 4096
	DefaultCacheMaxTTL = time.Hour
)

// A Cache is a Runner that remembers responses. A response is kept when it
// echoes the request's tag, has a TTL above zero and no fatal result; it is
// served for a request to the same function with the same tag (that is, the
// same content) until its TTL, capped at the Cache's max TTL, runs out. The
// least recently used entry goes when the Cache is full. Responses are
// cloned in and out, so callers may modify what they get. Safe for concurrent
// use; it does not merge concurrent misses for the same key.
type Cache struct {
	next   Runner
	size   int
	maxTTL time.Duration
	now    func() time.Time

	mu      sync.Mutex
	lru     *list.List // of *cacheEntry, most recent first
	entries map[string]*list.Element
	hits    uint64
	misses  uint64
}

type cacheEntry struct {
	key     string
	rsp     *fnv1.RunFunctionResponse
	expires time.Time
}

// A CacheOption configures a Cache.
type CacheOption func(*Cache)

// WithCacheSize bounds the number of responses kept (default
// DefaultCacheSize).
func WithCacheSize(n int) CacheOption {
	return func(c *Cache) {
		if n > 0 {
			c.size = n
		}
	}
}

// WithCacheMaxTTL caps how long any response is kept (default
// DefaultCacheMaxTTL).
func WithCacheMaxTTL(d time.Duration) CacheOption {
	return func(c *Cache) {
		if d > 0 {
			c.maxTTL = d
		}
	}
}

// WithCacheClock replaces the clock, for tests.
func WithCacheClock(now func() time.Time) CacheOption {
	return func(c *Cache) { c.now = now }
}

// NewCache returns a Cache in front of next.
func NewCache(next Runner, o ...CacheOption) *Cache {
	c := &Cache{
		next: next, size: DefaultCacheSize, maxTTL: DefaultCacheMaxTTL, now: time.Now,
		lru: list.New(), entries: map[string]*list.Element{},
	}
	for _, fn := range o {
		fn(c)
	}
	return c
}

// RunFunction serves req from the cache or calls the next Runner.
func (c *Cache) RunFunction(ctx context.Context, function string, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	tag := req.GetMeta().GetTag()
	if tag == "" {
		return c.next.RunFunction(ctx, function, req)
	}
	key := function + "\x00" + tag
	if rsp := c.get(key); rsp != nil {
		return rsp, nil
	}
	rsp, err := c.next.RunFunction(ctx, function, req)
	if err != nil {
		return nil, err
	}
	c.put(key, tag, rsp)
	return rsp, nil
}

// Stats returns the number of hits and misses so far.
func (c *Cache) Stats() (hits, misses uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

func (c *Cache) get(key string) *fnv1.RunFunctionResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		c.misses++
		return nil
	}
	e := el.Value.(*cacheEntry) //nolint:forcetypeassert // Only cache entries are stored.
	if !c.now().Before(e.expires) {
		c.lru.Remove(el)
		delete(c.entries, key)
		c.misses++
		return nil
	}
	c.lru.MoveToFront(el)
	c.hits++
	return proto.CloneOf(e.rsp)
}

func (c *Cache) put(key, tag string, rsp *fnv1.RunFunctionResponse) {
	ttl := rsp.GetMeta().GetTtl().AsDuration()
	if rsp.GetMeta().GetTag() != tag || ttl <= 0 || fatal(rsp) != nil {
		return
	}
	ttl = min(ttl, c.maxTTL)
	e := &cacheEntry{key: key, rsp: proto.CloneOf(rsp), expires: c.now().Add(ttl)}

	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		el.Value = e
		c.lru.MoveToFront(el)
		return
	}
	c.entries[key] = c.lru.PushFront(e)
	for c.lru.Len() > c.size {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.entries, old.Value.(*cacheEntry).key) //nolint:forcetypeassert // Only cache entries are stored.
	}
}
