package memstore

import (
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

// Store is a complete in-memory accessor.PullRecordsAccessor. The zero value
// is not usable; call New.
type Store struct {
	intents intentTable
	records recordTable
}

var (
	_ accessor.PullRecordsAccessor = (*Store)(nil)
	_ accessor.RecordPeeker        = (*Store)(nil)
	_ accessor.RecordCounter       = (*Store)(nil)
)

// New returns an empty Store.
func New() *Store {
	s := &Store{}
	s.intents.authoritative = true
	s.records.authoritative = true
	return s
}

// ListImagePullIntents returns every intent. It never fails.
func (s *Store) ListImagePullIntents() ([]*accessor.ImagePullIntent, error) {
	return s.intents.list(), nil
}

// ImagePullIntentExists reports whether an intent for image is stored.
func (s *Store) ImagePullIntentExists(image string) (bool, error) {
	return s.intents.has(image), nil
}

// WriteImagePullIntent stores an intent for image.
func (s *Store) WriteImagePullIntent(_ klog.Logger, image string) error {
	if err := accessor.ValidateKey(image); err != nil {
		return err
	}
	s.intents.store(image)
	return nil
}

// DeleteImagePullIntent removes the intent for image, if any.
func (s *Store) DeleteImagePullIntent(_ klog.Logger, image string) error {
	s.intents.remove(image)
	return nil
}

// ListImagePulledRecords returns copies of every record. It never fails.
func (s *Store) ListImagePulledRecords() ([]*accessor.ImagePulledRecord, error) {
	return s.records.list(), nil
}

// GetImagePulledRecord returns a copy of the record for imageRef.
func (s *Store) GetImagePulledRecord(imageRef string) (*accessor.ImagePulledRecord, bool, error) {
	e := s.records.load(imageRef)
	if e == nil {
		return nil, false, nil
	}
	return e.record(), true, nil
}

// PeekImagePulledRecord returns the stored record for imageRef without
// copying it. The record is shared and read-only: the caller must not modify
// it or anything it points to.
func (s *Store) PeekImagePulledRecord(imageRef string) (*accessor.ImagePulledRecord, bool, error) {
	e := s.records.load(imageRef)
	if e == nil {
		return nil, false, nil
	}
	return e.peek(), true, nil
}

// WriteImagePulledRecord stores a copy of record, its time in storage form.
func (s *Store) WriteImagePulledRecord(_ klog.Logger, record *accessor.ImagePulledRecord) error {
	if record == nil {
		return accessor.ErrNilRecord
	}
	if err := accessor.ValidateKey(record.ImageRef); err != nil {
		return err
	}
	s.records.store(newRecordEntry(record, nil))
	return nil
}

// DeleteImagePulledRecord removes the record for imageRef, if any.
func (s *Store) DeleteImagePulledRecord(_ klog.Logger, imageRef string) error {
	s.records.remove(imageRef)
	return nil
}

// CountImagePullIntents returns the number of stored intents.
func (s *Store) CountImagePullIntents() int { return s.intents.count() }

// CountImagePulledRecords returns the number of stored records.
func (s *Store) CountImagePulledRecords() int { return s.records.count() }
