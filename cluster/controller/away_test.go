package controller

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// An agent silent for longer than AgentTimeout is not believed, and the
// cache's Processing message names its node and its last heartbeat; an
// agent that never reported is named only where a purge waits on it.
func TestAwayMessageNamesTheNodesAndSince(t *testing.T) {
	c := &Controller{cfg: Config{AgentTimeout: 3 * time.Minute}}
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	beat := func(ago time.Duration) *api.NodeImages {
		return &api.NodeImages{Status: api.NodeImagesStatus{Agent: &api.AgentStatus{HeartbeatTime: metav1.Time{Time: now.Add(-ago)}}}}
	}
	states := map[string]liveness{}
	for name, ni := range map[string]*api.NodeImages{
		"n-live": beat(time.Minute), "n-dead": beat(10 * time.Minute), "n-none": nil, "n-noagent": {},
	} {
		states[name] = c.agentView(ni, now).liveness
	}
	if states["n-dead"].alive || !states["n-live"].alive {
		t.Fatalf("agent views: dead alive=%v, live alive=%v", states["n-dead"].alive, states["n-live"].alive)
	}
	msg := c.awayMessage(states, nil)
	want := " The pullrecords agent of 1 node(s) is away (no heartbeat within 3m0s): n-dead since 2026-12-02T05:50:00Z."
	if msg != want {
		t.Errorf("awayMessage = %q, want %q", msg, want)
	}
	msg = c.awayMessage(states, map[string]bool{"n-noagent": true})
	if !strings.Contains(msg, "agent of 2 node(s) is away") || !strings.Contains(msg, "n-dead since 2026-12-02T05:50:00Z, n-noagent (no heartbeat yet)") ||
		!strings.Contains(msg, "Removals there are remembered") {
		t.Errorf("awayMessage with a purge waiting = %q", msg)
	}
	delete(states, "n-dead")
	if msg := c.awayMessage(states, nil); msg != "" {
		t.Errorf("no agent away: awayMessage = %q, want none", msg)
	}
}
