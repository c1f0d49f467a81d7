package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// A result is decided once, by settle, as an api.NodeResult: the same
// value is kept pending in memory, written to the node's object by
// syncNode, read back by knownResult on the next syncs and counted into the
// cache's status by a tally. Until it is written, the pod it came from
// stays, so a crash loses no result: the next controller reads it off the
// pod again.
//
// A result read off a pod whose other images are still pulling is held:
// the pod keeps it safe meanwhile, so it is written with the pod's last
// result (or when the pod goes), and a pod of M images costs its node's
// object one write instead of one per result that came in on its own.

// fromPod is the pre-pull pod a result was read off.
type fromPod struct {
	key string // namespace/name; "" for a result not read off a pod
	// done: every image of the pod has its result, so the pod's results
	// are written now; until then they are held.
	done bool
	// remove: the pod is deleted once its results are written (a failed
	// pull, which the kubelet would otherwise retry).
	remove bool
}

// held reports whether the result waits for its pod's other results.
func (f fromPod) held() bool { return f.key != "" && !f.done }

// settle decides the result of image on node for the cache's current
// action, keeps it pending for the node's object and returns it.
func (c *Controller) settle(ic *api.ImageCache, node, image string, o api.Outcome, from fromPod) *api.NodeResult {
	// The node's object holds the message: bounded (limits.go).
	o.Message = truncateMessage(o.Message, maxResultMessage)
	r := api.NodeResult{
		Cache: cacheKey(ic), CacheUID: string(ic.UID), Image: image, Batch: ic.Status.Batch,
		Work: api.WorkTypeFor(ic.Status.Reason), Outcome: o, Time: metav1.Time{Time: c.cfg.Clock.Now()},
	}
	c.addPending(node, resultKey{cache: r.Cache, image: image}, r, from)
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
// the decision once. The pod's last result releases the others it held.
func (c *Controller) addPending(node string, key resultKey, r api.NodeResult, from fromPod) {
	c.mu.Lock()
	if c.pending[node] == nil {
		c.pending[node] = map[resultKey]pendingResult{}
	}
	prev, had := c.pending[node][key]
	c.pending[node][key] = pendingResult{result: r, from: from}
	if from.key != "" && from.done {
		c.releaseLocked(node, from.key)
	}
	c.mu.Unlock()
	// One count per decision: a result already pending for this batch
	// and status is not counted again.
	if !had || prev.result.Batch != r.Batch || prev.result.Status != r.Status {
		c.cfg.Metrics.resultDecided(string(r.Status))
	}
	if from.held() {
		return
	}
	// A little later: the node's other results of this round join the write.
	c.nodeQueue.AddAfter(node, resultWriteDelay)
}

// dueResults returns a copy of node's pending results that are due for
// its object: all but the held ones.
func (c *Controller) dueResults(node string) map[resultKey]pendingResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	due := make(map[resultKey]pendingResult, len(c.pending[node]))
	for k, v := range c.pending[node] {
		if !v.from.held() {
			due[k] = v
		}
	}
	return due
}

// releaseHeld writes the results held for pod (namespace/name) on node:
// the pod is gone, so nothing keeps them but the controller's memory.
func (c *Controller) releaseHeld(node, pod string) {
	c.mu.Lock()
	n := c.releaseLocked(node, pod)
	c.mu.Unlock()
	if n > 0 {
		c.nodeQueue.AddAfter(node, resultWriteDelay)
	}
}

// releaseLocked marks the results held for pod on node as due and returns
// how many it released. c.mu is held.
func (c *Controller) releaseLocked(node, pod string) int {
	n := 0
	for k, v := range c.pending[node] {
		if v.from.key == pod && !v.from.done {
			v.from.done = true
			c.pending[node][k] = v
			n++
		}
	}
	return n
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
