package pullmanager

import (
	"context"
	"errors"
	"sort"
	"sync"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

var errInjected = errors.New("injected failure")

// fakeStore is a small in-memory PullRecordsAccessor with failure injection
// and call counting. It implements RecordPeeker and RecordCounter.
type fakeStore struct {
	mu      sync.Mutex
	intents map[string]bool
	records map[string]*accessor.ImagePulledRecord
	// fail maps a method name to the error it returns.
	fail map[string]error
	// calls counts calls per method name.
	calls map[string]int
}

func newFakeStore() *fakeStore {
	return &fakeStore{
		intents: map[string]bool{},
		records: map[string]*accessor.ImagePulledRecord{},
		fail:    map[string]error{},
		calls:   map[string]int{},
	}
}

func (s *fakeStore) enter(method string) error {
	s.calls[method]++
	return s.fail[method]
}

func (s *fakeStore) setFail(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.fail, method)
	} else {
		s.fail[method] = err
	}
}

func (s *fakeStore) callCount(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

func (s *fakeStore) ListImagePullIntents() ([]*accessor.ImagePullIntent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter("ListImagePullIntents"); err != nil {
		return nil, err
	}
	var out []*accessor.ImagePullIntent
	for img := range s.intents {
		out = append(out, &accessor.ImagePullIntent{Image: img})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Image < out[j].Image })
	return out, nil
}

func (s *fakeStore) ImagePullIntentExists(image string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter("ImagePullIntentExists"); err != nil {
		return false, err
	}
	return s.intents[image], nil
}

func (s *fakeStore) WriteImagePullIntent(_ klog.Logger, image string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter("WriteImagePullIntent"); err != nil {
		return err
	}
	s.intents[image] = true
	return nil
}

func (s *fakeStore) DeleteImagePullIntent(_ klog.Logger, image string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter("DeleteImagePullIntent"); err != nil {
		return err
	}
	delete(s.intents, image)
	return nil
}

func (s *fakeStore) ListImagePulledRecords() ([]*accessor.ImagePulledRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter("ListImagePulledRecords"); err != nil {
		return nil, err
	}
	var out []*accessor.ImagePulledRecord
	for _, r := range s.records {
		out = append(out, r.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ImageRef < out[j].ImageRef })
	return out, nil
}

func (s *fakeStore) GetImagePulledRecord(imageRef string) (*accessor.ImagePulledRecord, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter("GetImagePulledRecord"); err != nil {
		return nil, true, err
	}
	r, ok := s.records[imageRef]
	return r.DeepCopy(), ok, nil
}

func (s *fakeStore) PeekImagePulledRecord(imageRef string) (*accessor.ImagePulledRecord, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter("GetImagePulledRecord"); err != nil {
		return nil, true, err
	}
	r, ok := s.records[imageRef]
	return r, ok, nil
}

func (s *fakeStore) WriteImagePulledRecord(_ klog.Logger, r *accessor.ImagePulledRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter("WriteImagePulledRecord"); err != nil {
		return err
	}
	if r == nil {
		return accessor.ErrNilRecord
	}
	s.records[r.ImageRef] = r.ForStorage()
	return nil
}

func (s *fakeStore) DeleteImagePulledRecord(_ klog.Logger, imageRef string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter("DeleteImagePulledRecord"); err != nil {
		return err
	}
	delete(s.records, imageRef)
	return nil
}

func (s *fakeStore) CountImagePullIntents() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.intents)
}

func (s *fakeStore) CountImagePulledRecords() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// record returns a copy of the stored record of imageRef, or nil.
func (s *fakeStore) record(imageRef string) *accessor.ImagePulledRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records[imageRef].DeepCopy()
}

func (s *fakeStore) hasIntent(image string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.intents[image]
}

// plainStore hides the optional interfaces of a store, so the manager uses
// only the eight accessor methods.
type plainStore struct{ accessor.PullRecordsAccessor }

// fakeImages is an ImageLister over a fixed list.
type fakeImages struct {
	images []Image
	err    error
}

func (f *fakeImages) ListImages(_ context.Context) ([]Image, error) { return f.images, f.err }
