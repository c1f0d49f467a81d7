package accessor

import "k8s.io/klog/v2"

// PullRecordsAccessor stores intents and pulled records. Implementations must
// pass accessortest.Run.
type PullRecordsAccessor interface {
	// ListImagePullIntents returns every readable intent. When some stored
	// intents cannot be read it returns the readable ones and a *ListError.
	ListImagePullIntents() ([]*ImagePullIntent, error)
	// ImagePullIntentExists reports whether an intent for exactly this image
	// string is stored.
	ImagePullIntentExists(image string) (bool, error)
	// WriteImagePullIntent stores an intent for image, replacing any existing one.
	WriteImagePullIntent(logger klog.Logger, image string) error
	// DeleteImagePullIntent removes the intent for image. A missing intent is
	// not an error.
	DeleteImagePullIntent(logger klog.Logger, image string) error

	// ListImagePulledRecords returns every readable pulled record. When some
	// stored records cannot be read it returns the readable ones and a *ListError.
	ListImagePulledRecords() ([]*ImagePulledRecord, error)
	// GetImagePulledRecord returns the record for imageRef. A missing record is
	// (nil, false, nil). A record that exists but cannot be read is
	// (nil, true, err), so callers can fail safe.
	GetImagePulledRecord(imageRef string) (*ImagePulledRecord, bool, error)
	// WriteImagePulledRecord stores record under record.ImageRef, replacing any
	// existing one.
	WriteImagePulledRecord(logger klog.Logger, record *ImagePulledRecord) error
	// DeleteImagePulledRecord removes the record for imageRef. A missing record
	// is not an error.
	DeleteImagePulledRecord(logger klog.Logger, imageRef string) error
}

// RecordPeeker is implemented by stores that can hand out a stored record
// without copying it. The returned record is shared and read-only: the caller
// must not modify it or anything it points to. The manager's hot path uses it
// to avoid a deep copy per container start.
type RecordPeeker interface {
	PeekImagePulledRecord(imageRef string) (*ImagePulledRecord, bool, error)
}

// RecordCounter is implemented by stores that know how many intents and pulled
// records they hold without reading them all (used for metrics).
type RecordCounter interface {
	CountImagePullIntents() int
	CountImagePulledRecords() int
}

// PulledRecordRanger is implemented by stores that can hand out their pulled
// records one at a time instead of as one list, so that a caller that keeps
// its own form of them (a cache warming up) never holds every decoded record
// at once, and can build its form on several cores.
type PulledRecordRanger interface {
	// RangeImagePulledRecords calls fn once with every record
	// ListImagePulledRecords would return, in no particular order, and
	// returns the error that list would return (a *ListError naming every
	// unreadable record, which fn is not called for). fn may be called from
	// several goroutines at once; it owns the record it is given.
	RangeImagePulledRecords(fn func(*ImagePulledRecord)) error
}
