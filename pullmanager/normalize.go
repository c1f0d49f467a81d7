package pullmanager

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/distribution/reference"
)

// MappingKey returns the key under which a pulled record maps credentials
// for image, exactly as the kubelet (v1.37) computes it: image must parse as
// a reference (reference.Parse, which does not normalise), and its tag and
// digest are then cut off the raw string. Nothing else changes, so
// "busybox:1.36" gives "busybox", "library/busybox:1" gives
// "library/busybox" and "docker.io/library/busybox@sha256:…" gives
// "docker.io/library/busybox": three different keys, as upstream. An image
// that does not parse gives an error matching ErrInvalidImageName.
func MappingKey(image string) (string, error) {
	parsed, err := reference.Parse(image)
	if err != nil {
		return "", fmt.Errorf("%w %q: %w", ErrInvalidImageName, image, err)
	}
	key := image
	if d, ok := parsed.(reference.Digested); ok {
		key = strings.TrimSuffix(key, "@"+d.Digest().String())
	}
	if t, ok := parsed.(reference.Tagged); ok {
		key = strings.TrimSuffix(key, ":"+t.Tag())
	}
	return key, nil
}

// NormalizeImageName returns the fully qualified repository name of image
// without tag or digest, as reference.ParseNormalizedNamed(image).Name()
// returns it: "busybox:1.36" and "docker.io/library/busybox@sha256:…" both
// give "docker.io/library/busybox". It is the mapping key of the opt-in
// WithNormalizedImageNames mode, not the kubelet's. An image that does not
// parse gives an error matching ErrInvalidImageName.
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

// nameCacheSize bounds the number of image strings whose key is remembered,
// per kind of key. Image strings come from pod specs, so a node sees a few
// hundred distinct ones; the bound only protects against abuse.
const nameCacheSize = 1 << 14

type imageKey struct {
	key string
	err error
}

// upstreamKeys and normalizedKeys cache MappingKey and NormalizeImageName
// results for the whole process: both are pure functions of the string, so
// managers and policies share them.
var (
	upstreamKeys   = newBoundedCache[imageKey](nameCacheSize)
	normalizedKeys = newBoundedCache[imageKey](nameCacheSize)
)

// keyFunc computes a mapping key from an image string, with a cache in
// front. hit reports whether the result came from the cache.
type keyFunc func(image string) (key string, hit bool, err error)

func cachedKey(cache *boundedCache[imageKey], compute func(string) (string, error)) keyFunc {
	return func(image string) (string, bool, error) {
		if v, ok := cache.get(image); ok {
			return v.key, true, v.err
		}
		key, err := compute(image)
		cache.put(image, &imageKey{key: key, err: err})
		return key, false, err
	}
}

var (
	// upstreamKeyCached is MappingKey through the process-wide cache.
	upstreamKeyCached = cachedKey(upstreamKeys, MappingKey)
	// normalizeCached is NormalizeImageName through the process-wide cache.
	normalizeCached = cachedKey(normalizedKeys, NormalizeImageName)
)
