package controller

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pullrecords/pullrecords/cluster/api"
)

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

// liveness is whether a node's agent is believed, and until when: all a
// cache's sync keeps of a node once it has decided the node's images.
type liveness struct {
	alive bool
	// awaySince is the last heartbeat of an agent that reported once and
	// then stopped for longer than AgentTimeout; zero otherwise.
	awaySince time.Time
	// expires is when a live agent's heartbeat stops being believed.
	expires time.Time
}

// agentView is what the controller may believe of a node's agent.
type agentView struct {
	liveness
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
		return agentView{liveness: liveness{awaySince: beat}}
	}
	a := ni.Status.Agent
	v := agentView{liveness: liveness{alive: true, expires: a.HeartbeatTime.Add(c.cfg.AgentTimeout)}, observed: a.ObservedGeneration, generation: ni.Generation,
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

func (v agentView) generationSeen() bool { return v.alive && v.observed >= v.generation }

// reported: the agent answered for image, after seeing the spec that
// holds it.
func (v agentView) reported(image string) bool {
	_, ok := v.presence[image]
	return v.generationSeen() && v.spec[image] && ok
}

func (v agentView) present(image string) bool { return v.reported(image) && v.presence[image].Present }

// maxAwayNamed caps the nodes the away message names.
const maxAwayNamed = 10

// awayMessage names, for a Processing status, the nodes of the action whose
// agent reported once and then went silent for longer than AgentTimeout
// (with its last heartbeat), and the nodes a purge waits on (purgeWaits)
// whose agent is not alive; "" when there are none. An agent's presence
// reports are not believed once it is away.
func (c *Controller) awayMessage(agents map[string]liveness, purgeWaits map[string]bool) string {
	var nodes []string
	for n, a := range agents {
		if !a.awaySince.IsZero() || purgeWaits[n] {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return ""
	}
	list := namedList(nodes, maxAwayNamed, func(n string) string {
		if since := agents[n].awaySince; !since.IsZero() {
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
