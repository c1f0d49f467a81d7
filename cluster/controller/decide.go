package controller

import (
	"fmt"
	"time"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// waitKind says why a (node, image) has no result yet.
type waitKind struct {
	after time.Duration // look again this soon (0: when an event comes)
	pod   bool          // its pre-pull pod is pulling
	// needPod: it needs a pre-pull pod, which planPods groups with the
	// node's others.
	needPod bool
	away    bool   // a purge waits for the node's agent, which is away
	skip    string // Placement keeps pre-pull pods off the node: why
}

var inFlightWait = waitKind{pod: true}

// decide returns the result of image on the node of ns for the cache's
// current action when it has one, or why it waits. In order: a result
// already decided this batch; a purge's (decidePurge); the image's
// pre-pull pod's answer; a pod just created; placement; the agent's
// report, image filesystem and presence answers (for a cache without pull
// secrets only). Anything else needs a pre-pull pod.
func (c *Controller) decide(ic *api.ImageCache, image string, ns *nodeState, budget *budget, now time.Time) (*api.NodeResult, waitKind) {
	node, agent := ns.node.Name, ns.agent
	if r, ok := c.knownResult(ns.ni, node, image, ic); ok {
		return r, waitKind{}
	}
	if purging(ic.Status) {
		o, wait := c.decidePurge(ic, ns, image)
		if !o.Final() {
			return nil, wait
		}
		return c.settle(ic, node, image, o, fromPod{}), waitKind{}
	}
	if in, ok := ns.pods[image]; ok {
		outs := podOutcomes(in.pod, now, c.cfg.PullDeadline)
		out := outs[in.container]
		if !out.Final() {
			return nil, waitKind{pod: true, after: lastProgress(in.pod).Add(c.cfg.PullDeadline).Sub(now)}
		}
		// A pod with a failed pull is deleted once every image of it has
		// its result written (else the kubelet keeps retrying the pull);
		// one whose pulls all succeeded is idle and goes with the rest of
		// the action's pods at its end.
		done := allFinal(outs)
		from := fromPod{key: in.pod.Namespace + "/" + in.pod.Name, done: done, remove: done && anyFailed(outs)}
		switch out.Status {
		case api.WorkSucceeded:
			// Its image ID reaches the node's spec with the pod's
			// results (addRecord, results.go "held").
			c.notePull(ns.ni, node, image, ic, in.pod, in.container)
		case api.WorkFailed:
			out.Message = withSecretHint(ic, out.Message)
		}
		return c.settle(ic, node, image, out, from), waitKind{}
	}
	if ns.creating[image] {
		// Created by this controller, not yet in the informer.
		return nil, inFlightWait
	}
	if ns.skip != "" {
		// Placement (placement.go): no pod, and no presence answer, for a
		// node pre-pull pods may not go to. A pod created while the node
		// was eligible is still read above.
		return nil, waitKind{skip: ns.skip}
	}
	if agent.alive && !agent.reported(image) {
		c.nodeQueue.Add(node) // make sure the image is in the node's spec
		return nil, waitKind{after: waitForReport}
	}
	if agent.alive && agent.fullPercent > c.cfg.MaxImageFsUsedPercent && c.cfg.MaxImageFsUsedPercent < 100 {
		return c.settle(ic, node, image, api.Outcome{Status: api.WorkFailed, Reason: "ImageFsAboveThreshold",
			Message: fmt.Sprintf("not pulled: the node's image filesystem is %d%% full (limit %d%%)", agent.fullPercent, c.cfg.MaxImageFsUsedPercent)}, fromPod{}), waitKind{}
	}
	// Presence answers only for a cache without pull secrets. With secrets,
	// an image on the node says nothing about them: the pod goes to the
	// kubelet, which pulls unless its records show the secret verified, and
	// records it (KEP-2535), so the cache's pods may then use the image.
	if !budget.alwaysPull(image) && len(ic.Spec.ImagePullSecrets) == 0 {
		if agent.alive && agent.present(image) {
			return c.settle(ic, node, image, api.Outcome{Status: api.WorkAlreadyPulled, Message: "present in the runtime (agent)"}, fromPod{}), waitKind{}
		}
		if !agent.alive && presentInNodeStatus(ns.node, image) {
			return c.settle(ic, node, image, api.Outcome{Status: api.WorkAlreadyPulled, Message: "listed in the node's status"}, fromPod{}), waitKind{}
		}
	}
	return nil, waitKind{needPod: true}
}

// anyFailed reports whether any image of a pod did not succeed.
func anyFailed(outs map[string]api.Outcome) bool {
	for _, o := range outs {
		if o.Status != api.WorkSucceeded {
			return true
		}
	}
	return false
}
