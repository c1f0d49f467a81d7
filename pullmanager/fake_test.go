package pullmanager

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/memstore"
)

var errInjected = errors.New("injected failure")

// newFaultyStore returns the store most tests run on: an empty memstore
// behind accessortest.Faulty, which counts the calls that reach it and fails
// those a test asks it to. Hand the manager store.Accessor(), which peeks
// and counts as the memstore does, or store itself to give it only the
// eight accessor methods.
func newFaultyStore() *accessortest.FaultyAccessor {
	return accessortest.Faulty(memstore.New())
}

// putRecords stores records in the memstore directly: no fault, no log.
func putRecords(t testing.TB, s *accessortest.FaultyAccessor, records ...*accessor.ImagePulledRecord) {
	t.Helper()
	for _, r := range records {
		if err := s.Inner().WriteImagePulledRecord(klog.Background(), r); err != nil {
			t.Fatalf("storing record %s: %v", r.ImageRef, err)
		}
	}
}

// putIntents stores intents in the memstore directly.
func putIntents(t testing.TB, s *accessortest.FaultyAccessor, images ...string) {
	t.Helper()
	for _, image := range images {
		if err := s.Inner().WriteImagePullIntent(klog.Background(), image); err != nil {
			t.Fatalf("storing intent %s: %v", image, err)
		}
	}
}

// storedRecord returns a copy of the stored record of imageRef, nil if there
// is none, read from the memstore directly.
func storedRecord(t testing.TB, s *accessortest.FaultyAccessor, imageRef string) *accessor.ImagePulledRecord {
	t.Helper()
	r, _, err := s.Inner().GetImagePulledRecord(imageRef)
	if err != nil {
		t.Fatalf("reading record %s: %v", imageRef, err)
	}
	return r
}

// hasIntent reports whether an intent for image is stored.
func hasIntent(t testing.TB, s *accessortest.FaultyAccessor, image string) bool {
	t.Helper()
	ok, err := s.Inner().ImagePullIntentExists(image)
	if err != nil {
		t.Fatalf("reading intent %s: %v", image, err)
	}
	return ok
}

// storedIntents returns the stored intents, sorted.
func storedIntents(t testing.TB, s *accessortest.FaultyAccessor) []string {
	t.Helper()
	intents, err := s.Inner().ListImagePullIntents()
	if err != nil {
		t.Fatalf("listing intents: %v", err)
	}
	return accessortest.IntentImages(intents)
}

// storedRefs returns the imageRefs of the stored records, sorted.
func storedRefs(t testing.TB, s accessor.PullRecordsAccessor) []string {
	t.Helper()
	records, err := s.ListImagePulledRecords()
	if err != nil {
		t.Fatalf("listing records: %v", err)
	}
	return accessortest.RecordRefs(records)
}

// setFail makes every call of method from now on fail with err, or heals
// method when err is nil. Failing GetImagePulledRecord fails
// PeekImagePulledRecord as well: a test that makes record reads fail means
// both ways the manager reads a record.
func setFail(s *accessortest.FaultyAccessor, method string, err error) {
	methods := []string{method}
	if method == "GetImagePulledRecord" {
		methods = append(methods, "PeekImagePulledRecord")
	}
	s.Heal(methods...)
	if err != nil {
		for _, m := range methods {
			s.Fail(m, err)
		}
	}
}

// onFirstCall runs fn once, at the first call of method that reaches s,
// before the call goes on to the store.
func onFirstCall(s *accessortest.FaultyAccessor, method string, fn func()) {
	var done atomic.Bool
	s.OnCall(func(c accessortest.Call) {
		if c.Method == method && done.CompareAndSwap(false, true) {
			fn()
		}
	})
}

// fakeImages is an imageruntime.ImageLister over a fixed list.
type fakeImages struct {
	images []imageruntime.Image
	err    error
}

func (f *fakeImages) ListImages(_ context.Context) ([]imageruntime.Image, error) {
	return f.images, f.err
}
