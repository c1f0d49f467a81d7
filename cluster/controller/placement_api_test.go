package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/controller"
)

// podLog records every pre-pull pod ever created in a namespace, as first
// seen, so that a test can say no pod was ever created for a node (the
// controller deletes its pods at the end of an action).
type podLog struct {
	mu   sync.Mutex
	pods []corev1.Pod
}

func (e *env) logPods(ns string) *podLog {
	e.t.Helper()
	l := &podLog{}
	ctx, cancel := context.WithCancel(e.ctx)
	f := informers.NewSharedInformerFactoryWithOptions(e.admin, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "app.kubernetes.io/managed-by=pullrecords-controller" }))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			l.mu.Lock()
			l.pods = append(l.pods, *p.DeepCopy())
			l.mu.Unlock()
		}
	}}); err != nil {
		e.t.Fatal(err)
	}
	f.Start(ctx.Done())
	e.t.Cleanup(func() { cancel(); f.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		e.t.Fatal("pod log informer did not sync")
	}
	return l
}

// on returns the pods ever created for node.
func (l *podLog) on(node string) []corev1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []corev1.Pod
	for _, p := range l.pods {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out
}

// setReady writes the node's Ready condition, as its kubelet (True) or the
// node lifecycle controller (Unknown: the kubelet stopped posting) would.
func (e *env) setReady(node string, status corev1.ConditionStatus) {
	e.t.Helper()
	n, err := e.admin.CoreV1().Nodes().Get(e.ctx, node, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "Test" + string(status)}}
	if _, err := e.admin.CoreV1().Nodes().UpdateStatus(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// editNode changes the node's object as an admin would (kubectl cordon,
// taint, label).
func (e *env) editNode(node string, edit func(*corev1.Node)) {
	e.t.Helper()
	n, err := e.admin.CoreV1().Nodes().Get(e.ctx, node, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	edit(n)
	if _, err := e.admin.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

var gpuTaint = corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute}

// defaultTolerationSeconds drops the tolerations the API server's
// DefaultTolerationSeconds admission adds to every pod that has none of its
// own for them (not-ready and unreachable, NoExecute, 300 s): not the
// controller's.
func defaultTolerationSeconds(ts []corev1.Toleration) []corev1.Toleration {
	return slices.DeleteFunc(slices.Clone(ts), func(t corev1.Toleration) bool {
		return (t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable) &&
			t.Effect == corev1.TaintEffectNoExecute && t.TolerationSeconds != nil && *t.TolerationSeconds == 300
	})
}

// A tenant's cache whose selector takes in a control-plane node, a
// cordoned node, a NoExecute-tainted node and a node whose kubelet is gone
// gets no pod on any of them under the default placement: its images,
// pulled with its secret, stay off them, and the status says which nodes
// were skipped and why. The old controller put a pod, tolerating every
// taint, on each.
func TestPlacementTenantCacheStaysOffNodesItMayNotUse(t *testing.T) {
	e := newEnv(t)
	ok := e.addNode("ok", true)
	cp := e.addNode("cp", true)
	e.editNode(cp, func(n *corev1.Node) { n.Labels["node-role.kubernetes.io/control-plane"] = "" })
	cordoned := e.addNode("cordoned", true)
	e.editNode(cordoned, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	tainted := e.addNode("tainted", true)
	e.editNode(tainted, func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, gpuTaint) })
	dead := e.addNode("dead", true)
	e.setReady(dead, corev1.ConditionUnknown)
	a := e.tenant("a")
	pods := e.logPods(a.ns)
	e.startController(controller.Config{})

	const img = "registry.test/private/app:1"
	a.applyCache("c", true, img)
	ic := a.waitDone("c", api.ReasonImageCacheCreate)

	for _, n := range []string{cp, cordoned, tainted, dead} {
		if got := pods.on(n); len(got) > 0 {
			t.Errorf("a pre-pull pod was created on %s (%s), which placement forbids", n, got[0].Name)
		}
	}
	if len(pods.on(ok)) != 1 || !e.kubelet.Pulled(ok, img) {
		t.Errorf("the eligible node %s: %d pod(s), pulled %v; want one pod that pulled", ok, len(pods.on(ok)), e.kubelet.Pulled(ok, img))
	}
	st := ic.Status
	if c := st.Counts; c == nil || c.Desired != 5 || c.Succeeded != 1 || c.Skipped != 4 || c.Failed != 0 || c.InFlight != 0 {
		t.Errorf("counts %+v, want desired 5, succeeded 1, skipped 4", c)
	}
	for _, want := range []string{"4 node(s) skipped", cp + " control-plane", cordoned + " cordoned",
		tainted + " taint dedicated=gpu:NoExecute not tolerated", dead + " not Ready"} {
		if !strings.Contains(st.Message, want) {
			t.Errorf("status message %q does not say %q", st.Message, want)
		}
	}
	if st.Status == api.ActionStatusProcessing || len(st.Failures) > 0 {
		t.Errorf("status %s with failures %v: a skipped node is neither in progress nor a pull failure", st.Status, st.Failures)
	}
	if r := a.results(cp, ic); len(r) > 0 {
		t.Errorf("a result was written for the skipped node %s: %+v", cp, r)
	}
}

// With the admin's toleration for the taint, the pod goes to the tainted
// node carrying that toleration and no other of the controller's; the
// other nodes' rules still hold.
func TestPlacementAdminTolerationOpensOnlyItsTaint(t *testing.T) {
	e := newEnv(t)
	tainted := e.addNode("tainted", true)
	e.editNode(tainted, func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, gpuTaint) })
	other := e.addNode("other", true)
	e.editNode(other, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute})
	})
	a := e.tenant("a")
	pods := e.logPods(a.ns)
	tol, err := controller.ParseToleration("dedicated=gpu:NoExecute")
	if err != nil {
		t.Fatal(err)
	}
	e.startController(controller.Config{Placement: controller.Placement{Tolerations: []corev1.Toleration{tol}}})

	const img = "registry.test/private/app:1"
	a.applyCache("c", true, img)
	ic := a.waitDone("c", api.ReasonImageCacheCreate)

	got := pods.on(tainted)
	if len(got) != 1 {
		t.Fatalf("%d pod(s) on the tolerated node, want 1", len(got))
	}
	if diff := cmp.Diff([]corev1.Toleration{tol}, defaultTolerationSeconds(got[0].Spec.Tolerations)); diff != "" {
		t.Errorf("the pod's tolerations are not exactly the admin's (-want +got):\n%s", diff)
	}
	if len(pods.on(other)) > 0 {
		t.Errorf("a pod went to %s, whose taint dedicated=db the admin did not tolerate", other)
	}
	if c := ic.Status.Counts; ic.Status.Status != api.ActionStatusSucceeded || c.Succeeded != 1 || c.Skipped != 1 {
		t.Errorf("status %s %q counts %+v, want Succeeded, 1 pulled, 1 skipped", ic.Status.Status, ic.Status.Message, c)
	}
}

// A dead node (Node object left, kubelet gone: Ready Unknown) does not
// hold the action: with 6 images and a pull deadline of an hour, the
// action finishes with no pod ever created there (the old controller
// created two pods per deadline, holding it for three hours). Once the node
// is Ready again the cache works on it without a refresh.
func TestPlacementDeadNodeDoesNotHoldTheAction(t *testing.T) {
	e := newEnv(t)
	live := e.addNode("live", true)
	dead := e.addNode("dead", true)
	e.setReady(dead, corev1.ConditionUnknown)
	e.kubelet.Pause(dead) // its kubelet is gone: nothing would answer
	a := e.tenant("a")
	pods := e.logPods(a.ns)
	e.startController(controller.Config{PullDeadline: time.Hour, MaxInFlightPerNode: 2})

	var images []string
	for i := range 6 {
		images = append(images, fmt.Sprintf("registry.test/private/img%d:1", i))
	}
	a.applyCache("c", true, images...)
	ic := a.waitDone("c", api.ReasonImageCacheCreate)
	if got := pods.on(dead); len(got) > 0 {
		t.Fatalf("%d pre-pull pod(s) were created on the dead node", len(got))
	}
	if c := ic.Status.Counts; c.Succeeded != 6 || c.Skipped != 6 || c.Desired != 12 {
		t.Errorf("counts %+v, want 6 pulled on %s and 6 skipped on %s", c, live, dead)
	}
	if !strings.Contains(ic.Status.Message, "1 node(s) skipped by the controller's placement rules: "+dead+" not Ready") {
		t.Errorf("status message %q does not name the dead node", ic.Status.Message)
	}

	// The kubelet comes back: the cache pulls there without a refresh
	// (RefreshInterval is off). The Ready change requeues it (nodeMatters,
	// held by TestNodeMattersForPlacementChanges); here the deletion of the
	// live node's pods may requeue it too, so this part holds the outcome,
	// not which event caused it.
	e.kubelet.Resume(dead)
	e.setReady(dead, corev1.ConditionTrue)
	e.waitFor("the cache pulls on the node once it is Ready", func() bool {
		c := a.cache("c").Status
		return c.Status == api.ActionStatusSucceeded && c.Counts != nil && c.Counts.Succeeded == 12 && c.Counts.Skipped == 0
	})
	for _, img := range images {
		if !e.kubelet.Pulled(dead, img) {
			t.Errorf("%s not pulled on %s once it was Ready", img, dead)
		}
	}
}

// An agent that stops reporting while an action waits on its node is
// named, with its last heartbeat, in the cache's Processing message, once
// the heartbeat is older than AgentTimeout: its going silent sends no
// event, and the pull hangs for an hour, so the controller must look again
// by itself.
func TestPlacementAwayAgentIsNamedWhileProcessing(t *testing.T) {
	e := newEnv(t)
	n := e.addNode("n", true)
	rt := e.startRuntime(n)
	e.kubelet.Pause(n) // the pull hangs, so the action stays Processing
	a := e.tenant("a")
	pods := e.logPods(a.ns)
	e.startController(controller.Config{AgentTimeout: 2 * time.Second, PullDeadline: time.Hour})
	a.applyCache("c", true, "registry.test/private/app:1")
	e.waitFor("the pre-pull pod exists", func() bool { return len(pods.on(n)) == 1 })
	if st := a.cache("c").Status; strings.Contains(st.Message, "is away") {
		t.Fatalf("the agent is called away while it reports: %q", st.Message)
	}
	rt.stopAgent()
	e.waitFor("the Processing message names the node whose agent is away", func() bool {
		st := a.cache("c").Status
		return st.Status == api.ActionStatusProcessing &&
			strings.Contains(st.Message, "The pullrecords agent of 1 node(s) is away (no heartbeat within 2s): "+n+" since ")
	})
}

// A node pre-pull pods may not go to gives no presence answer either: a
// cache without pull secrets whose image a cordoned node lists in its
// status gets "skipped" there, never "alreadypulled" (which would report a
// pull the placement forbids as done, and tell the tenant what a node it
// may not use holds). An eligible node listing it answers alreadypulled.
func TestPlacementSkippedNodeGivesNoPresenceAnswer(t *testing.T) {
	e := newEnv(t)
	const img = "registry.test/public/app:1"
	cordoned := e.addNode("cordoned", true, img)
	e.editNode(cordoned, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	ok := e.addNode("ok", true, img)
	a := e.tenant("a")
	pods := e.logPods(a.ns)
	e.startController(controller.Config{})
	a.applyCache("c", false, img)
	ic := a.waitDone("c", api.ReasonImageCacheCreate)
	if c := ic.Status.Counts; c.AlreadyPulled != 1 || c.Skipped != 1 || c.Succeeded != 0 {
		t.Errorf("counts %+v, want 1 already present (on %s) and 1 skipped (on %s)", c, ok, cordoned)
	}
	if r, found := a.results(cordoned, ic)[img]; found {
		t.Errorf("the cordoned node has a result: %+v", r)
	}
	if len(pods.on(cordoned))+len(pods.on(ok)) > 0 {
		t.Errorf("pods were created: %d on %s, %d on %s", len(pods.on(cordoned)), cordoned, len(pods.on(ok)), ok)
	}
}
