package fsstore

import (
	"hash/maphash"
	"sync"
)

// stripeCount is the number of per-key lock stripes. Writers of different
// keys rarely share a stripe; writers of one key always do.
const stripeCount = 64

// stripedLocks serialises writers and deleters of the same file name. The
// file name is already a hash, so any bits of it pick a stripe evenly.
type stripedLocks struct {
	seed    maphash.Seed
	once    sync.Once
	stripes [stripeCount]sync.Mutex
}

func (l *stripedLocks) lock(name string) (unlock func()) {
	l.once.Do(func() { l.seed = maphash.MakeSeed() })
	m := &l.stripes[maphash.String(l.seed, name)%stripeCount]
	m.Lock()
	return m.Unlock
}
