package etcdfence

import "sync"

// maxCachedScopes bounds the floor cache; past it the cache starts over.
const maxCachedScopes = 1 << 16

// floorCache remembers, per scope, the floor this process last saw. It is a
// hint that lets a write compare the floor it expects instead of rewriting
// it, never a source of truth: every write is still checked by etcd in its
// own transaction. Because floors only rise, a cached value is a lower
// bound of the real floor, so a token older than it is certainly stale.
//
// A scope is unknown (absent from the map), known to have no floor (0), or
// known to have a floor of at least the cached value (> 0).
type floorCache struct {
	mu sync.RWMutex
	m  map[string]int64
}

func (c *floorCache) get(scope string) (int64, bool) {
	c.mu.RLock()
	v, ok := c.m[scope]
	c.mu.RUnlock()
	return v, ok
}

// raise records that scope's floor is at least e (> 0).
func (c *floorCache) raise(scope string, e int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.m[scope]; ok && cur >= e {
		return
	}
	c.put(scope, e)
}

// absent records that scope had no floor when last read.
func (c *floorCache) absent(scope string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(scope, 0)
}

func (c *floorCache) put(scope string, e int64) {
	if c.m == nil || len(c.m) >= maxCachedScopes {
		c.m = make(map[string]int64)
	}
	c.m[scope] = e
}
