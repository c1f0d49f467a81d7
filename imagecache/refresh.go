package imagecache

import (
	"context"
	"sort"
)

// refreshLocked queues a refresh of every image of the cache and starts its
// refresh interval again. m.mu must be held.
func (m *Manager) refreshLocked(ref CacheRef, cs *cacheState) {
	cs.lastRefresh = m.clock.Now()
	m.enqueueLocked(ref, WorkTypeRefresh, cs, m.pullRequests(ref, WorkTypeRefresh, cs.spec, cs.spec.Images), nil)
}

// refreshLoop calls refreshDue at every tick of the refresh check period
// until ctx is done.
func (m *Manager) refreshLoop(ctx context.Context) {
	t := m.clock.NewTicker(m.opts.refreshCheckPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			m.refreshDue()
		}
	}
}

// refreshDue refreshes every cache whose refresh interval has passed since
// its last refresh, in namespace/name order.
func (m *Manager) refreshDue() {
	m.mu.Lock()
	now := m.clock.Now()
	refs := make([]CacheRef, 0)
	for ref, cs := range m.caches {
		if iv := cs.spec.RefreshInterval; iv > 0 && !now.Before(cs.lastRefresh.Add(iv)) {
			refs = append(refs, ref)
		}
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	for _, ref := range refs {
		m.logger.V(2).Info("Refreshing image cache", "cache", ref)
		m.refreshLocked(ref, m.caches[ref])
	}
	m.mu.Unlock()
	m.flush()
}
