package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/imagecache"
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
		results []imagecache.ImageWorkResult
		skipped []skippedPair
		desired int
		// Nodes that refuse the cache (limits.go), and one's numbers.
		refusedNodes int
		firstRefusal nodeRefusal
		inFlight     int
		later        time.Duration
		away         = map[string]bool{}
	)
	states := map[string]*nodeState{} // each node's object and agent, read once per sync
	budget := c.newBudget(now)
	creating := c.creatingImages(&ic)
	// One node at a time: the requests of a node are built, decided and
	// dropped before the next node's.
	for _, node := range nodes {
		reqs := nodeRequests(&ic, node)
		if len(reqs) == 0 {
			continue
		}
		desired += len(reqs)
		if r, refused := admitted(node); refused {
			results = append(results, refusedResults(reqs, now)...)
			if refusedNodes++; refusedNodes == 1 {
				firstRefusal = r
			}
			continue
		}
		ni := c.nodeImagesOf(node.Name)
		ns := &nodeState{node: node, ni: ni, agent: c.agentView(ni, now), skip: c.cfg.Placement.ineligible(node),
			pods: c.batchPods(&ic, node.Name), creating: creating[node.Name]}
		states[node.Name] = ns
		var needPod []imagecache.ImageWorkRequest // in spec order
		for _, req := range reqs {
			res, wait, err := c.decide(ctx, &ic, req, ns, budget, now)
			if err != nil {
				return 0, err
			}
			if res != nil {
				results = append(results, *res)
				continue
			}
			if wait.needPod {
				needPod = append(needPod, req)
				continue
			}
			if wait.skip != "" {
				skipped = append(skipped, skippedPair{node: req.Node, image: req.Image, reason: wait.skip})
				continue
			}
			if wait.pod {
				inFlight++
			}
			if wait.away {
				away[req.Node] = true
			}
			if later == 0 || (wait.after > 0 && wait.after < later) {
				later = wait.after
			}
		}
		taken, planned, full := c.planPods(&ic, ns, needPod, budget, now)
		results = append(results, taken...)
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
	unwritten := c.unwritten(cacheKey(&ic), states)
	final := inFlight == 0 && len(results)+len(skipped) == desired && unwritten == 0
	if unwritten > 0 && later == 0 {
		later = 2 * batchDelay
	}
	if !final {
		// An agent going silent sends no event: look again when a live
		// one's heartbeat expires, so the message names it (awayMessage).
		for _, ns := range states {
			if d := ns.agent.expires.Sub(now) + batchDelay; ns.agent.alive && (later == 0 || d < later) {
				later = d
			}
		}
	}
	status := withSkipped(aggregateCount(&ic, desired-len(skipped), results, inFlight, unwritten, c.cfg.FailuresPerImage), skipped)
	if refusedNodes > 0 {
		status.Message += " " + firstRefusal.summary(refusedNodes)
	}
	if status.Status == api.ActionStatusProcessing {
		status.Message += c.awayMessage(states, away)
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

// waitKind says why a request has no result yet.
type waitKind struct {
	after time.Duration
	pod   bool
	// needPod: the request needs a pre-pull pod, which planPods groups
	// with the node's others.
	needPod bool
	away    bool   // a purge waits for the node's agent, which is away
	skip    string // Placement keeps pre-pull pods off the node: why
}

var inFlightWait = waitKind{pod: true}

// nextAction decides whether a new action starts: create for a cache never
// worked on, update when the spec changed, purge and refresh when their
// annotation asks, refresh when the period elapsed.
func (c *Controller) nextAction(ic *api.ImageCache, now time.Time) (string, bool) {
	st := ic.Status
	_, purgeAsked := ic.Annotations[api.PurgeAnnotation]
	_, refreshAsked := ic.Annotations[api.RefreshAnnotation]
	processing := st.Status == api.ActionStatusProcessing
	switch {
	case st.Batch == "" && st.Status == "":
		return api.ReasonImageCacheCreate, true
	case st.Batch == "":
		// Written by kube-fledged: adopt it with a fresh look at every node.
		return api.ReasonImageCacheRefresh, true
	case st.ObservedGeneration != ic.Generation:
		return api.ReasonImageCacheUpdate, true
	case purgeAsked && !(processing && st.Reason == api.ReasonImageCachePurge):
		return api.ReasonImageCachePurge, true
	case refreshAsked && !(processing && st.Reason == api.ReasonImageCacheRefresh):
		return api.ReasonImageCacheRefresh, true
	case !processing && c.refreshDue(ic, now) < 0:
		return api.ReasonImageCacheRefresh, true
	}
	return "", false
}

// refreshDue returns how long until the periodic refresh of a finished
// cache (negative: overdue; zero: never).
func (c *Controller) refreshDue(ic *api.ImageCache, now time.Time) time.Duration {
	st := ic.Status
	if c.cfg.RefreshInterval <= 0 || st.CompletionTime == nil || purged(ic) || st.Reason == api.ReasonCacheSpecValidationFailed || st.Reason == ReasonCacheTooLarge {
		return 0
	}
	d := st.CompletionTime.Add(c.cfg.RefreshInterval).Sub(now)
	if d == 0 {
		d = -1
	}
	return d
}

var processingMessages = map[string]string{
	api.ReasonImageCacheCreate:  "Images are being pulled on the selected nodes; the status shows the outcome when every node has answered.",
	api.ReasonImageCacheUpdate:  "The cache's images are being updated on the selected nodes; the status shows the outcome when every node has answered.",
	api.ReasonImageCacheRefresh: "The cache is being refreshed on the selected nodes; the status shows the outcome when every node has answered.",
	api.ReasonImageCachePurge:   "The cache's images are being removed from the selected nodes; the status shows the outcome when every node has answered.",
}

// startAction writes a new action into the status: Processing, a new batch
// name, the generation it works on. Results of earlier batches stop
// counting from here.
func (c *Controller) startAction(ctx context.Context, ic *api.ImageCache, reason string, now time.Time) error {
	st := api.ImageCacheStatus{
		Status:             api.ActionStatusProcessing,
		Reason:             reason,
		Message:            processingMessages[reason],
		StartTime:          &metav1.Time{Time: now},
		ObservedGeneration: ic.Generation,
		Batch:              strconv.FormatInt(ic.Generation, 10) + "-" + strconv.FormatInt(now.UnixNano(), 36),
	}
	klog.FromContext(ctx).Info("Starting action", "reason", reason, "batch", st.Batch)
	c.recorder.Eventf(eventRef(ic), corev1.EventTypeNormal, reason, "%s", st.Message)
	return c.putStatus(ctx, ic, st)
}

// decide returns the request's result when it has one, or why it waits
// (needPod: it needs a pre-pull pod, which planPods plans).
func (c *Controller) decide(ctx context.Context, ic *api.ImageCache, req imagecache.ImageWorkRequest, ns *nodeState, budget *budget, now time.Time) (*imagecache.ImageWorkResult, waitKind, error) {
	key := resultKey{cache: cacheKey(ic), image: req.Image}
	ni, node, agent := ns.ni, ns.node, ns.agent
	if r, ok := c.knownResult(ni, req.Node, key, ic); ok {
		return r, waitKind{}, nil
	}
	result := func(status imagecache.ImageWorkStatus, reason, message, pod string) (*imagecache.ImageWorkResult, waitKind, error) {
		return c.settle(ic, req, status, reason, message, pod, now), waitKind{}, nil
	}
	if req.WorkType == imagecache.WorkTypePurge {
		return c.decidePurge(ic, ni, agent, req, result)
	}
	if in, ok := ns.pods[req.Image]; ok {
		outs := podOutcomes(in.pod, now, c.cfg.PullDeadline)
		out := outs[in.container]
		if !out.final {
			return nil, waitKind{pod: true, after: lastProgress(in.pod).Add(c.cfg.PullDeadline).Sub(now)}, nil
		}
		// A pod with a failed pull is deleted once every image of it has
		// its result (else the kubelet keeps retrying the pull; the result
		// decided last carries the delete, after the others); one whose
		// pulls all succeeded is idle and goes with the rest of the
		// action's pods in one request at its end.
		del := ""
		if allFinal(outs) && anyFailed(outs) {
			del = in.pod.Namespace + "/" + in.pod.Name
		}
		msg := out.message
		if out.status == imagecache.StatusSucceeded {
			c.notePull(ni, req, ic, in.pod, in.container)
		} else if out.status == imagecache.StatusFailed {
			msg = withSecretHint(ic, msg)
		}
		return result(out.status, out.reason, msg, del)
	}
	if ns.creating[req.Image] {
		// Created by this controller, not yet in the informer.
		return nil, inFlightWait, nil
	}
	if ns.skip != "" {
		// Placement (placement.go): no pod, and no presence answer, for a
		// node pre-pull pods may not go to. A pod created while the node
		// was eligible is still read above.
		return nil, waitKind{skip: ns.skip}, nil
	}
	if agent.alive && !agent.reported(req.Image) {
		c.nodeQueue.Add(req.Node) // make sure the image is in the node's spec
		return nil, waitKind{after: waitForReport}, nil
	}
	if agent.alive && agent.fullPercent > c.cfg.MaxImageFsUsedPercent && c.cfg.MaxImageFsUsedPercent < 100 {
		return result(imagecache.StatusFailed, "ImageFsAboveThreshold",
			fmt.Sprintf("not pulled: the node's image filesystem is %d%% full (limit %d%%)", agent.fullPercent, c.cfg.MaxImageFsUsedPercent), "")
	}
	// Presence answers only for a cache without pull secrets. With secrets,
	// an image on the node says nothing about them: the pod goes to the
	// kubelet, which pulls unless its records show the secret verified, and
	// records it (KEP-2535), so the cache's pods may then use the image.
	if !budget.alwaysPull(req.Image) && len(ic.Spec.ImagePullSecrets) == 0 {
		if agent.alive && agent.present(req.Image) {
			return result(imagecache.StatusAlreadyPulled, "", "present in the runtime (agent)", "")
		}
		if !agent.alive && node != nil && presentInNodeStatus(node, req.Image) {
			return result(imagecache.StatusAlreadyPulled, "", "listed in the node's status", "")
		}
	}
	return nil, waitKind{needPod: true}, nil
}

// settle records req's result, to be written to its node's object (then
// pod, "" for none, is deleted), and returns it.
func (c *Controller) settle(ic *api.ImageCache, req imagecache.ImageWorkRequest, status imagecache.ImageWorkStatus, reason, message, pod string, now time.Time) *imagecache.ImageWorkResult {
	key := resultKey{cache: cacheKey(ic), image: req.Image}
	message = truncateMessage(message, maxResultMessage) // the node's object holds it: bounded (limits.go)
	c.addPending(req.Node, key, api.NodeResult{
		Cache: key.cache, CacheUID: string(ic.UID), Image: req.Image, Batch: ic.Status.Batch,
		Work: string(req.WorkType), Status: string(status), Reason: reason, Message: message,
		Time: metav1.Time{Time: now},
	}, pod)
	return &imagecache.ImageWorkResult{Request: req, Status: status, Reason: reason, Message: message, Finished: now}
}

func anyFailed(outs map[string]outcome) bool {
	for _, o := range outs {
		if o.status != imagecache.StatusSucceeded {
			return true
		}
	}
	return false
}

// planPods groups the requests of one node that need a pre-pull pod, in
// spec order, into pods of at most MaxImagesPerPod images, and plans as
// many pods as the budget allows (it counts pods, not images). It returns
// the results of requests whose pod's name is held by a pod this
// controller did not create, how many requests got a planned pod, and
// whether some wait for room.
func (c *Controller) planPods(ic *api.ImageCache, ns *nodeState, reqs []imagecache.ImageWorkRequest, budget *budget, now time.Time) (taken []imagecache.ImageWorkResult, planned int, full bool) {
	per := c.cfg.MaxImagesPerPod
	for len(reqs) > 0 {
		n := min(per, len(reqs))
		group := reqs[:n]
		reqs = reqs[n:]
		images := make([]string, len(group))
		for i, r := range group {
			images[i] = r.Image
		}
		name := podName(ic, ic.Status.Batch, group[0].Node, images)
		if pod, err := c.pods.Pods(ic.Namespace).Get(name); err == nil {
			if c.owns(pod) {
				// Ours but not read as this batch's (being deleted): wait.
				full = true
				continue
			}
			// Not ours (see owned.go): its status says nothing of a pull we
			// asked for, and ours cannot be created under its name.
			for _, r := range group {
				taken = append(taken, *c.settle(ic, r, imagecache.StatusFailed, "PodNameTaken",
					fmt.Sprintf("pod %s/%s, which this controller did not create, holds the pre-pull pod's name; delete it", pod.Namespace, pod.Name), "", now))
			}
			continue
		}
		if !budget.take(group[0].Node) {
			return taken, planned, true
		}
		for _, r := range group {
			if ns.agent.alive && !ns.agent.present(r.Image) {
				// The agent reported the image absent: if this pod's pull
				// succeeds, this cache pulled it (notePull), and may purge it.
				c.addRecord(r.Node, r.Image, api.PullRecord{Cache: cacheKey(ic), CacheUID: string(ic.UID), Batch: ic.Status.Batch})
			}
		}
		budget.create = append(budget.create, plannedPod{pod: c.prepullPod(ic, group[0].Node, images), reqs: group})
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

// createParallelism is how many pod creations one sync has in flight: a
// round of a large cache creates up to MaxInFlight pods, and one at a time
// the API server's latency, not its capacity, would bound the rate.
const createParallelism = 16

// createPods creates the pods a sync decided on, createParallelism at a
// time, and returns the first error (the others are attempted anyway; the
// retry finds those that exist by name). A pod the API server refuses for
// good is not an error: its request fails with the refusal (refused.go).
func (c *Controller) createPods(ctx context.Context, ic *api.ImageCache, pods []plannedPod) error {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		first   error
		refused []refusedPod
		slots   = make(chan struct{}, createParallelism)
	)
	for _, p := range pods {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			err := c.createPod(ctx, p.pod)
			if r, ok := podRefusal(err); ok {
				mu.Lock()
				refused = append(refused, refusedPod{planned: p, refusal: r, err: err})
				mu.Unlock()
				return
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := c.settleRefused(ctx, ic, refused); first == nil {
		first = err
	}
	return first
}

func findImage(list []api.NodeImage, image string) *api.NodeImage {
	for i := range list {
		if list[i].Image == image {
			return &list[i]
		}
	}
	return nil
}

// knownResult returns the request's result of the current batch when one
// is pending or written on the node's object.
func (c *Controller) knownResult(ni *api.NodeImages, node string, key resultKey, ic *api.ImageCache) (*imagecache.ImageWorkResult, bool) {
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
	return &imagecache.ImageWorkResult{
		Request: imagecache.ImageWorkRequest{Image: r.Image, Node: node, WorkType: imagecache.WorkType(r.Work),
			ImageCache: imagecache.CacheRef{Namespace: ic.Namespace, Name: ic.Name}},
		Status: imagecache.ImageWorkStatus(r.Status), Reason: r.Reason, Message: r.Message, Finished: r.Time.Time,
	}, true
}

// unwritten counts the cache's results not yet written to the nodes'
// objects.
func (c *Controller) unwritten(cache string, nodes map[string]*nodeState) int {
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
		c.cfg.Metrics.resultDecided(r.Status)
	}
	// A little later: the node's other results of this round join the write.
	c.nodeQueue.AddAfter(node, resultWriteDelay)
}

func (c *Controller) nodeImagesOf(node string) *api.NodeImages {
	obj, err := c.nodeImages.Get(node)
	if err != nil {
		return nil
	}
	var ni api.NodeImages
	if api.FromUnstructured(obj.(*unstructured.Unstructured), &ni) != nil {
		return nil
	}
	return &ni
}

// agentView is what the controller may believe of a node's agent.
type agentView struct {
	alive bool
	// awaySince is the last heartbeat of an agent that reported once and
	// then stopped for longer than AgentTimeout; zero otherwise.
	awaySince time.Time
	// expires is when a live agent's heartbeat stops being believed.
	expires     time.Time
	fullPercent int
	observed    int64
	generation  int64
	spec        map[string]bool
	presence    map[string]api.ImagePresence
}

func (c *Controller) agentView(ni *api.NodeImages, now time.Time) agentView {
	if ni == nil || ni.Status.Agent == nil {
		return agentView{}
	}
	if beat := ni.Status.Agent.HeartbeatTime.Time; now.Sub(beat) > c.cfg.AgentTimeout {
		return agentView{awaySince: beat}
	}
	a := ni.Status.Agent
	v := agentView{alive: true, expires: a.HeartbeatTime.Add(c.cfg.AgentTimeout), observed: a.ObservedGeneration, generation: ni.Generation,
		spec: map[string]bool{}, presence: map[string]api.ImagePresence{}}
	if a.ImageFsTotalBytes > 0 {
		v.fullPercent = int(a.ImageFsUsedBytes * 100 / a.ImageFsTotalBytes)
	}
	for _, list := range [][]api.NodeImage{ni.Spec.Images, ni.Spec.Purge} {
		for _, img := range list {
			v.spec[img.Image] = true
		}
	}
	for _, p := range ni.Status.Images {
		v.presence[p.Image] = p
	}
	return v
}

// maxAwayNamed caps the nodes the away message names.
const maxAwayNamed = 10

// awayMessage names, for a Processing status, the nodes of the action whose
// agent reported once and then went silent for longer than AgentTimeout
// (with its last heartbeat), and the nodes a purge waits on (purgeWaits)
// whose agent is not alive; "" when there are none. An agent's presence
// reports are not believed once it is away.
func (c *Controller) awayMessage(states map[string]*nodeState, purgeWaits map[string]bool) string {
	var nodes []string
	for n, ns := range states {
		if !ns.agent.awaySince.IsZero() || purgeWaits[n] {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return ""
	}
	list := namedList(nodes, maxAwayNamed, func(n string) string {
		if since := states[n].agent.awaySince; !since.IsZero() {
			return n + " since " + since.UTC().Format(time.RFC3339)
		}
		return n + " (no heartbeat yet)"
	})
	msg := fmt.Sprintf(" The pullrecords agent of %d node(s) is away (no heartbeat within %s): %s.", len(nodes), c.cfg.AgentTimeout, list)
	if len(purgeWaits) > 0 {
		msg += " Removals there are remembered and done when it reports again."
	}
	return msg
}

func (v agentView) generationSeen() bool { return v.alive && v.observed >= v.generation }

// reported: the agent answered for image, after seeing the spec that
// holds it.
func (v agentView) reported(image string) bool {
	_, ok := v.presence[image]
	return v.generationSeen() && v.spec[image] && ok
}

func (v agentView) present(image string) bool { return v.reported(image) && v.presence[image].Present }

// nodeState is what one sync knows of a node.
type nodeState struct {
	node  *corev1.Node
	ni    *api.NodeImages
	agent agentView
	skip  string // why Placement keeps pre-pull pods off the node; "" if it does not
	// pods are the cache's current pre-pull pods on the node, by image;
	// creating the images of those created but not yet in the informer.
	pods     map[string]podImage
	creating map[string]bool
}

// budget is the room for new pre-pull pods during one sync: the in-flight
// limits minus the pods that exist (the informer's) or were just created
// (not yet in the informer).
type budget struct {
	c       *Controller
	create  []plannedPod // pods to create at the end of the sync
	total   int
	perNode map[string]int
	counted map[string]bool // perNode includes the informer's pods
	always  map[string]bool // alwaysPull of each image seen this sync
}

func (c *Controller) newBudget(now time.Time) *budget {
	b := &budget{c: c, perNode: map[string]int{}, counted: map[string]bool{}, always: map[string]bool{}}
	for _, o := range c.podIndex.List() {
		if p := o.(*corev1.Pod); pulling(p) && c.owns(p) {
			b.total++
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, p := range c.created {
		if now.Sub(p.at) > time.Minute { // the informer missed it; stop counting it
			delete(c.created, name)
			continue
		}
		b.total++
		b.perNode[p.node]++
	}
	return b
}

// plannedPod is a pod to create and the requests it serves, one per
// container in order.
type plannedPod struct {
	pod  *corev1.Pod
	reqs []imagecache.ImageWorkRequest
}

// pulling reports whether a pre-pull pod still counts against the limits:
// it is not finished (finished ones wait, idle, for the end of their
// action) and not being deleted.
func pulling(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// deleteActionPods deletes the current action's remaining pods once its
// results are written: one request per pod, each with the pod's UID as a
// precondition, and only pods the controller owns (a collection delete by
// label would also take pods anyone else labelled alike).
func (c *Controller) deleteActionPods(ctx context.Context, ic *api.ImageCache) error {
	objs, err := c.podIndex.ByIndex(podsByCacheIndex, cacheKey(ic))
	if err != nil {
		return err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		slots = make(chan struct{}, createParallelism)
	)
	for _, o := range objs {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp != nil || p.Labels[batchLabel] != ic.Status.Batch || !c.owns(p) {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := c.deletePod(ctx, p.Namespace, p.Name, p.UID); err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("deleting the pre-pull pods of %s: %w", cacheKey(ic), err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// take reserves room for one pod on node, or reports that there is none.
func (b *budget) take(node string) bool {
	if !b.counted[node] {
		objs, _ := b.c.podIndex.ByIndex(podsByNodeIndex, node)
		for _, o := range objs {
			if p := o.(*corev1.Pod); pulling(p) && b.c.owns(p) {
				b.perNode[node]++
			}
		}
		b.counted[node] = true
	}
	if b.perNode[node] >= b.c.cfg.MaxInFlightPerNode || b.total >= b.c.cfg.MaxInFlight {
		return false
	}
	b.perNode[node]++
	b.total++
	return true
}

func (c *Controller) createPod(ctx context.Context, pod *corev1.Pod) error {
	_, err := c.cfg.Kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating pre-pull pod %s/%s for %d image(s) on %s: %w", pod.Namespace, pod.Name, len(pod.Spec.Containers), pod.Spec.NodeName, err)
	}
	c.mu.Lock()
	images := make([]string, 0, len(pod.Spec.Containers))
	for _, ct := range pod.Spec.Containers {
		images = append(images, ct.Image)
	}
	c.created[pod.Namespace+"/"+pod.Name] = createdPod{node: pod.Spec.NodeName, at: c.cfg.Clock.Now(),
		cacheUID: pod.Labels[cacheUIDLabel], batch: pod.Labels[batchLabel], images: images}
	c.mu.Unlock()
	c.cfg.Metrics.podCreated()
	klog.FromContext(ctx).V(2).Info("Created pre-pull pod", "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "images", len(pod.Spec.Containers))
	return nil
}

// deletePods deletes the cache's pods that match and have no pending
// result (those go once their result is written).
func (c *Controller) deletePods(ctx context.Context, key string, match func(*corev1.Pod) bool) error {
	objs, err := c.podIndex.ByIndex(podsByCacheIndex, key)
	if err != nil {
		return err
	}
	for _, o := range objs {
		pod := o.(*corev1.Pod)
		if !match(pod) || pod.DeletionTimestamp != nil || !c.owns(pod) {
			continue
		}
		if err := c.deletePod(ctx, pod.Namespace, pod.Name, pod.UID); err != nil {
			return err
		}
	}
	return nil
}

func (c *Controller) deletePod(ctx context.Context, ns, name string, uid types.UID) error {
	opts := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := c.cfg.Kube.CoreV1().Pods(ns).Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pre-pull pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// aggregate turns the results into the status kube-fledged users read:
// Processing until every request has a result, then Succeeded, Failed (any
// failed or unknown result, each listed under its image with node, reason
// and message, capped per image) or NoImagesPulledOrDeleted (no node
// matched).
func aggregate(ic *api.ImageCache, reqs []imagecache.ImageWorkRequest, results []imagecache.ImageWorkResult, inFlight, unwritten, perImage int) api.ImageCacheStatus {
	return aggregateCount(ic, len(reqs), results, inFlight, unwritten, perImage)
}

// aggregateCount is aggregate for an action of desired requests.
func aggregateCount(ic *api.ImageCache, desired int, results []imagecache.ImageWorkResult, inFlight, unwritten, perImage int) api.ImageCacheStatus {
	st := ic.Status
	st.Failures = nil
	counts := &api.ResultCounts{Desired: int32(desired), InFlight: int32(inFlight)}
	listed := 0 // failures listed, at most maxFailuresListed (limits.go)
	sort.Slice(results, func(i, j int) bool {
		if results[i].Request.Image != results[j].Request.Image {
			return results[i].Request.Image < results[j].Request.Image
		}
		return results[i].Request.Node < results[j].Request.Node
	})
	for _, r := range results {
		switch r.Status {
		case imagecache.StatusSucceeded:
			counts.Succeeded++
		case imagecache.StatusAlreadyPulled:
			counts.AlreadyPulled++
		case imagecache.StatusFailed, imagecache.StatusUnknown:
			if r.Status == imagecache.StatusFailed {
				counts.Failed++
			} else {
				counts.Unknown++
			}
			if st.Failures == nil {
				st.Failures = map[string]api.NodeReasonMessageList{}
			}
			if len(st.Failures[r.Request.Image]) >= perImage || listed >= maxFailuresListed {
				counts.FailuresOmitted++
				continue
			}
			listed++
			st.Failures[r.Request.Image] = append(st.Failures[r.Request.Image], api.NodeReasonMessage{
				Node: r.Request.Node, Reason: r.Reason, Message: truncate(r.Message, 1024)})
		}
	}
	st.Counts = counts
	done := int(counts.Succeeded + counts.AlreadyPulled + counts.Failed + counts.Unknown)
	purge := st.Reason == api.ReasonImageCachePurge
	switch {
	case done < desired || unwritten > 0:
		st.Status = api.ActionStatusProcessing
		st.Message = processingMessages[st.Reason]
		st.CompletionTime = nil
	case desired == 0:
		st.Status = api.ActionStatusNoImagesPulledOrDeleted
		st.Message = noRequestsMessage(ic)
	case counts.Failed+counts.Unknown > 0 && purge:
		st.Status = api.ActionStatusFailed
		st.Message = "Some images could not be removed from some nodes; see failures."
	case counts.Failed+counts.Unknown > 0:
		st.Status = api.ActionStatusFailed
		st.Message = "Some images could not be pulled on some nodes; see failures."
	case purge:
		st.Status = api.ActionStatusSucceeded
		st.Message = purgeSummary(results)
	default:
		st.Status = api.ActionStatusSucceeded
		st.Message = "Every image of the cache is on every selected node."
	}
	return st
}

// dropAnnotationsPatch is the JSON merge patch that removes the
// annotations names (a null value deletes a key).
func dropAnnotationsPatch(names []string) ([]byte, error) {
	null := make(map[string]any, len(names))
	for _, n := range names {
		null[n] = nil
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": null}})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// finishAction ends the current action: the annotation that asked for it
// goes first, then the final status (so a crash in between leaves an action
// that is finished again, not one that starts again), then an Event.
func (c *Controller) finishAction(ctx context.Context, ic *api.ImageCache, st api.ImageCacheStatus, now time.Time) error {
	var drop []string
	for _, a := range []string{api.RefreshAnnotation, api.PurgeAnnotation} {
		if _, ok := ic.Annotations[a]; ok {
			if a == api.PurgeAnnotation && ic.Status.Reason != api.ReasonImageCachePurge {
				continue // asked after this action started: it runs next
			}
			drop = append(drop, a)
		}
	}
	if len(drop) > 0 {
		patch, err := dropAnnotationsPatch(drop)
		if err != nil {
			return err
		}
		if _, err := c.cfg.Dynamic.Resource(api.ImageCacheResource).Namespace(ic.Namespace).
			Patch(ctx, ic.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
			return fmt.Errorf("removing annotations %v: %w", drop, err)
		}
	}
	wasFinal := ic.Status.Status != api.ActionStatusProcessing && ic.Status.CompletionTime != nil
	if st.CompletionTime == nil || !wasFinal {
		st.CompletionTime = &metav1.Time{Time: now}
	}
	if equality.Semantic.DeepEqual(st, ic.Status) {
		return c.deleteActionPods(ctx, ic)
	}
	if err := c.putStatus(ctx, ic, st); err != nil {
		return err
	}
	if err := c.deleteActionPods(ctx, ic); err != nil {
		return err
	}
	if !wasFinal || ic.Status.Status != st.Status {
		kind := corev1.EventTypeNormal
		if st.Status == api.ActionStatusFailed {
			kind = corev1.EventTypeWarning
		}
		c.recorder.Eventf(eventRef(ic), kind, string(st.Status), "%s (%s)", st.Message, countsText(st.Counts))
		klog.FromContext(ctx).Info("Action finished", "status", st.Status, "reason", st.Reason, "counts", countsText(st.Counts))
	}
	return nil
}

func countsText(n *api.ResultCounts) string {
	if n == nil {
		return ""
	}
	return fmt.Sprintf("%d pulled, %d already present, %d failed, %d unknown, %d skipped of %d", n.Succeeded, n.AlreadyPulled, n.Failed, n.Unknown, n.Skipped, n.Desired)
}

// statusInterval is how often an action's progress (counts) is written.
const statusInterval = time.Second

// progressDue returns how long to wait before writing an in-progress
// status that only updates counts; zero means write now. A change of
// status, reason or failures is written at once.
func (c *Controller) progressDue(key string, ic *api.ImageCache, st api.ImageCacheStatus, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := c.statusWritten[key]
	if st.Status == ic.Status.Status && equality.Semantic.DeepEqual(st.Failures, ic.Status.Failures) && now.Sub(last) < statusInterval {
		return statusInterval - now.Sub(last)
	}
	c.statusWritten[key] = now
	return 0
}

// writeStatus writes an in-progress status when it changed.
func (c *Controller) writeStatus(ctx context.Context, ic *api.ImageCache, st api.ImageCacheStatus) error {
	if equality.Semantic.DeepEqual(st, ic.Status) {
		return nil
	}
	return c.putStatus(ctx, ic, st)
}

// putStatus replaces the status through the status subresource, guarded by
// the resource version the decision was made on.
func (c *Controller) putStatus(ctx context.Context, ic *api.ImageCache, st api.ImageCacheStatus) error {
	next := *ic
	next.Status = st
	u, err := api.ToUnstructured(&next)
	if err != nil {
		return err
	}
	u.SetAPIVersion(api.ImageCacheKind.GroupVersion().String())
	u.SetKind(api.ImageCacheKind.Kind)
	_, err = c.cfg.Dynamic.Resource(api.ImageCacheResource).Namespace(ic.Namespace).
		UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("writing status of %s/%s: %w", ic.Namespace, ic.Name, err)
	}
	return nil
}
