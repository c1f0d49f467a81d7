package pullmanager

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"
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
		if err := m.pruneOne(logger, rec.ImageRef, until); err != nil {
			logger.Error(err, "Failed to remove an image pulled record", "imageRef", rec.ImageRef)
		}
	}
}

// PruneImagePulledRecord deletes the pulled record of imageRef if it was last
// updated strictly before until: PruneUnknownRecords for one record, for a
// caller that removed the image itself (an image cache purge). It runs under
// the record's lock on a fresh read, so a record written or refreshed at or
// after until (for example by a pull of the same content under another name
// while the image was being removed) is kept. Take until before checking
// that the runtime no longer has the image.
func (m *PullManager) PruneImagePulledRecord(ctx context.Context, imageRef string, until time.Time) error {
	return m.pruneOne(klog.FromContext(ctx), imageRef, until)
}

func (m *PullManager) pruneOne(logger klog.Logger, imageRef string, until time.Time) error {
	unlock := m.pulledLocks.Lock(imageRef)
	defer unlock()
	current, found, err := m.readRecord(imageRef)
	if err != nil {
		return fmt.Errorf("re-reading the record before removing it: %w", err)
	}
	if !found || !current.LastUpdatedTime.Time.Before(until) {
		return nil
	}
	if err := m.records.DeleteImagePulledRecord(logger, imageRef); err != nil {
		return err
	}
	m.metrics.updateCounts(m.counter)
	return nil
}
