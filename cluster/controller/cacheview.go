package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// cacheView is the ImageCache informer's objects as typed values,
// converted once per resource version: every cache sync weighs every
// cache against each node's bound (admittedOn) and every node sync
// collects what every cache wants there (syncNode), and converting each
// object from unstructured on each of those was most of their cost.
//
// The values it returns are shared between syncs and workers: read them,
// never change them (copy the value, as admittedOn does, to change it).
type cacheView struct {
	lister cache.GenericLister

	mu   sync.Mutex
	seen map[types.UID]viewedCache
}

type viewedCache struct {
	resourceVersion string
	ic              *api.ImageCache
}

func newCacheView(lister cache.GenericLister) *cacheView {
	return &cacheView{lister: lister, seen: map[types.UID]viewedCache{}}
}

// list returns every cache the informer holds. An object that does not
// convert (the CRD's schema keeps that from happening) is left out, as a
// cache the controller cannot read.
func (v *cacheView) list() ([]*api.ImageCache, error) {
	objs, err := v.lister.List(everything())
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]*api.ImageCache, 0, len(objs))
	changed := false // some object is new or newer than the one seen
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		seen, ok := v.seen[u.GetUID()]
		if !ok || seen.resourceVersion != u.GetResourceVersion() {
			var ic api.ImageCache
			if api.FromUnstructured(u, &ic) != nil {
				continue
			}
			seen = viewedCache{resourceVersion: u.GetResourceVersion(), ic: &ic}
			v.seen[u.GetUID()] = seen
			changed = true
		}
		out = append(out, seen.ic)
	}
	if changed || len(v.seen) != len(out) {
		// Only the caches of this list stay: deleted ones are dropped here.
		// With nothing new and as many remembered as listed, the two sets
		// are the same and nothing is rebuilt.
		next := make(map[types.UID]viewedCache, len(out))
		for _, ic := range out {
			next[ic.UID] = v.seen[ic.UID]
		}
		v.seen = next
	}
	return out, nil
}
