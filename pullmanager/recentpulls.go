package pullmanager

import (
	"sync"
	"time"
)

// recentPulls remembers, per imageRef, when this manager last recorded a
// finished pull of it, whether or not the record changed. A pull that
// changes nothing (the same credentials again) leaves LastUpdatedTime where
// it was, so the record alone cannot tell a prune that the image came back
// after the prune's image list was read; this can. Only the write path and
// the prune touch it, never a check.
type recentPulls struct {
	mu sync.Mutex
	at map[string]time.Time
}

// note records a pull of imageRef finished at t.
func (r *recentPulls) note(imageRef string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[string]time.Time{}
	}
	if t.After(r.at[imageRef]) {
		r.at[imageRef] = t
	}
}

// pulledSince says whether a pull of imageRef was recorded at or after t.
func (r *recentPulls) pulledSince(imageRef string, t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.at[imageRef]
	return ok && !at.Before(t)
}

// forget drops what is known of imageRef, once its record is deleted: the
// map then holds at most one entry per record.
func (r *recentPulls) forget(imageRef string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.at, imageRef)
}
