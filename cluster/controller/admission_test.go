package controller_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/apiservertest"
)

// The Deployment and DaemonSet apply to a real API server as shipped, so the
// manifests cannot rot.
func TestDeployManifestsApply(t *testing.T) {
	install(t)
	err := apiservertest.Apply(t.Context(), apiservertest.Need(t).Admin,
		repoFile("deploy", "cluster", "controller.yaml"), repoFile("deploy", "cluster", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(apiservertest.Current().Admin)
	ds, err := kube.AppsV1().DaemonSets("pullrecords-system").Get(t.Context(), "pullrecords-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		for _, c := range ds.Spec.Template.Spec.Containers {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name && !m.ReadOnly {
					t.Errorf("host path %s is mounted writable", v.HostPath.Path)
				}
			}
		}
	}
}

// What RBAC cannot say, admission does, on the real API server: an agent
// writes only its own node's object; neither reads Secrets.
func TestLeastPrivilege(t *testing.T) {
	e := newEnv(t)
	nodeA, nodeB := e.addNode("a", true), e.addNode("b", true)
	s := apiservertest.Need(t)
	ctl := kubernetes.NewForConfigOrDie(e.ctlCfg)

	// A Secret nobody of ours may read.
	if _, err := e.admin.CoreV1().Secrets(e.ns).Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred"},
		StringData: map[string]string{"password": "p"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Which pods it may create and delete: admission_pin_test.go.
	if _, err := ctl.CoreV1().Secrets(e.ns).Get(e.ctx, "regcred", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the controller read a Secret: %v", err)
	}

	// The agent of node A: a token bound to a pod on node A.
	agentPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-" + nodeA, Namespace: "pullrecords-system"},
		Spec: corev1.PodSpec{NodeName: nodeA, ServiceAccountName: "pullrecords-agent", Containers: []corev1.Container{{Name: "agent", Image: "x:1"}}}}
	if _, err := e.admin.CoreV1().Pods("pullrecords-system").Create(e.ctx, agentPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.admin.CoreV1().Pods("pullrecords-system").Delete(t.Context(), agentPod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	agentCfg, err := s.ServiceAccountConfig(e.ctx, "pullrecords-system", "pullrecords-agent", agentPod.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{nodeA, nodeB} {
		obj := fmt.Sprintf(`{"apiVersion":"pullrecords.io/v1alpha1","kind":"NodeImages","metadata":{"name":%q}}`, n)
		if _, err := e.dyn.Resource(api.NodeImagesResource).Patch(e.ctx, n, "application/apply-patch+yaml", []byte(obj),
			metav1.PatchOptions{FieldManager: "pullrecords-controller"}); err != nil {
			t.Fatal(err)
		}
	}
	agentDyn := dynamic.NewForConfigOrDie(agentCfg)
	report := func(node string) error {
		body := fmt.Sprintf(`{"apiVersion":"pullrecords.io/v1alpha1","kind":"NodeImages","metadata":{"name":%q},"status":{"agent":{"heartbeatTime":"2026-12-01T00:00:00Z","observedGeneration":1}}}`, node)
		_, err := agentDyn.Resource(api.NodeImagesResource).Patch(e.ctx, node, "application/apply-patch+yaml", []byte(body),
			metav1.PatchOptions{FieldManager: "pullrecords-agent", Force: ptr.To(true)}, "status")
		return err
	}
	if err := report(nodeA); err != nil {
		t.Errorf("the agent of %s could not report on its own node: %v", nodeA, err)
	}
	if err := report(nodeB); err == nil || !strings.Contains(err.Error(), "only the NodeImages of the node its token is bound to") {
		t.Errorf("the agent of %s wrote %s's object: %v", nodeA, nodeB, err)
	}
	if err := agentDyn.Resource(api.NodeImagesResource).Delete(e.ctx, nodeA, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the agent deleted its node's object: %v", err)
	}
	if _, err := kubernetes.NewForConfigOrDie(agentCfg).CoreV1().Secrets(e.ns).Get(e.ctx, "regcred", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the agent read a Secret: %v", err)
	}
}
