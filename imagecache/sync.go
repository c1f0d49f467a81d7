package imagecache

import (
	"context"
	"fmt"
	"slices"
)

// SyncResult says what Sync changed.
type SyncResult struct {
	// Applied are the caches Sync applied: new ones (create) and changed
	// ones (update), sorted by namespace/name.
	Applied []CacheRef
	// Deleted are the applied caches Sync deleted because caches does not
	// list them, sorted by namespace/name.
	Deleted []CacheRef
	// Unchanged counts the caches listed exactly as they are applied.
	Unchanged int
}

// Changed reports whether Sync applied or deleted anything.
func (r SyncResult) Changed() bool { return len(r.Applied) > 0 || len(r.Deleted) > 0 }

// Sync makes caches the whole set of applied caches, as a declarative
// source (a file another process edits) needs: every cache that is new or
// differs from its applied version is applied (Apply), every applied cache
// caches does not list is deleted (Delete), and a cache listed exactly as
// applied is left alone, so no work is queued for it.
//
// Every cache is checked before anything changes: a cache without a
// namespace or name, with an empty image, listed twice (ErrInvalidCache),
// or, in a standalone manager, with a pull secret (*PrivateImageError)
// fails Sync with nothing applied or deleted. After the checks, only a
// failure to persist the state or a shut-down manager can stop Sync
// partway; the result then lists what it did so far.
func (m *Manager) Sync(ctx context.Context, caches []ImageCache) (SyncResult, error) {
	var res SyncResult
	want := make(map[CacheRef]ImageCache, len(caches))
	order := make([]CacheRef, 0, len(caches))
	for _, c := range caches {
		n, err := normalize(c)
		if err != nil {
			return res, err
		}
		if m.pulls == nil && n.PullSecret != nil {
			return res, privateImageError(n)
		}
		ref := n.Ref()
		if _, dup := want[ref]; dup {
			return res, fmt.Errorf("%w: %s is listed twice", ErrInvalidCache, ref)
		}
		want[ref] = n
		order = append(order, ref)
	}
	slices.SortFunc(order, func(a, b CacheRef) int { return compareRefs(a, b) })

	applied := m.Caches()
	for _, ref := range order {
		c := want[ref]
		i := slices.IndexFunc(applied, func(a ImageCache) bool { return a.Ref() == ref })
		if i >= 0 && sameSpec(applied[i], c) {
			res.Unchanged++
			continue
		}
		if err := m.Apply(ctx, c); err != nil {
			return res, fmt.Errorf("applying %s: %w", ref, err)
		}
		res.Applied = append(res.Applied, ref)
	}
	for _, a := range applied {
		if _, ok := want[a.Ref()]; ok {
			continue
		}
		if err := m.Delete(ctx, a.Namespace, a.Name); err != nil {
			return res, fmt.Errorf("deleting %s: %w", a.Ref(), err)
		}
		res.Deleted = append(res.Deleted, a.Ref())
	}
	return res, nil
}

func compareRefs(a, b CacheRef) int {
	switch as, bs := a.String(), b.String(); {
	case as < bs:
		return -1
	case as > bs:
		return 1
	}
	return 0
}

// sameSpec reports whether two normalized caches are the same version: the
// same images in the same order, credentials, ForceFullCache and refresh
// interval.
func sameSpec(a, b ImageCache) bool {
	return a.Ref() == b.Ref() && slices.Equal(a.Images, b.Images) && a.ForceFullCache == b.ForceFullCache &&
		a.RefreshInterval == b.RefreshInterval && sameSecret(a.PullSecret, b.PullSecret)
}

// Pending returns the number of requests queued, waiting for a retry, or in
// flight, over all caches.
func (m *Manager) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.entries {
		n += len(e.waiting) + e.inFlight
	}
	return n
}
