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
// A record is deleted only if, under its own lock on a fresh read, it is
// still older than until, no pull of its imageRef was recorded at or after
// until (a re-pull with the same credentials changes nothing on disk, so the
// record's time alone cannot show it), and the runtime does not hold the
// image now: when the manager has an ImageLister, the runtime's images are
// listed once more after the candidates are chosen, and a failure to list
// deletes nothing. Deleting the record of a present image would make it look
// preloaded, and under NeverVerifyPreloadedImages every pod could then use
// it; the kubelet's image garbage collector passes only the images it
// considered for eviction (neither those in use nor pinned ones, nor those
// after it freed enough), so imageList alone cannot be trusted to name every
// present image.
//
// Unlike upstream, which holds every record lock for the whole prune, the
// records are listed without locks; checks and writes of other records never
// wait.
//
// With credential expiry (WithCredentialExpiry), it first removes the
// expired proofs from the stamp store: they vouch for nothing, so removing
// them changes no answer.
func (m *PullManager) PruneUnknownRecords(ctx context.Context, imageList []string, until time.Time) {
	logger := klog.FromContext(ctx)
	m.pruneProofs(logger)
	records, err := m.records.ListImagePulledRecords()
	if err != nil {
		logger.Error(err, "There were errors listing image pulled records, garbage collection will proceed with incomplete records list")
	}
	keep := make(map[string]struct{}, len(imageList))
	for _, ref := range imageList {
		keep[ref] = struct{}{}
	}
	var candidates []string
	for _, rec := range records {
		if _, ok := keep[rec.ImageRef]; ok || !rec.LastUpdatedTime.Time.Before(until) {
			continue
		}
		candidates = append(candidates, rec.ImageRef)
	}
	if len(candidates) == 0 {
		return
	}
	present, err := m.presentImages(ctx)
	if err != nil {
		logger.Error(err, "Not pruning image pulled records: the runtime's images could not be listed to confirm which are gone", "candidates", len(candidates))
		return
	}
	for _, imageRef := range candidates {
		if _, ok := present[imageRef]; ok {
			logger.V(4).Info("Keeping the image pulled record of an image the runtime still has", "imageRef", imageRef)
			continue
		}
		stale := func(current *accessor.ImagePulledRecord) (bool, error) {
			return current.LastUpdatedTime.Time.Before(until) && !m.pulls.pulledSince(imageRef, until), nil
		}
		if err := m.pruneOne(logger, imageRef, stale); err != nil {
			logger.Error(err, "Failed to remove an image pulled record", "imageRef", imageRef)
		}
	}
}

// presentImages lists the IDs and repository digests of the images the
// runtime holds now; without an ImageLister it returns an empty set.
func (m *PullManager) presentImages(ctx context.Context) (map[string]struct{}, error) {
	present := map[string]struct{}{}
	if m.images == nil {
		return present, nil
	}
	images, err := m.images.ListImages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the runtime's images: %w", err)
	}
	for _, img := range images {
		present[img.ID] = struct{}{}
		for _, d := range img.RepoDigests {
			present[d] = struct{}{}
		}
	}
	return present, nil
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
	m.pulls.forget(imageRef)
	m.metrics.updateCounts(m.counter)
	return nil
}
