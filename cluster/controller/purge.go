package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// Reasons and messages of purge results that leave the image on the node.
// Their status is succeeded: the purge did what it may, nothing it did not
// pull or that something else needs was touched.
const (
	reasonKept          = "ImageKept"
	reasonNotPulled     = "NotPulledByCache"
	reasonNotCached     = "NotCached"
	msgFoundPresent     = "not removed: the cache found it present, did not pull it"
	msgNothingToRemove  = "not removed: the cache has no pull of it recorded on this node"
	msgKeptByOtherCache = "kept: another ImageCache keeps it (%s)"
	msgKeptInUse        = "kept: " + api.KeptInUse + "; removed once no container uses it"
)

// recordKey names one cache's pull record of one image on a node.
type recordKey struct{ image, uid string }

// decidePurge decides one (node, image) of a purge action. Only an image
// this cache's own pre-pull put on the node (a PullRecord with an image ID
// in the node's spec) is removed, by the node's agent, which checks it
// again there; the result is succeeded only once the agent reports the
// image gone or reports why it kept it, failed when the runtime refused.
// A node whose agent is away keeps the purge pending: the entry stays in
// the node's spec and is done when the agent reports again.
func (c *Controller) decidePurge(ic *api.ImageCache, ns *nodeState, image string) (api.Outcome, waitKind) {
	key, uid, ni, agent := cacheKey(ic), string(ic.UID), ns.ni, ns.agent
	if ni == nil {
		return kept(reasonNotCached, msgNothingToRemove), waitKind{}
	}
	held := findImage(ni.Spec.Images, image)
	if held != nil && contains(held.Caches, key) {
		// The node's spec does not show the purge yet.
		c.nodeQueue.Add(ns.node.Name)
		return api.Outcome{}, waitKind{after: waitForReport}
	}
	if e := findImage(ni.Spec.Purge, image); e != nil && pulledBy(e, uid) {
		if !agent.alive {
			return api.Outcome{}, waitKind{after: waitForReport, away: true}
		}
		if !agent.reported(image) {
			return api.Outcome{}, waitKind{after: waitForReport}
		}
		p := agent.presence[image]
		switch {
		case p.RemoveError != "":
			return api.Outcome{Status: api.WorkFailed, Reason: "ImageDeleteFailed", Message: p.RemoveError}, waitKind{}
		case p.Kept == api.KeptInUse:
			return kept(reasonKept, msgKeptInUse), waitKind{}
		case p.Kept != "":
			return kept(reasonKept, "kept: "+p.Kept), waitKind{}
		case !p.Present:
			return api.Outcome{Status: api.WorkSucceeded, Message: "removed from the runtime"}, waitKind{}
		}
		return api.Outcome{}, waitKind{after: waitForReport}
	}
	switch {
	case held != nil && pulledBy(held, uid):
		return kept(reasonKept, fmt.Sprintf(msgKeptByOtherCache, strings.Join(held.Caches, ", "))), waitKind{}
	case held != nil, foundPresent(ni, key, image):
		return kept(reasonNotPulled, msgFoundPresent), waitKind{}
	}
	return kept(reasonNotCached, msgNothingToRemove), waitKind{}
}

// kept is a purge's succeeded result that leaves the image on the node,
// for reason.
func kept(reason, message string) api.Outcome {
	return api.Outcome{Status: api.WorkSucceeded, Reason: reason, Message: message}
}

// foundPresent reports whether the cache's latest result for image on the
// node, of any batch, says it found the image present.
func foundPresent(ni *api.NodeImages, cache, image string) bool {
	for _, r := range ni.Status.Results {
		if r.Cache == cache && r.Image == image {
			return r.Status == api.WorkAlreadyPulled
		}
	}
	return false
}

func pulledBy(e *api.NodeImage, uid string) bool {
	for _, r := range e.Pulled {
		if r.CacheUID == uid && r.ImageRef != "" {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// recordOf returns the cache's pull record of image on node: the one not
// yet written (memory) first, else the node's spec.
func (c *Controller) recordOf(ni *api.NodeImages, node, image, uid string) (api.PullRecord, bool) {
	c.mu.Lock()
	r, ok := c.records[node][recordKey{image, uid}]
	c.mu.Unlock()
	if ok {
		return r, true
	}
	if ni == nil {
		return api.PullRecord{}, false
	}
	for _, list := range [][]api.NodeImage{ni.Spec.Images, ni.Spec.Purge} {
		if e := findImage(list, image); e != nil {
			for _, r := range e.Pulled {
				if r.CacheUID == uid {
					return r, true
				}
			}
		}
	}
	return api.PullRecord{}, false
}

// addRecord remembers a pull record until the node's spec shows it. It
// asks for no write of its own: a record goes with the node's next write,
// which its pod's results bring (results.go). Lost in a crash meanwhile,
// a record leaves the image unclaimed, so a purge keeps it (never removes
// more).
func (c *Controller) addRecord(node, image string, r api.PullRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.records[node] == nil {
		c.records[node] = map[recordKey]api.PullRecord{}
	}
	c.records[node][recordKey{image, r.CacheUID}] = r
}

// pulledImageRef returns the image the kubelet reports pre-pull container
// name runs (its imageID), when that container is one this controller
// makes for image (podImages).
func pulledImageRef(pod *corev1.Pod, name, image string) string {
	if podImages(pod)[name] != image {
		return "" // not the pod this controller makes for image
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == name {
			return strings.TrimPrefix(cs.ImageID, "docker-pullable://")
		}
	}
	return ""
}

// notePull completes the cache's pull record when its pod's pull
// succeeded: only a record made when the pod was created for this batch
// (the agent had reported the image absent) gains the image ID the kubelet
// reported for container, and only for the container this controller
// makes for the image.
func (c *Controller) notePull(ni *api.NodeImages, node, image string, ic *api.ImageCache, pod *corev1.Pod, container string) {
	rec, ok := c.recordOf(ni, node, image, string(ic.UID))
	if !ok || rec.Batch != ic.Status.Batch || rec.ImageRef != "" {
		return
	}
	ref := pulledImageRef(pod, container, image)
	if ref == "" {
		return
	}
	rec.ImageRef = ref
	c.addRecord(node, image, rec)
}

// findImage returns image's entry in list, or nil.
func findImage(list []api.NodeImage, image string) *api.NodeImage {
	for i := range list {
		if list[i].Image == image {
			return &list[i]
		}
	}
	return nil
}
