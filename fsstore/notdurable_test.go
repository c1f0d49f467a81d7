package fsstore

import (
	"errors"
	"testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/memstore"
)

// A directory fsync that fails after the rename or removal leaves the change
// visible: the error says so (accessor.ErrNotDurable), and a cache in front
// follows the store instead of keeping the old value (found in review).
func TestDirectorySyncFailureIsNotDurableAndCacheFollows(t *testing.T) {
	logger := testLogger(t)
	ctl := &faultCtl{only: "syncdir"}
	s := openStore(t, t.TempDir(), withFaults(ctl))
	c, err := memstore.NewCache(logger, s)
	if err != nil {
		t.Fatal(err)
	}
	rec := testRecord(1)
	if err := c.WriteImagePulledRecord(logger, rec); err != nil {
		t.Fatal(err)
	}

	ctl.arm(1, false)
	err = c.DeleteImagePulledRecord(logger, rec.ImageRef)
	if !errors.Is(err, accessor.ErrNotDurable) || !errors.Is(err, errInjected) {
		t.Fatalf("delete with a failing directory fsync: %v, want ErrNotDurable wrapping the fault", err)
	}
	_, onDisk, _ := s.GetImagePulledRecord(rec.ImageRef)
	_, cached, _ := c.GetImagePulledRecord(rec.ImageRef)
	if onDisk || cached {
		t.Errorf("after the delete: on disk %v, cached %v; want neither", onDisk, cached)
	}

	ctl.arm(1, false)
	err = c.WriteImagePulledRecord(logger, testRecord(2))
	if !errors.Is(err, accessor.ErrNotDurable) {
		t.Fatalf("write with a failing directory fsync: %v, want ErrNotDurable", err)
	}
	_, onDisk, _ = s.GetImagePulledRecord(testRecord(2).ImageRef)
	_, cached, _ = c.GetImagePulledRecord(testRecord(2).ImageRef)
	if !onDisk || !cached {
		t.Errorf("after the write: on disk %v, cached %v; want both", onDisk, cached)
	}
}
