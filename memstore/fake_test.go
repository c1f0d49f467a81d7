package memstore

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

var errInjected = errors.New("injected failure")

// fakeDelegate is a PullRecordsAccessor over a Store that records the calls
// that reach it, fails the methods it is told to, and can hold "corrupt"
// records that exist but cannot be read. It does not implement
// RecordCounter, so a Cache over it counts its own entries.
type fakeDelegate struct {
	inner *Store

	mu      sync.Mutex
	calls   []string
	fail    map[string]bool // method name -> fail it
	corrupt map[string]bool // imageRef -> corrupt
	yield   bool            // call runtime.Gosched inside writes to widen races
}

func newFakeDelegate() *fakeDelegate {
	return &fakeDelegate{inner: New(), fail: map[string]bool{}, corrupt: map[string]bool{}}
}

// call records a call and reports whether it must fail.
func (f *fakeDelegate) call(method, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if key != "" {
		f.calls = append(f.calls, method+" "+key)
	} else {
		f.calls = append(f.calls, method)
	}
	if f.fail[method] {
		return fmt.Errorf("%s: %w", method, errInjected)
	}
	return nil
}

func (f *fakeDelegate) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

func (f *fakeDelegate) setFail(method string, fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[method] = fail
}

func (f *fakeDelegate) setCorrupt(imageRef string, corrupt bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.corrupt[imageRef] = corrupt
}

func (f *fakeDelegate) isCorrupt(imageRef string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.corrupt[imageRef]
}

func (f *fakeDelegate) corruptErr(imageRef string) error {
	return &accessor.CorruptRecordError{Path: "fake/" + imageRef, Err: accessor.ErrMalformed}
}

func (f *fakeDelegate) ListImagePullIntents() ([]*accessor.ImagePullIntent, error) {
	if err := f.call("ListImagePullIntents", ""); err != nil {
		return nil, err
	}
	return f.inner.ListImagePullIntents()
}

func (f *fakeDelegate) ImagePullIntentExists(image string) (bool, error) {
	if err := f.call("ImagePullIntentExists", image); err != nil {
		return false, err
	}
	return f.inner.ImagePullIntentExists(image)
}

func (f *fakeDelegate) WriteImagePullIntent(logger klog.Logger, image string) error {
	if err := f.call("WriteImagePullIntent", image); err != nil {
		return err
	}
	f.maybeYield()
	return f.inner.WriteImagePullIntent(logger, image)
}

func (f *fakeDelegate) DeleteImagePullIntent(logger klog.Logger, image string) error {
	if err := f.call("DeleteImagePullIntent", image); err != nil {
		return err
	}
	f.maybeYield()
	return f.inner.DeleteImagePullIntent(logger, image)
}

// ListImagePulledRecords returns the readable records and a ListError naming
// the corrupt ones, as a file store does.
func (f *fakeDelegate) ListImagePulledRecords() ([]*accessor.ImagePulledRecord, error) {
	if err := f.call("ListImagePulledRecords", ""); err != nil {
		return nil, err
	}
	all, _ := f.inner.ListImagePulledRecords()
	var good []*accessor.ImagePulledRecord
	var errs []error
	for _, r := range all {
		if f.isCorrupt(r.ImageRef) {
			errs = append(errs, f.corruptErr(r.ImageRef))
			continue
		}
		good = append(good, r)
	}
	if len(errs) > 0 {
		return good, &accessor.ListError{What: "image pulled records", Errs: errs}
	}
	return good, nil
}

func (f *fakeDelegate) GetImagePulledRecord(imageRef string) (*accessor.ImagePulledRecord, bool, error) {
	if err := f.call("GetImagePulledRecord", imageRef); err != nil {
		return nil, false, err
	}
	r, ok, err := f.inner.GetImagePulledRecord(imageRef)
	if ok && f.isCorrupt(imageRef) {
		return nil, true, f.corruptErr(imageRef)
	}
	return r, ok, err
}

func (f *fakeDelegate) WriteImagePulledRecord(logger klog.Logger, record *accessor.ImagePulledRecord) error {
	key := ""
	if record != nil {
		key = record.ImageRef
	}
	if err := f.call("WriteImagePulledRecord", key); err != nil {
		return err
	}
	f.maybeYield()
	return f.inner.WriteImagePulledRecord(logger, record)
}

func (f *fakeDelegate) DeleteImagePulledRecord(logger klog.Logger, imageRef string) error {
	if err := f.call("DeleteImagePulledRecord", imageRef); err != nil {
		return err
	}
	f.maybeYield()
	return f.inner.DeleteImagePulledRecord(logger, imageRef)
}

func (f *fakeDelegate) maybeYield() {
	f.mu.Lock()
	y := f.yield
	f.mu.Unlock()
	if y {
		runtime.Gosched()
	}
}

// countingDelegate is a fakeDelegate that also counts, like a file store.
type countingDelegate struct {
	*fakeDelegate
	intents, records int
}

func (c *countingDelegate) CountImagePullIntents() int   { return c.intents }
func (c *countingDelegate) CountImagePulledRecords() int { return c.records }
