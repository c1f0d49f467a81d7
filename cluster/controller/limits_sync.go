package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/imagecache"
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
	objs, err := c.caches.List(everything())
	if err != nil {
		return nil, err
	}
	caches := make([]*api.ImageCache, 0, len(objs))
	upper := 0
	for _, o := range objs {
		var x api.ImageCache
		if err := api.FromUnstructured(o.(*unstructured.Unstructured), &x); err != nil {
			continue
		}
		if cacheKey(&x) == cacheKey(ic) {
			x = *ic // the status this sync works on
		}
		caches = append(caches, &x)
		if x.Status.Batch != "" && distinctImages(&x) <= c.cfg.MaxImagesPerCache {
			upper += upperWeight(&x)
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
	seen := map[string]bool{}
	w := 0
	key := cacheKey(ic)
	for _, entry := range ic.Spec.CacheSpec {
		for _, img := range entry.Images {
			if img == "" || seen[img] {
				continue
			}
			seen[img] = true
			w += pairWeight(img, key)
		}
	}
	return w
}

// nodeRequests is requests for one node: the cache's current action's
// requests there, in spec order.
func nodeRequests(ic *api.ImageCache, n *corev1.Node) []imagecache.ImageWorkRequest {
	images := imagesFor(ic, n)
	if len(images) == 0 {
		return nil
	}
	wt := workTypeFor(ic.Status.Reason)
	ref := imagecache.CacheRef{Namespace: ic.Namespace, Name: ic.Name}
	out := make([]imagecache.ImageWorkRequest, 0, len(images))
	for _, img := range images {
		out = append(out, imagecache.ImageWorkRequest{Image: img, Node: n.Name,
			ContainerRuntimeVersion: n.Status.NodeInfo.ContainerRuntimeVersion, WorkType: wt, ImageCache: ref})
	}
	return out
}

// refusedResults are the results of a node that refuses the cache: final,
// kept in the cache's status only (never written to the node, which is the
// point). A pull is failed; a purge succeeds, as the node holds nothing of
// the cache (its pulls there go to the node's purge list like any other
// cache's the node no longer holds). None says the image is present.
func refusedResults(reqs []imagecache.ImageWorkRequest, now time.Time) []imagecache.ImageWorkResult {
	out := make([]imagecache.ImageWorkResult, 0, len(reqs))
	for _, req := range reqs {
		status := imagecache.StatusFailed
		if req.WorkType == imagecache.WorkTypePurge {
			status = imagecache.StatusSucceeded
		}
		out = append(out, imagecache.ImageWorkResult{Request: req, Status: status, Reason: ReasonNodeImageLimit, Message: msgNodeImageLimit, Finished: now})
	}
	return out
}

// alwaysPull is alwaysPull, parsed once per image in a sync rather than
// once per (node, image): the parse was most of a large sync's garbage.
func (b *budget) alwaysPull(image string) bool {
	v, ok := b.always[image]
	if !ok {
		v = alwaysPull(image)
		b.always[image] = v
	}
	return v
}
