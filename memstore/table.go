package memstore

import (
	"sync"
	"sync/atomic"

	"github.com/pullrecords/pullrecords/accessor"
)

// recordTable maps imageRefs to immutable entries. Reads are lock-free
// (sync.Map); every single-key operation is atomic, and the count follows
// the map exactly because it is changed only by the operation that inserted
// or removed a key.
type recordTable struct {
	m sync.Map // string -> *recordEntry
	n atomic.Int64
	// authoritative is set before the table is published and never changed:
	// a miss in an authoritative table means the record does not exist.
	authoritative bool
}

func (t *recordTable) load(ref string) *recordEntry {
	v, ok := t.m.Load(ref)
	if !ok {
		return nil
	}
	return v.(*recordEntry)
}

func (t *recordTable) store(e *recordEntry) {
	if _, loaded := t.m.Swap(e.ref(), e); !loaded {
		t.n.Add(1)
	}
}

func (t *recordTable) remove(ref string) {
	if _, loaded := t.m.LoadAndDelete(ref); loaded {
		t.n.Add(-1)
	}
}

func (t *recordTable) count() int { return int(t.n.Load()) }

// list returns new copies of every record. A key changed during the call
// appears with its old or its new value, or not at all if it was added or
// removed meanwhile; every other key appears exactly once.
func (t *recordTable) list() []*accessor.ImagePulledRecord {
	entries := make([]*recordEntry, 0, t.count())
	t.m.Range(func(_, v any) bool {
		entries = append(entries, v.(*recordEntry))
		return true
	})
	return records(entries)
}

// intentTable is the set of images with a pull intent.
type intentTable struct {
	m             sync.Map // string -> struct{}
	n             atomic.Int64
	authoritative bool
}

func (t *intentTable) has(image string) bool {
	_, ok := t.m.Load(image)
	return ok
}

func (t *intentTable) store(image string) {
	if _, loaded := t.m.Swap(image, struct{}{}); !loaded {
		t.n.Add(1)
	}
}

func (t *intentTable) remove(image string) {
	if _, loaded := t.m.LoadAndDelete(image); loaded {
		t.n.Add(-1)
	}
}

func (t *intentTable) count() int { return int(t.n.Load()) }

func (t *intentTable) list() []*accessor.ImagePullIntent {
	images := make([]string, 0, t.count())
	t.m.Range(func(k, _ any) bool {
		images = append(images, k.(string))
		return true
	})
	backing := make([]accessor.ImagePullIntent, len(images))
	out := make([]*accessor.ImagePullIntent, len(images))
	for i, image := range images {
		backing[i].Image = image
		out[i] = &backing[i]
	}
	return out
}
