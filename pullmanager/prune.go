package pullmanager

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

// PruneUnknownRecords deletes the pulled records last updated strictly
// before until whose imageRef is not in imageList (kubelet semantics; intents
// are never pruned). until must be taken before imageList is fetched from
// the runtime.
//
// Unlike upstream, which holds every record lock for the whole prune, the
// records are listed without locks and each candidate is then deleted under
// its own lock after re-reading it: a record refreshed or re-created since
// the list is kept. Checks and writes of other records never wait.
func (m *PullManager) PruneUnknownRecords(ctx context.Context, imageList []string, until time.Time) {
	logger := klog.FromContext(ctx)
	records, err := m.records.ListImagePulledRecords()
	if err != nil {
		logger.Error(err, "There were errors listing image pulled records, garbage collection will proceed with incomplete records list")
	}
	keep := make(map[string]struct{}, len(imageList))
	for _, ref := range imageList {
		keep[ref] = struct{}{}
	}
	for _, rec := range records {
		if _, ok := keep[rec.ImageRef]; ok || !rec.LastUpdatedTime.Time.Before(until) {
			continue
		}
		olderThanUntil := func(current *accessor.ImagePulledRecord) (bool, error) {
			return current.LastUpdatedTime.Time.Before(until), nil
		}
		if err := m.pruneOne(logger, rec.ImageRef, olderThanUntil); err != nil {
			logger.Error(err, "Failed to remove an image pulled record", "imageRef", rec.ImageRef)
		}
	}
}

// PruneImagePulledRecord deletes the pulled record of imageRef for a caller
// that removed the image itself (an image cache purge). Under the record's
// lock it re-reads the record and asks imageGone whether the runtime still
// lacks the image: a pull of the same content that finished meanwhile (say
// under another name, with another tenant's secret) has the image back in
// the runtime before it writes its record, so its record is kept. A pull
// that finishes after the delete writes a fresh record.
func (m *PullManager) PruneImagePulledRecord(ctx context.Context, imageRef string, imageGone func(context.Context) (bool, error)) error {
	return m.pruneOne(klog.FromContext(ctx), imageRef, func(*accessor.ImagePulledRecord) (bool, error) {
		gone, err := imageGone(ctx)
		if err != nil {
			return false, fmt.Errorf("checking that the image is gone: %w", err)
		}
		return gone, nil
	})
}

// pruneOne deletes the record of imageRef if it still exists and stale says
// so, both decided under the record's lock on a fresh read.
func (m *PullManager) pruneOne(logger klog.Logger, imageRef string, stale func(*accessor.ImagePulledRecord) (bool, error)) error {
	unlock := m.pulledLocks.Lock(imageRef)
	defer unlock()
	current, found, err := m.readRecord(imageRef)
	if err != nil {
		return fmt.Errorf("re-reading the record before removing it: %w", err)
	}
	if !found {
		return nil
	}
	if ok, err := stale(current); err != nil || !ok {
		return err
	}
	if err := m.records.DeleteImagePulledRecord(logger, imageRef); err != nil {
		return err
	}
	m.metrics.updateCounts(m.counter)
	return nil
}
