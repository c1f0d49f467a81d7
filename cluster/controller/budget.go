package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

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

// pulling reports whether a pre-pull pod still counts against the limits:
// it is not finished (finished ones wait, idle, for the end of their
// action) and not being deleted.
func pulling(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
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
