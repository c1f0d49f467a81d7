package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// agentReport is the agent's part of a NodeImages status: the only fields
// its apply configuration holds. status.results is deliberately absent, so
// the controller's field manager keeps it.
type agentReport struct {
	Agent  api.AgentStatus     `json:"agent"`
	Images []api.ImagePresence `json:"images"`
	// Unknown: a wanted image's status was unknown this round, so nothing
	// was removed. Not written.
	Unknown bool `json:"-"`
}

// applyConfig is the server-side apply body: identity and the agent's
// status fields, nothing of the spec or metadata beyond the name.
type applyConfig struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   applyMeta   `json:"metadata"`
	Status     agentReport `json:"status"`
}

type applyMeta struct {
	Name string `json:"name"`
}

// apply writes rep into the node's NodeImages status with server-side apply
// (field manager FieldManager, forced), on the status subresource. It never
// creates the object: the status subresource does not create on apply.
func (a *Agent) apply(ctx context.Context, rep agentReport) error {
	if rep.Images == nil {
		rep.Images = []api.ImagePresence{}
	}
	body, err := json.Marshal(applyConfig{
		APIVersion: api.NodeImagesKind.GroupVersion().String(),
		Kind:       api.NodeImagesKind.Kind,
		Metadata:   applyMeta{Name: a.node},
		Status:     rep,
	})
	if err != nil {
		return fmt.Errorf("encoding the status: %w", err)
	}
	_, err = a.dyn.Patch(ctx, a.node, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)}, "status")
	if err != nil {
		return fmt.Errorf("applying NodeImages %s status: %w", a.node, err)
	}
	return nil
}

// sameReport reports whether the object's status already says what rep
// says, heartbeat aside: the same agent fields and the same image entries,
// in any order.
func sameReport(rep agentReport, st api.NodeImagesStatus) bool {
	if st.Agent == nil {
		return false
	}
	got, want := *st.Agent, rep.Agent
	got.HeartbeatTime, want.HeartbeatTime = metav1.Time{}, metav1.Time{}
	if got != want {
		return false
	}
	return maps.Equal(byImage(rep.Images), byImage(st.Images))
}

func byImage(list []api.ImagePresence) map[string]api.ImagePresence {
	m := make(map[string]api.ImagePresence, len(list))
	for _, p := range list {
		m[p.Image] = p
	}
	return m
}
