package controller

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/cluster/api"
)

func everything() labels.Selector { return labels.Everything() }

// waitForReport is how soon a cache waiting on an agent's report or on
// capacity is looked at again (events usually wake it sooner).
const waitForReport = 2 * time.Second

// batchDelay gathers the events of one round (pods finishing, results
// decided) into one sync of the cache and one write per node: a cache
// sync looks at every (node, image) of the cache, so running it once per
// event would cost the square of the cache's size.
const batchDelay = 100 * time.Millisecond

// resultWriteDelay gathers a node's results into one write: a result is
// safe meanwhile, as its pod stays until the write is done.
const resultWriteDelay = 2 * time.Second

// syncCache moves one ImageCache forward: it starts a new action when one
// is due, decides a result for every (node, image) of the current action
// that has none (present already, pulled by a pod, failed, or purged),
// creates the pre-pull pods capacity allows, and writes the aggregated
// status. Everything it decides from is in the API (the cache's status,
// the pods, the NodeImages objects), so a restarted controller carries on.
func (c *Controller) syncCache(ctx context.Context, key string) (time.Duration, error) {
	logger := klog.FromContext(ctx).WithValues("imageCache", key)
	ctx = klog.NewContext(ctx, logger)
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	obj, err := c.caches.ByNamespace(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		delete(c.statusWritten, key)
		c.mu.Unlock()
		c.refused.forget(key)
		if err := c.deletePods(ctx, key, func(*corev1.Pod) bool { return true }); err != nil {
			return 0, err
		}
		c.forgetGone(key)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var ic api.ImageCache
	if err := api.FromUnstructured(obj.(*unstructured.Unstructured), &ic); err != nil {
		return 0, err
	}
	now := c.cfg.Clock.Now()
	if reason, due := c.nextAction(&ic, now); due {
		return 0, c.startAction(ctx, &ic, reason, now)
	}
	// Pods of earlier actions, or of an earlier cache of the same name.
	if err := c.deletePods(ctx, key, func(p *corev1.Pod) bool {
		return p.Labels[cacheUIDLabel] != string(ic.UID) || p.Labels[batchLabel] != ic.Status.Batch
	}); err != nil {
		return 0, err
	}
	c.forgetGone(key)
	if n := distinctImages(&ic); n > c.cfg.MaxImagesPerCache {
		// Refused before any (node, image) is looked at: nothing of it is
		// written to a node, and the sync costs nothing per node.
		return 0, c.refuseTooLarge(ctx, &ic, n, now)
	}
	nodes, err := c.nodes.List(everything())
	if err != nil {
		return 0, err
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	admitted, err := c.admittedOn(&ic)
	if err != nil {
		return 0, err
	}
	var (
		tally   = newTally(c.cfg.FailuresPerImage)
		skipped skips
		desired int
		// Nodes that refuse the cache (limits.go), and one's numbers.
		refusedNodes int
		firstRefusal nodeRefusal
		inFlight     int
		later        time.Duration
		away         = map[string]bool{}
	)
	// What the sync keeps of each node it decided on: its agent's liveness.
	// The node's object and the agent's report are dropped with the node.
	agents := map[string]liveness{}
	budget := c.newBudget(now)
	creating := c.creatingImages(&ic)
	// One node at a time: a node's images are decided, and its pods
	// planned, before the next node's; only the tally stays.
	for _, node := range nodes {
		images := imagesFor(&ic, node)
		if len(images) == 0 {
			continue
		}
		desired += len(images)
		if r, refused := admitted(node); refused {
			o := refusedOutcome(&ic)
			for _, img := range images {
				tally.add(node.Name, img, o)
			}
			if refusedNodes++; refusedNodes == 1 {
				firstRefusal = r
			}
			continue
		}
		ni := c.nodeImagesOf(node.Name)
		ns := &nodeState{node: node, ni: ni, agent: c.agentView(ni, now), skip: c.cfg.Placement.ineligible(node),
			pods: c.batchPods(&ic, node.Name), creating: creating[node.Name]}
		agents[node.Name] = ns.agent.liveness
		var needPod []string // in spec order
		for _, img := range images {
			res, wait := c.decide(&ic, img, ns, budget, now)
			switch {
			case res != nil:
				tally.add(node.Name, img, res.Outcome)
				continue
			case wait.needPod:
				needPod = append(needPod, img)
				continue
			case wait.skip != "":
				skipped.add(node.Name, wait.skip)
				continue
			}
			if wait.pod {
				inFlight++
			}
			if wait.away {
				away[node.Name] = true
			}
			if later == 0 || (wait.after > 0 && wait.after < later) {
				later = wait.after
			}
		}
		taken, planned, full := c.planPods(&ic, ns, needPod, budget)
		for _, r := range taken {
			tally.add(node.Name, r.Image, r.Outcome)
		}
		inFlight += planned
		if full && (later == 0 || waitForReport < later) {
			later = waitForReport
		}
	}
	if err := c.createPods(ctx, &ic, budget.create); err != nil {
		return 0, err
	}
	// The action is over once every result is written to its node's
	// object, so whoever reads a final status finds the results there.
	unwritten := c.unwritten(cacheKey(&ic), agents)
	final := inFlight == 0 && tally.done()+skipped.pairs == desired && unwritten == 0
	if unwritten > 0 && later == 0 {
		later = 2 * batchDelay
	}
	if !final {
		// An agent going silent sends no event: look again when a live
		// one's heartbeat expires, so the message names it (awayMessage).
		for _, a := range agents {
			if d := a.expires.Sub(now) + batchDelay; a.alive && (later == 0 || d < later) {
				later = d
			}
		}
	}
	status := withSkipped(tally.status(&ic, desired-skipped.pairs, inFlight, unwritten), skipped)
	if refusedNodes > 0 {
		status.Message += " " + firstRefusal.summary(refusedNodes)
	}
	if status.Status == api.ActionStatusProcessing {
		status.Message += c.awayMessage(agents, away)
	}
	if final {
		if err := c.finishAction(ctx, &ic, status, now); err != nil {
			return 0, err
		}
		return c.refreshDue(&ic, now), nil
	}
	if wait := c.progressDue(key, &ic, status, now); wait > 0 {
		if later == 0 || wait < later {
			later = wait
		}
		return later, nil
	}
	if err := c.writeStatus(ctx, &ic, status); err != nil {
		return 0, err
	}
	return later, nil
}
