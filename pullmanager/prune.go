package pullmanager

import (
	"context"
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
		m.pruneOne(logger, rec.ImageRef, until)
	}
}

func (m *PullManager) pruneOne(logger klog.Logger, imageRef string, until time.Time) {
	unlock := m.pulledLocks.Lock(imageRef)
	defer unlock()
	current, found, err := m.readRecord(imageRef)
	if err != nil {
		logger.Error(err, "Failed to re-read an image pulled record before removing it", "imageRef", imageRef)
		return
	}
	if !found || !current.LastUpdatedTime.Time.Before(until) {
		return
	}
	if err := m.records.DeleteImagePulledRecord(logger, imageRef); err != nil {
		logger.Error(err, "Failed to remove an image pulled record", "imageRef", imageRef)
		return
	}
	m.metrics.updateCounts(m.counter)
}
