package imagecache

import (
	"slices"
	"time"
)

// request is one request of a batch as it waits and runs: the attempts made
// so far and when the first one started.
type request struct {
	req      ImageWorkRequest
	batch    *batch
	index    int
	attempts int
	started  time.Time
}

func (r *request) removes() bool {
	return r.req.WorkType == WorkTypePurge || r.req.WorkType == WorkTypeDelete
}

// entry is the requests for one image: those waiting for a worker, and how
// many a worker is running.
type entry struct {
	waiting  []*request
	inFlight int
}

// batch is the requests queued together for one cache (by Apply, Delete,
// Refresh, a periodic refresh or a resumption), with their results by index.
type batch struct {
	id        uint64
	ref       CacheRef
	workType  WorkType
	cache     *cacheState // nil for batches of a deleted cache
	started   time.Time
	finished  time.Time
	results   []ImageWorkResult
	done      []bool
	remaining int
	inFlight  int
	shutdown  bool
}

func (m *Manager) newRequest(image string, wt WorkType, force bool, ref CacheRef) ImageWorkRequest {
	return ImageWorkRequest{Image: image, Node: m.opts.node, ContainerRuntimeVersion: m.opts.runtimeVersion,
		WorkType: wt, ForceFullCache: force, ImageCache: ref}
}

func (m *Manager) pullRequests(ref CacheRef, wt WorkType, spec ImageCache, images []string) []ImageWorkRequest {
	out := make([]ImageWorkRequest, 0, len(images))
	for _, img := range images {
		out = append(out, m.newRequest(img, wt, spec.ForceFullCache, ref))
	}
	return out
}

func (b *batch) status() CacheStatus {
	s := CacheStatus{
		ImageCache: b.ref, WorkType: b.workType, Batch: b.id, Complete: b.remaining == 0,
		Started: b.started, Finished: b.finished, Requests: len(b.results),
		InFlight: b.inFlight, Queued: b.remaining - b.inFlight, Counts: map[ImageWorkStatus]int{},
	}
	for i, r := range b.results {
		if b.done[i] {
			s.Counts[r.Status]++
			s.Results = append(s.Results, r)
		}
	}
	if b.inFlight > 0 {
		s.Counts[StatusJobCreated] = b.inFlight
	}
	if s.Complete {
		s.Duration = b.finished.Sub(b.started)
	}
	return s
}

// enqueueLocked creates a batch of pull and removal requests and queues them.
func (m *Manager) enqueueLocked(ref CacheRef, wt WorkType, cs *cacheState, pulls, removals []ImageWorkRequest) {
	m.nextBatch++
	reqs := append(slices.Clip(pulls), removals...)
	b := &batch{id: m.nextBatch, ref: ref, workType: wt, cache: cs, started: m.clock.Now(),
		results: make([]ImageWorkResult, len(reqs)), done: make([]bool, len(reqs)), remaining: len(reqs)}
	m.latest[ref] = b
	if cs != nil {
		cs.open++
	}
	if len(reqs) == 0 {
		m.completeLocked(b)
		return
	}
	for i, req := range reqs {
		b.results[i] = ImageWorkResult{Request: req}
		e := m.entries[req.Image]
		if e == nil {
			e = &entry{}
			m.entries[req.Image] = e
		}
		e.waiting = append(e.waiting, &request{req: req, batch: b, index: i})
		m.queue.Add(req.Image)
	}
}

// finishLocked records the final result of r.
func (m *Manager) finishLocked(r *request, res ImageWorkResult, wasInFlight bool) {
	b := r.batch
	b.results[r.index] = res
	b.done[r.index] = true
	b.remaining--
	if wasInFlight {
		b.inFlight--
		if e := m.entries[r.req.Image]; e != nil {
			e.inFlight--
		}
	}
	if e := m.entries[r.req.Image]; e != nil && e.inFlight == 0 && len(e.waiting) == 0 {
		delete(m.entries, r.req.Image)
	}
	if res.Reason == ReasonShutDown {
		b.shutdown = true
	} else if r.removes() {
		delete(m.removals, pendingRemoval{cache: r.req.ImageCache, image: r.req.Image, workType: r.req.WorkType})
	}
	m.metrics.results.WithLabelValues(string(res.Request.WorkType), string(res.Status)).Inc()
	m.outbox = append(m.outbox, event{result: &res})
	if b.remaining == 0 {
		m.completeLocked(b)
	}
}

// completeLocked publishes the batch's status and persists its completion
// and the status (completedStatus).
func (m *Manager) completeLocked(b *batch) {
	b.finished = m.clock.Now()
	st := b.status()
	m.outbox = append(m.outbox, event{status: &st})
	if cs := b.cache; cs != nil {
		cs.open--
		if b.shutdown {
			cs.interrupted = true
		}
		if cs.open == 0 && !cs.interrupted && cs.completed < cs.generation && m.caches[b.ref] == cs {
			cs.completed = cs.generation
		}
	}
	if err := m.saveLocked(); err != nil {
		m.logger.Error(err, "Failed to persist image cache state", "cache", b.ref)
	}
	if err := m.recordLastStatusLocked(st); err != nil {
		m.logger.Error(err, "Failed to persist the image cache's last status", "cache", b.ref)
	}
}
