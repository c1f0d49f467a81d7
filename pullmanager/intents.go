package pullmanager

import (
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// intentCounters counts in-flight pulls per image string in process memory
// only (after a restart every count is 0 and only the stored intent tells).
// Changes happen under the image's intent lock; reads are lock-free.
type intentCounters struct {
	m sync.Map // string -> *atomic.Int32
}

// get returns the count for image.
func (c *intentCounters) get(image string) int32 {
	v, ok := c.m.Load(image)
	if !ok {
		return 0
	}
	return v.(*atomic.Int32).Load()
}

// add adds delta to image's count. Caller holds image's intent lock.
func (c *intentCounters) add(image string, delta int32) {
	v, ok := c.m.Load(image)
	if !ok {
		v, _ = c.m.LoadOrStore(image, new(atomic.Int32))
	}
	v.(*atomic.Int32).Add(delta)
}

// remove forgets image's count. Caller holds image's intent lock.
func (c *intentCounters) remove(image string) {
	if v, ok := c.m.LoadAndDelete(image); ok {
		v.(*atomic.Int32).Store(0)
	}
}

// decrementIntent ends one in-flight pull of image. When the count would
// drop to 1 or below (0 included: the state after a restart) the stored
// intent is deleted and the count forgotten; if that delete fails, the
// count is left as it was. Otherwise the count drops by one and the stored
// intent stays.
func (m *PullManager) decrementIntent(logger klog.Logger, image string) {
	unlock := m.intentLocks.Lock(image)
	defer unlock()
	if m.intents.get(image) > 1 {
		m.intents.add(image, -1)
		return
	}
	// Announce the drop before making it, so a concurrent check that finds
	// neither the record nor the intent knows to read the record again.
	m.intentDrops.Add(1)
	if err := m.records.DeleteImagePullIntent(logger, image); err != nil {
		logger.Error(err, "Failed to remove image pull intent", "image", image)
		return
	}
	m.intents.remove(image)
	m.metrics.updateCounts(m.counter)
}

// intentState reports whether image has an in-flight pull in this process
// and, only when it has none, whether it has a stored intent.
func (m *PullManager) intentState(image string) (inFlight, stored bool, err error) {
	if m.intents.get(image) > 0 {
		return true, false, nil
	}
	stored, err = m.records.ImagePullIntentExists(image)
	return false, stored, err
}
