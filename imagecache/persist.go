package imagecache

import "sort"

// load reads the state directory and queues unfinished work.
func (m *Manager) load() error {
	p, err := readState(m.opts.stateDir)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	for _, pc := range p.Caches {
		c, err := pc.spec()
		if err != nil {
			return err
		}
		cs := &cacheState{spec: c, generation: pc.Generation, completed: pc.Completed, pendingType: pc.PendingWorkType, lastRefresh: now}
		m.caches[c.Ref()] = cs
	}
	for _, pp := range p.Purges {
		m.removals[pp.removal()] = struct{}{}
	}
	m.loadLastStatusLocked()
	// Resume, in the order the file lists them.
	for _, pc := range p.Caches {
		ref := CacheRef{Namespace: pc.Namespace, Name: pc.Name}
		cs := m.caches[ref]
		if cs.completed >= cs.generation {
			continue
		}
		wt := cs.pendingType
		if wt == "" {
			wt = WorkTypeCreate
		}
		m.logger.Info("Resuming unfinished image cache work", "cache", ref, "workType", wt, "images", len(cs.spec.Images))
		m.enqueueLocked(ref, wt, cs, m.pullRequests(ref, wt, cs.spec, cs.spec.Images), nil)
	}
	type purgeBatchKey struct {
		ref CacheRef
		wt  WorkType
	}
	var order []purgeBatchKey
	groups := map[purgeBatchKey][]ImageWorkRequest{}
	for _, pp := range p.Purges {
		k := purgeBatchKey{CacheRef{pp.Namespace, pp.Name}, pp.WorkType}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], m.newRequest(pp.Image, pp.WorkType, false, k.ref))
	}
	for _, k := range order {
		m.logger.Info("Resuming unfinished image removals", "cache", k.ref, "workType", k.wt, "images", len(groups[k]))
		m.enqueueLocked(k.ref, k.wt, nil, nil, groups[k])
	}
	return nil
}

func (m *Manager) saveLocked() error {
	if m.opts.stateDir == "" {
		return nil
	}
	p := &persisted{Version: stateVersion}
	refs := make([]CacheRef, 0, len(m.caches))
	for ref := range m.caches {
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	for _, ref := range refs {
		cs := m.caches[ref]
		p.Caches = append(p.Caches, persistedCache{
			Namespace: ref.Namespace, Name: ref.Name, Images: cs.spec.Images, ForceFullCache: cs.spec.ForceFullCache,
			PullSecret: cs.spec.PullSecret, RefreshInterval: cs.spec.RefreshInterval,
			Generation: cs.generation, Completed: cs.completed, PendingWorkType: cs.pendingType,
		})
	}
	for r := range m.removals {
		p.Purges = append(p.Purges, r.persisted())
	}
	sort.Slice(p.Purges, func(i, j int) bool {
		a, b := p.Purges[i], p.Purges[j]
		if a.Namespace+"/"+a.Name != b.Namespace+"/"+b.Name {
			return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
		}
		if a.WorkType != b.WorkType {
			return a.WorkType < b.WorkType
		}
		return a.Image < b.Image
	})
	return writeState(m.opts.stateDir, p)
}
