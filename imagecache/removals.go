package imagecache

// pendingRemoval is the removal (a purge or a delete) of an image that a
// cache queued and that has not completed yet. The manager keeps these so a
// restart finishes them; persistedPurge is their form in the state file.
type pendingRemoval struct {
	cache    CacheRef
	image    string
	workType WorkType
}

func (r pendingRemoval) persisted() persistedPurge {
	return persistedPurge{Image: r.image, Namespace: r.cache.Namespace, Name: r.cache.Name, WorkType: r.workType}
}

func (pp persistedPurge) removal() pendingRemoval {
	return pendingRemoval{cache: CacheRef{Namespace: pp.Namespace, Name: pp.Name}, image: pp.Image, workType: pp.WorkType}
}

// addRemovalsLocked records a pending removal of type wt by ref for each
// image, and returns the ones that were not pending yet, for
// dropRemovalsLocked to take back if saving the state fails. m.mu must be
// held.
func (m *Manager) addRemovalsLocked(ref CacheRef, wt WorkType, images []string) []pendingRemoval {
	var added []pendingRemoval
	for _, img := range images {
		r := pendingRemoval{cache: ref, image: img, workType: wt}
		if _, ok := m.removals[r]; !ok {
			m.removals[r] = struct{}{}
			added = append(added, r)
		}
	}
	return added
}

// dropRemovalsLocked forgets removals addRemovalsLocked added. m.mu must be
// held.
func (m *Manager) dropRemovalsLocked(added []pendingRemoval) {
	for _, r := range added {
		delete(m.removals, r)
	}
}
