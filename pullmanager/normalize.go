package pullmanager

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/distribution/reference"
)

// NormalizeImageName returns the key under which a pulled record maps
// credentials for image: the fully qualified repository name without tag or
// digest, as reference.ParseNormalizedNamed(image).Name() returns it. For
// example "busybox:1.36" and "docker.io/library/busybox@sha256:…" both give
// "docker.io/library/busybox". An image that does not parse gives an error
// matching ErrInvalidImageName.
func NormalizeImageName(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("%w %q: %w", ErrInvalidImageName, image, err)
	}
	return named.Name(), nil
}

// boundedCache maps strings to values computed by a pure function. It is safe
// for concurrent use and lock-free for reads. When it holds more than max
// entries it is emptied, so memory stays bounded whatever strings pods use;
// the values are pure, so dropping them only costs a recomputation.
type boundedCache[V any] struct {
	m   sync.Map // string -> *V
	n   atomic.Int64
	max int64
}

func newBoundedCache[V any](max int) *boundedCache[V] {
	return &boundedCache[V]{max: int64(max)}
}

// get returns the cached value for key and whether it was cached.
func (c *boundedCache[V]) get(key string) (*V, bool) {
	v, ok := c.m.Load(key)
	if !ok {
		return nil, false
	}
	return v.(*V), true
}

// put stores value for key, emptying the cache first if it is full.
func (c *boundedCache[V]) put(key string, value *V) {
	if c.n.Add(1) > c.max {
		c.m.Clear()
		c.n.Store(1)
	}
	if _, loaded := c.m.LoadOrStore(key, value); loaded {
		c.n.Add(-1)
	}
}

// nameCacheSize bounds the number of image strings whose normalised name is
// remembered. Image strings come from pod specs, so a node sees a few hundred
// distinct ones; the bound only protects against abuse.
const nameCacheSize = 1 << 14

type normalized struct {
	name string
	err  error
}

// names caches NormalizeImageName results for the whole process: the result
// is a pure function of the string, so managers and policies share it.
var names = newBoundedCache[normalized](nameCacheSize)

// normalizeCached is NormalizeImageName through the process-wide cache. hit
// reports whether the result came from the cache.
func normalizeCached(image string) (name string, hit bool, err error) {
	if v, ok := names.get(image); ok {
		return v.name, true, v.err
	}
	name, err = NormalizeImageName(image)
	names.put(image, &normalized{name: name, err: err})
	return name, false, err
}
