package pullmanager

import (
	"github.com/pullrecords/pullrecords/internal/keylock"

	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/imageruntime"
)

// PullManager is the ImagePullManager that keeps its state in a
// PullRecordsAccessor. It is safe for concurrent use.
type PullManager struct {
	records accessor.PullRecordsAccessor
	peeker  accessor.RecordPeeker  // records, when it can hand out shared records
	counter accessor.RecordCounter // records, when it can count cheaply
	policy  ImagePullPolicyEnforcer
	images  imageruntime.ImageLister

	clock            clock.PassiveClock
	metrics          *Metrics
	protectPreloaded bool
	// normalizedNames is the opt-in WithNormalizedImageNames mode;
	// mappingKey is MappingKey, or NormalizeImageName in that mode.
	normalizedNames bool
	mappingKey      keyFunc
	// stamps keeps the proofs of credentials when credential expiry is on
	// (nil when off), each fresh for expiry. See expiry.go.
	stamps *credstamp.Store
	expiry time.Duration

	// intentLocks serialise changes to the intent of one image string;
	// pulledLocks serialise changes to the record of one imageRef. No code
	// path holds both at once.
	intentLocks *keylock.Set
	pulledLocks *keylock.Set
	// intents counts this process's in-flight pulls per image string
	// (string -> *atomic.Int32). See intents.go.
	intents intentCounters
	// intentDrops counts stored-intent deletions (bumped just before each),
	// so a lock-free check can tell whether it must re-read a record.
	intentDrops atomic.Uint64
	// pulls says when a pull of each imageRef was last recorded, for
	// PruneUnknownRecords (see prune.go).
	pulls recentPulls
}

var _ ImagePullManager = (*PullManager)(nil)

// NewImagePullManager returns a manager over records, deciding with policy.
// It runs start-up recovery before returning: leftover intents whose image
// the runtime (images) now has become pulled records with an empty
// credential mapping (see the package documentation). images may be nil,
// which leaves every leftover intent in place.
//
// If records implements accessor.RecordPeeker, checks read through it without
// copying; if it implements accessor.RecordCounter, the on-disk gauges are
// kept from it.
//
// It fails with ErrMissingDependency when records or policy is nil, and with
// ErrInvalidOption when an option has a value it cannot use.
func NewImagePullManager(ctx context.Context, records accessor.PullRecordsAccessor, policy ImagePullPolicyEnforcer, images imageruntime.ImageLister, opts ...Option) (*PullManager, error) {
	if records == nil {
		return nil, fmt.Errorf("%w: records accessor is nil", ErrMissingDependency)
	}
	if policy == nil {
		return nil, fmt.Errorf("%w: policy is nil", ErrMissingDependency)
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	m := &PullManager{
		records:          records,
		policy:           policy,
		images:           images,
		clock:            o.clock,
		metrics:          o.metrics,
		protectPreloaded: o.protectPreloaded,
		normalizedNames:  o.normalizedNames,
		mappingKey:       upstreamKey,
		intentLocks:      keylock.New(o.lockStripes),
		pulledLocks:      keylock.New(o.lockStripes),
		stamps:           o.stamps,
		expiry:           o.expiry,
	}
	if o.normalizedNames {
		m.mappingKey = normalizeCached
	}
	m.peeker, _ = records.(accessor.RecordPeeker)
	m.counter, _ = records.(accessor.RecordCounter)
	m.initialize(ctx)
	m.metrics.updateCounts(m.counter)
	return m, nil
}

// RecordPullIntent records that image is about to be pulled: it (re)writes
// the intent and, on success only, counts one more in-flight pull of image.
func (m *PullManager) RecordPullIntent(logger klog.Logger, image string) error {
	unlock := m.intentLocks.Lock(image)
	defer unlock()
	if err := m.records.WriteImagePullIntent(logger, image); err != nil {
		return fmt.Errorf("failed to record image pull intent: %w", err)
	}
	m.intents.add(image, 1)
	m.metrics.updateCounts(m.counter)
	return nil
}

// RecordImagePullFailed ends one in-flight pull of image without a record.
func (m *PullManager) RecordImagePullFailed(ctx context.Context, image string) {
	m.decrementIntent(klog.FromContext(ctx), image)
}

// RecordImagePulled records that image was pulled as imageRef with creds,
// then ends one in-flight pull of image. With credential expiry it then
// renews the proofs of creds' secrets and service accounts (also when the
// record did not change). If the record cannot be written
// (including an image string that does not parse), the intent is kept on
// purpose, so the image keeps counting as pulled by the kubelet and start-up
// recovery handles it.
func (m *PullManager) RecordImagePulled(ctx context.Context, image, imageRef string, creds *accessor.ImagePullCredentials) {
	logger := klog.FromContext(ctx)
	key, err := m.writeRecordIfChanged(logger, image, imageRef, creds)
	if err != nil {
		logger.Error(err, "Failed to write image pulled record", "imageRef", imageRef)
		return
	}
	m.renewProofs(logger, imageRef, key, creds)
	m.decrementIntent(logger, image)
}

// writeRecordIfChanged creates or merges the record of imageRef under its
// lock: a missing (or unreadable) record is created, an existing one is
// merged with creds and written only if something changed. It returns the
// image's mapping key.
func (m *PullManager) writeRecordIfChanged(logger klog.Logger, image, imageRef string, creds *accessor.ImagePullCredentials) (string, error) {
	key, _, err := m.mappingKey(image)
	if err != nil {
		return "", err
	}
	unlock := m.pulledLocks.Lock(imageRef)
	defer unlock()
	// Noted under the record's lock, before the merge, so a prune deciding
	// under the same lock either sees the pull or runs before its write.
	m.pulls.note(imageRef, m.clock.Now())
	return key, m.mergeLocked(logger, key, imageRef, creds, nil)
}

// mergeLocked does the work of writeRecordIfChanged; the caller holds the
// pulled lock of imageRef. If accept is not nil, it is asked about the
// current record (nil when there is none) and the write is skipped when it
// returns false.
func (m *PullManager) mergeLocked(logger klog.Logger, key, imageRef string, creds *accessor.ImagePullCredentials, accept func(*accessor.ImagePulledRecord) bool) error {
	now := m.clock.Now()
	current, found, err := m.readRecord(imageRef)
	if err != nil {
		logger.Info("Failed to read the image pulled record, it will be overwritten", "imageRef", imageRef, "err", err)
		current, found = nil, false
	}
	if accept != nil && !accept(current) {
		return nil
	}
	var next *accessor.ImagePulledRecord
	if m.protectPreloaded && credentialsEmpty(creds) {
		// With WithPreloadedImageProtection "pulled by the kubelet" is
		// decided per mapping key, so a pull whose credentials are unknown
		// (start-up recovery) or empty must leave an entry for its own name:
		// without one, the name would look preloaded as soon as the record
		// maps any other name, and a pod without credentials could use
		// content the kubelet pulled, perhaps with a secret. An empty entry
		// means "pulled by the kubelet, every pod must re-verify" (step 10).
		var changed bool
		if next, changed = markPulledUnder(current, found, imageRef, key, now); !changed {
			return nil
		}
	} else if !found {
		next = newRecord(imageRef, key, creds, now)
	} else {
		var changed bool
		if next, changed = mergeCredentials(current, key, creds, now); !changed {
			return nil
		}
	}
	if err := m.records.WriteImagePulledRecord(logger, next); err != nil {
		return err
	}
	m.metrics.updateCounts(m.counter)
	return nil
}

// readRecord returns the record of imageRef, shared (read-only) when the
// store can peek, else a copy.
func (m *PullManager) readRecord(imageRef string) (*accessor.ImagePulledRecord, bool, error) {
	if m.peeker != nil {
		return m.peeker.PeekImagePulledRecord(imageRef)
	}
	return m.records.GetImagePulledRecord(imageRef)
}
