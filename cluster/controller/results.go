package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// A result is decided once, by settle, as an api.NodeResult: the same
// value is kept pending in memory, written to the node's object by
// syncNode, read back by knownResult on the next syncs and counted into the
// cache's status by a tally. Until it is written, the pod it came from
// stays (pendingResult.pod), so a crash loses no result: the next
// controller reads it off the pod again.

// settle decides the result of image on node for the cache's current
// action, keeps it pending for the node's object (then pod, namespace/name
// or "", is deleted) and returns it.
func (c *Controller) settle(ic *api.ImageCache, node, image string, o api.Outcome, pod string) *api.NodeResult {
	// The node's object holds the message: bounded (limits.go).
	o.Message = truncateMessage(o.Message, maxResultMessage)
	r := api.NodeResult{
		Cache: cacheKey(ic), CacheUID: string(ic.UID), Image: image, Batch: ic.Status.Batch,
		Work: api.WorkTypeFor(ic.Status.Reason), Outcome: o, Time: metav1.Time{Time: c.cfg.Clock.Now()},
	}
	c.addPending(node, resultKey{cache: r.Cache, image: image}, r, pod)
	return &r
}

// knownResult returns the current batch's result of image on node when one
// is pending or written on the node's object.
func (c *Controller) knownResult(ni *api.NodeImages, node, image string, ic *api.ImageCache) (*api.NodeResult, bool) {
	key := resultKey{cache: cacheKey(ic), image: image}
	c.mu.Lock()
	p, ok := c.pending[node][key]
	c.mu.Unlock()
	var r *api.NodeResult
	if ok {
		r = &p.result
	} else if ni != nil {
		for i := range ni.Status.Results {
			if x := &ni.Status.Results[i]; x.Cache == key.cache && x.Image == key.image {
				r = x
				break
			}
		}
	}
	if r == nil || r.CacheUID != string(ic.UID) || r.Batch != ic.Status.Batch {
		return nil, false
	}
	return r, true
}

// addPending keeps r until syncNode writes it to node's object, and counts
// the decision once.
func (c *Controller) addPending(node string, key resultKey, r api.NodeResult, pod string) {
	c.mu.Lock()
	if c.pending[node] == nil {
		c.pending[node] = map[resultKey]pendingResult{}
	}
	prev, had := c.pending[node][key]
	c.pending[node][key] = pendingResult{result: r, pod: pod}
	c.mu.Unlock()
	// One count per decision: a result already pending for this batch
	// and status is not counted again.
	if !had || prev.result.Batch != r.Batch || prev.result.Status != r.Status {
		c.cfg.Metrics.resultDecided(string(r.Status))
	}
	// A little later: the node's other results of this round join the write.
	c.nodeQueue.AddAfter(node, resultWriteDelay)
}

// unwritten counts the cache's results not yet written to the objects of
// nodes.
func (c *Controller) unwritten(cache string, nodes map[string]liveness) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for node := range nodes {
		for k := range c.pending[node] {
			if k.cache == cache {
				n++
			}
		}
	}
	return n
}
