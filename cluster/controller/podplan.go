package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// plannedPod is a pod to create on node and the images it pulls, one per
// container in order.
type plannedPod struct {
	pod    *corev1.Pod
	node   string
	images []string
}

// planPods groups the images of one node that need a pre-pull pod, in
// spec order, into pods of at most MaxImagesPerPod images, and plans as
// many pods as the budget allows (it counts pods, not images). It returns
// the results of images whose pod's name is held by a pod this controller
// did not create, how many images got a planned pod, and whether some
// wait for room.
func (c *Controller) planPods(ic *api.ImageCache, ns *nodeState, images []string, budget *budget) (taken []*api.NodeResult, planned int, full bool) {
	node := ns.node.Name
	for len(images) > 0 {
		n := min(c.cfg.MaxImagesPerPod, len(images))
		group := images[:n:n]
		images = images[n:]
		name := podName(ic, ic.Status.Batch, node, group)
		if pod, err := c.pods.Pods(ic.Namespace).Get(name); err == nil {
			if c.owns(pod) {
				// Ours but not read as this batch's (being deleted): wait.
				full = true
				continue
			}
			// Not ours (see owned.go): its status says nothing of a pull we
			// asked for, and ours cannot be created under its name.
			o := api.Outcome{Status: api.WorkFailed, Reason: "PodNameTaken",
				Message: fmt.Sprintf("pod %s/%s, which this controller did not create, holds the pre-pull pod's name; delete it", pod.Namespace, pod.Name)}
			for _, img := range group {
				taken = append(taken, c.settle(ic, node, img, o, fromPod{}))
			}
			continue
		}
		if !budget.take(node) {
			return taken, planned, true
		}
		for _, img := range group {
			if ns.agent.alive && !ns.agent.present(img) {
				// The agent reported the image absent: if this pod's pull
				// succeeds, this cache pulled it (notePull), and may purge it.
				c.addRecord(node, img, api.PullRecord{Cache: cacheKey(ic), CacheUID: string(ic.UID), Batch: ic.Status.Batch})
			}
		}
		budget.create = append(budget.create, plannedPod{pod: c.prepullPod(ic, node, group), node: node, images: group})
		planned += n
	}
	return taken, planned, full
}

// podImage is the pre-pull pod, and its container, that pulls an image.
type podImage struct {
	pod       *corev1.Pod
	container string
}

// batchPods returns, by image, the pre-pull pods of the cache's current
// batch on node that the informer shows: only the controller's own (see
// owned.go) and not being deleted.
func (c *Controller) batchPods(ic *api.ImageCache, node string) map[string]podImage {
	objs, _ := c.podIndex.ByIndex(podsByNodeIndex, node)
	var out map[string]podImage
	for _, o := range objs {
		p := o.(*corev1.Pod)
		if p.Labels[cacheUIDLabel] != string(ic.UID) || p.Labels[batchLabel] != ic.Status.Batch || p.DeletionTimestamp != nil || !c.owns(p) {
			continue
		}
		if out == nil {
			out = map[string]podImage{}
		}
		for name, image := range podImages(p) {
			out[image] = podImage{pod: p, container: name}
		}
	}
	return out
}

// creatingImages returns, by node, the images of pods of the cache's
// current batch that were created but the informer does not show yet: a
// sync in between must not group them into another pod.
func (c *Controller) creatingImages(ic *api.ImageCache) map[string]map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]map[string]bool{}
	for _, p := range c.created {
		if p.cacheUID != string(ic.UID) || p.batch != ic.Status.Batch {
			continue
		}
		if out[p.node] == nil {
			out[p.node] = map[string]bool{}
		}
		for _, img := range p.images {
			out[p.node][img] = true
		}
	}
	return out
}
