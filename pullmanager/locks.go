package pullmanager

import "sync"

// defaultLockStripes is the number of per-key lock stripes used when no
// WithLockStripes option is given.
const defaultLockStripes = 64

// stripedLocks maps a string key to one of a fixed set of mutexes. Two keys
// may share a stripe; that only costs waiting, never correctness.
//
// Unlike the kubelet's StripedLockSet, there is no upper clamp: the stripe is
// always hash % len(stripes), so any requested size is safe
// (kubernetes#138935 panicked when the modulus used an unclamped size).
type stripedLocks struct {
	stripes []paddedMutex
}

// paddedMutex keeps neighbouring stripes on different cache lines.
type paddedMutex struct {
	sync.Mutex
	_ [56]byte
}

func newStripedLocks(n int) *stripedLocks {
	if n < 1 {
		n = 1
	}
	return &stripedLocks{stripes: make([]paddedMutex, n)}
}

// fnv1a32 hashes s with 32-bit FNV-1a without allocating.
func fnv1a32(s string) uint32 {
	const (
		offset = 2166136261
		prime  = 16777619
	)
	h := uint32(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= prime
	}
	return h
}

func (l *stripedLocks) forKey(key string) *sync.Mutex {
	return &l.stripes[fnv1a32(key)%uint32(len(l.stripes))].Mutex
}

// lock locks key's stripe and returns the function that unlocks it.
func (l *stripedLocks) lock(key string) func() {
	mu := l.forKey(key)
	mu.Lock()
	return mu.Unlock
}
