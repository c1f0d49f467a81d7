package controller_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/controller"
)

func resultsOf(ni *api.NodeImages, cache, batch string) map[string]api.NodeResult {
	out := map[string]api.NodeResult{}
	if ni == nil {
		return out
	}
	for _, r := range ni.Status.Results {
		if r.Cache == cache && r.Batch == batch {
			out[r.Image] = r
		}
	}
	return out
}

func specImages(ni *api.NodeImages) []string {
	var out []string
	if ni != nil {
		for _, i := range ni.Spec.Images {
			out = append(out, i.Image)
		}
	}
	return out
}

// A private image and a public one, for the two selected nodes of three:
// pulled there by pods that carry the cache's secret, a result per (node,
// image) in each node's object, status Succeeded; the third node is
// untouched until its label changes, then it is worked on at once. An
// update pulls the added image and drops the removed one from the nodes'
// specs; a refresh runs again; deleting the cache clears the nodes' specs.
func TestCacheLifecycle(t *testing.T) {
	e := newEnv(t)
	n1, n2, n3 := e.addNode("n1", true), e.addNode("n2", true), e.addNode("n3", false)
	e.startController(controller.Config{})
	spec := func(images ...string) string {
		return fmt.Sprintf("  cacheSpec:\n  - images: [%s]\n    nodeSelector: {%s: \"yes\"}\n  imagePullSecrets:\n  - name: regcred\n",
			strings.Join(images, ", "), e.label)
	}
	e.applyCache("web", spec("registry.test/private/app:1", "registry.test/public/tool:2"))
	ic := e.waitDone("web", api.ReasonImageCacheCreate)
	if ic.Status.Status != api.ActionStatusSucceeded {
		t.Fatalf("status %+v, want Succeeded", ic.Status)
	}
	if c := ic.Status.Counts; c == nil || c.Desired != 4 || c.Succeeded != 4 {
		t.Errorf("counts %+v, want 4 of 4 pulled", c)
	}
	if ic.Status.StartTime == nil || ic.Status.CompletionTime == nil {
		t.Errorf("start/completion time missing: %+v", ic.Status)
	}
	for _, n := range []string{n1, n2} {
		for _, img := range []string{"registry.test/private/app:1", "registry.test/public/tool:2"} {
			if !e.kubelet.Pulled(n, img) {
				t.Errorf("%s was not pulled on %s", img, n)
			}
		}
		got := resultsOf(e.nodeImages(n), e.ns+"/web", ic.Status.Batch)
		if len(got) != 2 || got["registry.test/private/app:1"].Status != "succeeded" || got["registry.test/private/app:1"].Work != "create" {
			t.Errorf("results on %s: %+v", n, got)
		}
	}
	if e.kubelet.Pulled(n3, "registry.test/private/app:1") || len(specImages(e.nodeImages(n3))) != 0 {
		t.Errorf("node 3 is not selected but was touched: %v", specImages(e.nodeImages(n3)))
	}
	e.waitFor("pre-pull pods deleted once their results are written", func() bool { return len(e.managedPods()) == 0 })

	// A label change brings node 3 in without waiting for a refresh.
	e.setLabel(n3, true)
	e.waitFor("node 3 pulled", func() bool {
		ic := e.cache("web")
		return ic.Status.Status == api.ActionStatusSucceeded && ic.Status.Counts != nil && ic.Status.Counts.Desired == 6 && ic.Status.Counts.Succeeded == 6
	})
	if !e.kubelet.Pulled(n3, "registry.test/private/app:1") {
		t.Error("node 3 joined but was not pulled")
	}

	// Update: one image replaced by another.
	e.applyCache("web", spec("registry.test/private/app:1", "registry.test/public/other:3"))
	ic = e.waitDone("web", api.ReasonImageCacheUpdate)
	if ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts.Desired != 6 {
		t.Errorf("update: %+v %+v", ic.Status, ic.Status.Counts)
	}
	for _, n := range []string{n1, n2, n3} {
		if !e.kubelet.Pulled(n, "registry.test/public/other:3") {
			t.Errorf("added image not pulled on %s", n)
		}
		e.waitFor("removed image dropped from "+n, func() bool {
			imgs := strings.Join(specImages(e.nodeImages(n)), " ")
			return !strings.Contains(imgs, "tool:2") && strings.Contains(imgs, "other:3")
		})
	}

	// Refresh on demand; the annotation is removed when it is done.
	e.annotate("web", api.RefreshAnnotation)
	e.waitFor("refresh done and annotation removed", func() bool {
		ic := e.cache("web")
		_, still := ic.Annotations[api.RefreshAnnotation]
		return !still && ic.Status.Reason == api.ReasonImageCacheRefresh && ic.Status.Status == api.ActionStatusSucceeded
	})

	// Delete: the nodes' specs forget the cache.
	if err := e.dyn.Resource(api.ImageCacheResource).Namespace(e.ns).Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{n1, n2, n3} {
		e.waitFor("spec of "+n+" emptied", func() bool { return len(specImages(e.nodeImages(n))) == 0 })
	}
	events, err := e.admin.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, ev := range events.Items {
		reasons = append(reasons, ev.Reason)
	}
	if !strings.Contains(strings.Join(reasons, " "), "Succeeded") {
		t.Errorf("no Succeeded event among %v", reasons)
	}
}

// A wrong password: every node's pull fails with the registry's 401 and the
// cache is Failed, the failure listed per node under the image.
func TestWrongPasswordFailsPerNode(t *testing.T) {
	e := newEnv(t)
	n1, n2 := e.addNode("n1", true), e.addNode("n2", true)
	e.mu.Lock()
	e.password["badcred"] = "wrong"
	e.mu.Unlock()
	e.startController(controller.Config{})
	e.applyCache("priv", fmt.Sprintf("  cacheSpec:\n  - images: [registry.test/private/app:1, registry.test/public/ok:1]\n    nodeSelector: {%s: \"yes\"}\n  imagePullSecrets:\n  - name: badcred\n", e.label))
	ic := e.waitDone("priv", api.ReasonImageCacheCreate)
	if ic.Status.Status != api.ActionStatusFailed {
		t.Fatalf("status %q, want Failed", ic.Status.Status)
	}
	fails := ic.Status.Failures["registry.test/private/app:1"]
	if len(fails) != 2 {
		t.Fatalf("failures %+v, want one per node", ic.Status.Failures)
	}
	for i, want := range []string{n1, n2} {
		if fails[i].Node != want || fails[i].Reason != "ErrImagePull" || !strings.Contains(fails[i].Message, "401") {
			t.Errorf("failure %d: %+v", i, fails[i])
		}
	}
	if c := ic.Status.Counts; c.Failed != 2 || c.Succeeded != 2 {
		t.Errorf("counts %+v", c)
	}
	if _, listed := ic.Status.Failures["registry.test/public/ok:1"]; listed {
		t.Error("a successful image is listed under failures")
	}
}

// The controller is stopped while pulls are in flight and the nodes answer
// while it is down; a new controller finds every result from what the API
// holds, creates no second pod for any (node, image) and converges.
func TestRestartMidBatchConverges(t *testing.T) {
	e := newEnv(t)
	var nodes []string
	for i := 0; i < 3; i++ {
		n := e.addNode(fmt.Sprintf("n%d", i), true)
		nodes = append(nodes, n)
		e.kubelet.Pause(n)
	}
	e.startController(controller.Config{MaxInFlightPerNode: 1, MaxImagesPerPod: 2})
	e.applyCache("big", fmt.Sprintf("  cacheSpec:\n  - images: [a:1, b:1, c:1, d:1]\n    nodeSelector: {%s: \"yes\"}\n", e.label))
	e.waitFor("pods in flight", func() bool { return len(e.managedPods()) == 3 })
	// One pod of two images per node: six (node, image) pairs in flight.
	e.waitFor("the status shows 6 in flight", func() bool {
		ic := e.cache("big")
		return ic.Status.Status == api.ActionStatusProcessing && ic.Status.Counts != nil && ic.Status.Counts.InFlight == 6
	})
	e.stopController()
	for _, n := range nodes {
		e.kubelet.Resume(n)
	}
	e.waitFor("nodes answered while no controller runs", func() bool { return e.kubelet.Written.Load() == 3 })
	e.startController(controller.Config{MaxInFlightPerNode: 1, MaxImagesPerPod: 2})
	ic := e.waitDone("big", api.ReasonImageCacheCreate)
	if ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts.Succeeded != 12 {
		t.Fatalf("after restart: %+v %+v", ic.Status, ic.Status.Counts)
	}
	if got := e.kubelet.Written.Load(); got != 6 {
		t.Errorf("%d pods answered for 12 (node, image) pairs in pods of 2, want 6: a pull was made twice or lost", got)
	}
	for _, n := range nodes {
		if got := resultsOf(e.nodeImages(n), e.ns+"/big", ic.Status.Batch); len(got) != 4 {
			t.Errorf("%s has %d results, want 4", n, len(got))
		}
	}
}

// A node whose status lists the image (no agent) and a node whose agent
// reports it present get alreadypulled and no pod; the comparison is
// exact (app:1.2 is not app:1.21).
func TestAlreadyPulledNeedsNoPod(t *testing.T) {
	e := newEnv(t)
	listed := e.addNode("listed", true, "registry.test/public/app:1.21", "registry.test/public/app:1.2")
	prefix := e.addNode("prefix", true, "registry.test/public/app:1.21")
	withAgent := e.addNode("agent", true)
	// An agent runs on withAgent: its heartbeat is there before the cache,
	// so the controller waits for its report instead of pulling.
	heartbeat := func(generation int64, images string) {
		t.Helper()
		report := fmt.Sprintf(`{"apiVersion":"pullrecords.io/v1alpha1","kind":"NodeImages","metadata":{"name":%q},"status":{"agent":{"heartbeatTime":%q,"observedGeneration":%d},"images":[%s]}}`,
			withAgent, time.Now().UTC().Format(time.RFC3339), generation, images)
		force := true
		if _, err := e.dyn.Resource(api.NodeImagesResource).Patch(e.ctx, withAgent, "application/apply-patch+yaml", []byte(report),
			metav1.PatchOptions{FieldManager: "pullrecords-agent", Force: &force}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	obj := fmt.Sprintf(`{"apiVersion":"pullrecords.io/v1alpha1","kind":"NodeImages","metadata":{"name":%q}}`, withAgent)
	force := true
	if _, err := e.dyn.Resource(api.NodeImagesResource).Patch(e.ctx, withAgent, "application/apply-patch+yaml", []byte(obj),
		metav1.PatchOptions{FieldManager: "test-setup", Force: &force}); err != nil {
		t.Fatal(err)
	}
	heartbeat(1, "")
	e.startController(controller.Config{})
	e.applyCache("pre", fmt.Sprintf("  cacheSpec:\n  - images: [registry.test/public/app:1.2]\n    nodeSelector: {%s: \"yes\"}\n", e.label))
	e.waitFor("the agent's node has its spec", func() bool { return len(specImages(e.nodeImages(withAgent))) == 1 })
	heartbeat(e.nodeImages(withAgent).Generation, `{"image":"registry.test/public/app:1.2","present":true,"imageRef":"sha256:abc"}`)
	ic := e.waitDone("pre", api.ReasonImageCacheCreate)
	if c := ic.Status.Counts; c.AlreadyPulled != 2 || c.Succeeded != 1 {
		t.Errorf("counts %+v: want the listed and agent nodes alreadypulled, the prefix-only node pulled", c)
	}
	if e.kubelet.Pulled(listed, "registry.test/public/app:1.2") || e.kubelet.Pulled(withAgent, "registry.test/public/app:1.2") {
		t.Error("a pod was made for an image already present")
	}
	if !e.kubelet.Pulled(prefix, "registry.test/public/app:1.2") {
		t.Error("app:1.21 in the node status was taken for app:1.2")
	}
	if r := resultsOf(e.nodeImages(withAgent), e.ns+"/pre", ic.Status.Batch)["registry.test/public/app:1.2"]; r.Status != "alreadypulled" {
		t.Errorf("agent node result %+v", r)
	}
}

// Two caches with one name in two namespaces keep their own results.
func TestSameNameInTwoNamespaces(t *testing.T) {
	e := newEnv(t)
	n := e.addNode("n", true)
	other := e.ns + "-b"
	if _, err := e.admin.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startController(controller.Config{})
	e.mu.Lock()
	e.password["badcred"] = "wrong"
	e.mu.Unlock()
	e.applyCache("same", fmt.Sprintf("  cacheSpec:\n  - images: [registry.test/public/a:1]\n    nodeSelector: {%s: \"yes\"}\n", e.label))
	first := e.ns
	e.ns = other
	e.applyCache("same", fmt.Sprintf("  cacheSpec:\n  - images: [registry.test/private/a:1]\n    nodeSelector: {%s: \"yes\"}\n  imagePullSecrets: [{name: badcred}]\n", e.label))
	icB := e.waitDone("same", api.ReasonImageCacheCreate)
	e.ns = first
	icA := e.waitDone("same", api.ReasonImageCacheCreate)
	if icA.Status.Status != api.ActionStatusSucceeded || icB.Status.Status != api.ActionStatusFailed {
		t.Errorf("statuses %q and %q, want Succeeded and Failed", icA.Status.Status, icB.Status.Status)
	}
	ni := e.nodeImages(n)
	if a, b := resultsOf(ni, first+"/same", icA.Status.Batch), resultsOf(ni, other+"/same", icB.Status.Batch); len(a) != 1 || len(b) != 1 ||
		a["registry.test/public/a:1"].Status != "succeeded" || b["registry.test/private/a:1"].Status != "failed" {
		t.Errorf("results mixed up: %+v", ni.Status.Results)
	}
	_ = e.admin.CoreV1().Pods(other).DeleteCollection(e.ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
	_ = e.dyn.Resource(api.ImageCacheResource).Namespace(other).Delete(e.ctx, "same", metav1.DeleteOptions{})
}

// A pod a node never answers fails at the deadline with what it last
// said; every request still gets a result.
func TestHungNodeFailsAtDeadline(t *testing.T) {
	e := newEnv(t)
	hung := e.addNode("hung", true)
	e.addNode("fine", true)
	e.kubelet.Pause(hung)
	e.startController(controller.Config{PullDeadline: 3 * time.Second})
	e.applyCache("c", fmt.Sprintf("  cacheSpec:\n  - images: [x:1]\n    nodeSelector: {%s: \"yes\"}\n", e.label))
	ic := e.waitDone("c", api.ReasonImageCacheCreate)
	f := ic.Status.Failures["x:1"]
	if ic.Status.Status != api.ActionStatusFailed || len(f) != 1 || f[0].Node != hung || f[0].Reason != "Pending" {
		t.Errorf("status %q failures %+v", ic.Status.Status, ic.Status.Failures)
	}
}

// kube-fledged: the controller refuses to run beside its controller, and
// removes the Jobs a stopped one left behind.
func TestKubeFledgedTakeover(t *testing.T) {
	e := newEnv(t)
	// This test's namespace plays kube-fledged's.
	e.kubeFledgedPod(e.ns, "kubefledged-controller", "kubefledged-controller-0")
	kf := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kubefledged-controller-0"}}
	e.startController(controller.Config{KubeFledgedNamespace: e.ns})
	if err := <-e.done; !errors.Is(err, controller.ErrKubeFledgedRunning) || !strings.Contains(err.Error(), kf.Name) {
		t.Fatalf("Run beside kube-fledged: %v, want ErrKubeFledgedRunning naming its pod", err)
	}
	e.stop = nil
	if err := e.admin.CoreV1().Pods(e.ns).Delete(e.ctx, kf.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "web-abcde", Namespace: e.ns,
		Labels: map[string]string{"app": "kubefledged", "kubefledged": "kubefledged-image-manager"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "x:1"}}}}}}
	if _, err := e.admin.BatchV1().Jobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startController(controller.Config{KubeFledgedNamespace: e.ns})
	e.waitFor("kube-fledged's Job deleted", func() bool {
		_, err := e.admin.BatchV1().Jobs(e.ns).Get(e.ctx, job.Name, metav1.GetOptions{})
		return err != nil
	})
}

// A cache with a pull secret gets a pod even where the image is present:
// presence says nothing about its credential, and only the kubelet's check
// (and record) makes the image usable by the cache's pods.
func TestSecretCacheIgnoresPresence(t *testing.T) {
	e := newEnv(t)
	n := e.addNode("n", true, "registry.test/private/app:1")
	e.startController(controller.Config{})
	e.applyCache("sec", fmt.Sprintf("  cacheSpec:\n  - images: [registry.test/private/app:1]\n    nodeSelector: {%s: \"yes\"}\n  imagePullSecrets: [{name: regcred}]\n", e.label))
	ic := e.waitDone("sec", api.ReasonImageCacheCreate)
	if ic.Status.Counts.Succeeded != 1 || ic.Status.Counts.AlreadyPulled != 0 || !e.kubelet.Pulled(n, "registry.test/private/app:1") {
		t.Errorf("counts %+v: a cache with a secret must go through the kubelet", ic.Status.Counts)
	}
}

// A node whose agent reports its image filesystem above the threshold gets
// no pull: the request fails with the reason, and other nodes are pulled.
func TestFullImageFsSkipsPulls(t *testing.T) {
	e := newEnv(t)
	full, fine := e.addNode("full", true), e.addNode("fine", true)
	obj := fmt.Sprintf(`{"apiVersion":"pullrecords.io/v1alpha1","kind":"NodeImages","metadata":{"name":%q}}`, full)
	force := true
	if _, err := e.dyn.Resource(api.NodeImagesResource).Patch(e.ctx, full, "application/apply-patch+yaml", []byte(obj),
		metav1.PatchOptions{FieldManager: "test-setup", Force: &force}); err != nil {
		t.Fatal(err)
	}
	report := func(generation int64, images string) {
		t.Helper()
		body := fmt.Sprintf(`{"apiVersion":"pullrecords.io/v1alpha1","kind":"NodeImages","metadata":{"name":%q},"status":{"agent":{"heartbeatTime":%q,"observedGeneration":%d,"imageFsUsedBytes":90,"imageFsTotalBytes":100},"images":[%s]}}`,
			full, time.Now().UTC().Format(time.RFC3339), generation, images)
		if _, err := e.dyn.Resource(api.NodeImagesResource).Patch(e.ctx, full, "application/apply-patch+yaml", []byte(body),
			metav1.PatchOptions{FieldManager: "pullrecords-agent", Force: &force}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	report(1, "")
	e.startController(controller.Config{})
	e.applyCache("c", fmt.Sprintf("  cacheSpec:\n  - images: [x:1]\n    nodeSelector: {%s: \"yes\"}\n", e.label))
	e.waitFor("the full node's spec", func() bool { return len(specImages(e.nodeImages(full))) == 1 })
	report(e.nodeImages(full).Generation, `{"image":"x:1","present":false}`)
	ic := e.waitDone("c", api.ReasonImageCacheCreate)
	f := ic.Status.Failures["x:1"]
	if len(f) != 1 || f[0].Node != full || f[0].Reason != "ImageFsAboveThreshold" || e.kubelet.Pulled(full, "x:1") || !e.kubelet.Pulled(fine, "x:1") {
		t.Errorf("failures %+v", ic.Status.Failures)
	}
}
