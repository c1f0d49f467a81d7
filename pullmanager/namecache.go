package pullmanager

import (
	"sync"
	"sync/atomic"
)

// Bounds of the process-wide name cache (normalised names) and of each
// allowlist policy's match cache. Image strings come from pod specs, so a
// node sees a few hundred distinct ones; the bounds only protect memory
// against abuse.
const (
	nameCacheEntries = 1 << 14
	nameCacheBytes   = 4 << 20
)

// nameCache maps strings to values computed by a pure function, bounded in
// entries and in bytes, safe for concurrent use and lock-free for reads.
//
// It keeps two generations. New values go into the current one; when that
// reaches half the bounds it becomes the previous one (the one before is
// dropped) and an empty generation starts. A hit in the previous generation
// copies the value into the current one, so strings used at least once per
// generation stay cached however many other strings pass through: a hot set
// smaller than half the bound survives a flood of one-off strings, where a
// cache emptied when full loses it every time. The values are pure, so a
// dropped value only costs a recomputation.
type nameCache[V any] struct {
	maxEntries, maxBytes int64 // per generation: half the cache's bounds

	cur, prev atomic.Pointer[generation[V]]
	rotate    sync.Mutex
}

type generation[V any] struct {
	m              sync.Map // string -> cached[V]
	entries, bytes atomic.Int64
}

type cached[V any] struct {
	value V
	size  int
}

// newNameCache returns a cache holding at most maxEntries values whose
// sizes (as given to put) add up to at most maxBytes.
func newNameCache[V any](maxEntries, maxBytes int) *nameCache[V] {
	c := &nameCache[V]{maxEntries: max(int64(maxEntries)/2, 1), maxBytes: max(int64(maxBytes)/2, 1)}
	c.cur.Store(&generation[V]{})
	c.prev.Store(&generation[V]{})
	return c
}

// get returns the cached value for key and whether it was cached.
func (c *nameCache[V]) get(key string) (V, bool) {
	if v, ok := c.cur.Load().m.Load(key); ok {
		return v.(cached[V]).value, true
	}
	if v, ok := c.prev.Load().m.Load(key); ok {
		e := v.(cached[V])
		c.add(key, e)
		return e.value, true
	}
	var zero V
	return zero, false
}

// put stores value for key; size is what it costs in bytes (the key's and
// the value's strings, say). A value larger than a generation's byte bound
// is not stored.
func (c *nameCache[V]) put(key string, value V, size int) {
	if int64(size) > c.maxBytes {
		return
	}
	c.add(key, cached[V]{value: value, size: size})
}

// add stores e in the current generation. Concurrent adds may each pass the
// bound check before any counts, so a generation can exceed its bounds by
// one value per concurrent writer.
func (c *nameCache[V]) add(key string, e cached[V]) {
	g := c.cur.Load()
	if g.entries.Load() >= c.maxEntries || g.bytes.Load()+int64(e.size) > c.maxBytes {
		g = c.next(g)
	}
	if _, loaded := g.m.LoadOrStore(key, e); !loaded {
		g.entries.Add(1)
		g.bytes.Add(int64(e.size))
	}
}

// next makes full the previous generation and starts a new one, unless
// another goroutine already did; it returns the current generation.
func (c *nameCache[V]) next(full *generation[V]) *generation[V] {
	c.rotate.Lock()
	defer c.rotate.Unlock()
	if g := c.cur.Load(); g != full {
		return g
	}
	fresh := &generation[V]{}
	c.prev.Store(full)
	c.cur.Store(fresh)
	return fresh
}

// len returns the number of values held (both generations; a value held in
// both counts twice).
func (c *nameCache[V]) len() int {
	return int(c.cur.Load().entries.Load() + c.prev.Load().entries.Load())
}

// size returns the bytes held, as given to put (both generations).
func (c *nameCache[V]) size() int {
	return int(c.cur.Load().bytes.Load() + c.prev.Load().bytes.Load())
}
