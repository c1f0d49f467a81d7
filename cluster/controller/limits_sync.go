package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// refuseTooLarge ends the cache's action at once, Failed with reason
// CacheTooLarge: no request is built, no pod created, nothing written to a
// node. The cache is looked at again when its spec changes or a refresh
// is asked (the refresh annotation), not periodically (see refreshDue), so
// a raised limit applies to it at its next update or asked refresh.
func (c *Controller) refuseTooLarge(ctx context.Context, ic *api.ImageCache, images int, now time.Time) error {
	st := ic.Status
	st.Status = api.ActionStatusFailed
	st.Reason = ReasonCacheTooLarge
	st.Message = tooLargeMessage(images, c.cfg.MaxImagesPerCache)
	st.Failures = nil
	st.Counts = &api.ResultCounts{}
	return c.finishAction(ctx, ic, st, now)
}

// admittedOn returns, for the cache ic, a function telling whether a node
// refuses it (and why), decided as syncNode decides it (nodeAdmission over
// every cache). When even the largest demand every cache could make fits
// one node, no node refuses anything and nothing is computed per node.
func (c *Controller) admittedOn(ic *api.ImageCache) (func(*corev1.Node) (nodeRefusal, bool), error) {
	all, err := c.cacheView.list()
	if err != nil {
		return nil, err
	}
	caches := make([]*api.ImageCache, 0, len(all))
	upper := 0
	for _, x := range all {
		if cacheKey(x) == cacheKey(ic) {
			x = ic // the status this sync works on
		}
		caches = append(caches, x)
		if x.Status.Batch != "" && distinctImages(x) <= c.cfg.MaxImagesPerCache {
			upper += upperWeight(x)
		}
	}
	if upper <= c.cfg.MaxCacheImagesPerNode {
		return func(*corev1.Node) (nodeRefusal, bool) { return nodeRefusal{}, false }, nil
	}
	key := cacheKey(ic)
	memo := newDemandMemo()
	return func(n *corev1.Node) (nodeRefusal, bool) {
		r, refused := nodeAdmission(caches, n, c.cfg.MaxImagesPerCache, c.cfg.MaxCacheImagesPerNode, memo).refused[key]
		return r, refused
	}, nil
}

// upperWeight is the most a cache can want on any one node: every distinct
// image it lists.
func upperWeight(ic *api.ImageCache) int {
	w, key := 0, cacheKey(ic)
	for _, img := range specImages(ic, anyNode) {
		w += pairWeight(img, key)
	}
	return w
}

// refusedOutcome is the result of every image of the cache on a node that
// refuses it: final, kept in the cache's status only (never written to the
// node, which is the point). A pull is failed; a purge succeeds, as the
// node holds nothing of the cache (its pulls there go to the node's purge
// list like any other cache's the node no longer holds). Neither says the
// image is present.
func refusedOutcome(ic *api.ImageCache) api.Outcome {
	if purging(ic.Status) {
		return api.Outcome{Status: api.WorkSucceeded, Reason: ReasonNodeImageLimit, Message: msgNodeImageLimit}
	}
	return api.Outcome{Status: api.WorkFailed, Reason: ReasonNodeImageLimit, Message: msgNodeImageLimit}
}
