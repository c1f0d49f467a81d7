package memstore_test

import (
	"errors"
	"fmt"
	"testing"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
	"github.com/pullrecords/pullrecords/memstore"
)

// notDurableStore applies every change and then reports it as not durable,
// as fsstore does when the directory fsync after a rename or removal fails.
type notDurableStore struct{ *memstore.Store }

var errSyncDir = fmt.Errorf("%w: syncing directory: injected", accessor.ErrNotDurable)

func (s notDurableStore) WriteImagePullIntent(l klog.Logger, image string) error {
	return errors.Join(s.Store.WriteImagePullIntent(l, image), errSyncDir)
}
func (s notDurableStore) DeleteImagePullIntent(l klog.Logger, image string) error {
	return errors.Join(s.Store.DeleteImagePullIntent(l, image), errSyncDir)
}
func (s notDurableStore) WriteImagePulledRecord(l klog.Logger, r *accessor.ImagePulledRecord) error {
	return errors.Join(s.Store.WriteImagePulledRecord(l, r), errSyncDir)
}
func (s notDurableStore) DeleteImagePulledRecord(l klog.Logger, ref string) error {
	return errors.Join(s.Store.DeleteImagePulledRecord(l, ref), errSyncDir)
}

// Found in review: after a directory fsync failure the store already shows
// the change, so a cache that kept the old value would serve a deleted
// record (with its credentials) until the next reload.
func TestCacheFollowsChangesThatAreNotDurable(t *testing.T) {
	logger := klog.Background()
	backing := memstore.New()
	rec := accessortest.NewRecord("sha256:a", "registry.example/a")
	if err := backing.WriteImagePulledRecord(logger, rec); err != nil {
		t.Fatal(err)
	}
	if err := backing.WriteImagePullIntent(logger, "registry.example/a:1"); err != nil {
		t.Fatal(err)
	}
	c, err := memstore.NewCache(logger, notDurableStore{backing})
	if err != nil || !c.Authoritative() {
		t.Fatalf("NewCache: %v", err)
	}
	if err := c.DeleteImagePulledRecord(logger, "sha256:a"); !errors.Is(err, accessor.ErrNotDurable) {
		t.Fatalf("delete: %v, want ErrNotDurable", err)
	}
	if _, found, _ := c.GetImagePulledRecord("sha256:a"); found {
		t.Error("the cache still serves a record the store deleted")
	}
	if err := c.DeleteImagePullIntent(logger, "registry.example/a:1"); !errors.Is(err, accessor.ErrNotDurable) {
		t.Fatalf("delete intent: %v", err)
	}
	if ok, _ := c.ImagePullIntentExists("registry.example/a:1"); ok {
		t.Error("the cache still has an intent the store deleted")
	}
	if err := c.WriteImagePulledRecord(logger, accessortest.NewRecord("sha256:b", "registry.example/b")); !errors.Is(err, accessor.ErrNotDurable) {
		t.Fatalf("write: %v", err)
	}
	if _, found, _ := c.GetImagePulledRecord("sha256:b"); !found {
		t.Error("the cache misses a record the store shows")
	}
	if err := c.WriteImagePullIntent(logger, "registry.example/b:1"); !errors.Is(err, accessor.ErrNotDurable) {
		t.Fatalf("write intent: %v", err)
	}
	if ok, _ := c.ImagePullIntentExists("registry.example/b:1"); !ok {
		t.Error("the cache misses an intent the store shows")
	}
}
