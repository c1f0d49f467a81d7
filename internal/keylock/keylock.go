package keylock

import (
	"hash/maphash"
	"sync"
)

// Set is a fixed set of stripes. The zero value is not usable; use New.
type Set struct {
	seed    maphash.Seed
	stripes []stripe
}

type stripe struct {
	sync.Mutex
	_ [64 - 8]byte // keep neighbouring stripes on different cache lines
}

// New returns a Set of n stripes; n below 1 means 1.
func New(n int) *Set {
	if n < 1 {
		n = 1
	}
	return &Set{seed: maphash.MakeSeed(), stripes: make([]stripe, n)}
}

// Len returns the number of stripes.
func (s *Set) Len() int { return len(s.stripes) }

// Index returns the stripe key uses.
func (s *Set) Index(key string) int {
	return int(maphash.String(s.seed, key) % uint64(len(s.stripes)))
}

// Lock locks key's stripe and returns the function that unlocks it.
func (s *Set) Lock(key string) (unlock func()) {
	m := &s.stripes[s.Index(key)].Mutex
	m.Lock()
	return m.Unlock
}

// LockAll locks every stripe, in index order, and returns the function that
// unlocks them all. Callers that also lock single keys must not hold one
// while calling LockAll.
func (s *Set) LockAll() (unlockAll func()) {
	for i := range s.stripes {
		s.stripes[i].Lock()
	}
	return func() {
		for i := range s.stripes {
			s.stripes[i].Unlock()
		}
	}
}
