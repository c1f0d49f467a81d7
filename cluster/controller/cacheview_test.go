package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/pullrecords/pullrecords/cluster/api"
)

func unstructuredCache(t *testing.T, name, uid, rv string, images ...string) *unstructured.Unstructured {
	t.Helper()
	ic := api.ImageCache{}
	ic.Namespace, ic.Name, ic.UID, ic.ResourceVersion = "t", name, types.UID("uid-"+uid), rv
	ic.Spec.CacheSpec = []api.CacheSpecImages{{Images: images}}
	u, err := api.ToUnstructured(&ic)
	if err != nil {
		t.Fatal(err)
	}
	u.SetGroupVersionKind(api.ImageCacheKind)
	return u
}

// The view converts an object once per resource version, converts it
// again when it changes, and forgets deleted caches.
func TestCacheViewConvertsOncePerResourceVersion(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	v := newCacheView(cache.NewGenericLister(idx, api.ImageCacheResource.GroupResource()))
	if err := idx.Add(unstructuredCache(t, "a", "1", "10", "a:1")); err != nil {
		t.Fatal(err)
	}
	if err := idx.Add(unstructuredCache(t, "b", "2", "20", "b:1")); err != nil {
		t.Fatal(err)
	}
	first := byName(t, v)
	if len(first) != 2 || first["a"].Spec.CacheSpec[0].Images[0] != "a:1" {
		t.Fatalf("first list: %+v", first)
	}
	again := byName(t, v)
	if again["a"] != first["a"] || again["b"] != first["b"] {
		t.Error("an unchanged object was converted again")
	}
	if err := idx.Update(unstructuredCache(t, "a", "1", "11", "a:2")); err != nil {
		t.Fatal(err)
	}
	changed := byName(t, v)
	if changed["a"] == first["a"] || changed["a"].Spec.CacheSpec[0].Images[0] != "a:2" || changed["b"] != first["b"] {
		t.Errorf("after an update: a %+v (same value %v), b same %v", changed["a"].Spec, changed["a"] == first["a"], changed["b"] == first["b"])
	}
	if err := idx.Delete(unstructuredCache(t, "b", "2", "20")); err != nil {
		t.Fatal(err)
	}
	if got := byName(t, v); len(got) != 1 || len(v.seen) != 1 {
		t.Errorf("after a delete: %d listed, %d remembered, want 1 and 1", len(got), len(v.seen))
	}
}

func byName(t *testing.T, v *cacheView) map[string]*api.ImageCache {
	t.Helper()
	list, err := v.list()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*api.ImageCache{}
	for _, ic := range list {
		out[ic.Name] = ic
	}
	return out
}
