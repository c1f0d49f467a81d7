package crishim

import (
	"sync"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// memoLimit bounds each memo. A node sees a few hundred images and
// credentials; past the bound a memo starts over rather than grow with
// whatever a caller sends.
const memoLimit = 4096

// memo remembers the value a pure function gave for a key, so that the
// remembered-pull path neither re-parses an image nor re-hashes a
// credential (both allocate). It only saves work: a miss computes the
// same value again, so nothing it holds can change a decision.
type memo[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

// get returns the value for k, computing it with f on a miss. Errors are
// not remembered.
func (c *memo[K, V]) get(k K, f func(K) (V, error)) (V, error) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v, nil
	}
	v, err := f(k)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= memoLimit {
		c.m = make(map[K]V)
	}
	c.m[k] = v
	c.mu.Unlock()
	return v, nil
}

// hashCredential is imageruntime.CredentialHash as a memo's function.
func hashCredential(a imageruntime.AuthConfig) (string, error) {
	return imageruntime.CredentialHash(a), nil
}
