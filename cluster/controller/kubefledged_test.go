package controller_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/controller"
)

// A kube-fledged manifest applies unchanged; an object kube-fledged left in
// Processing (no batch of ours) is adopted with a refresh and converges.
func TestKubeFledgedManifestConverges(t *testing.T) {
	e := newEnv(t)
	backend := e.addNode("backend", true)
	other := e.addNode("frontend", true)
	if _, err := e.admin.CoreV1().Nodes().Patch(e.ctx, backend, "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"tier":"backend"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := apiservertest.Apply(e.ctx, apiservertest.Current().Admin, "testdata/kubefledged-imagecache.yaml"); err != nil {
		t.Fatal(err)
	}
	// kube-fledged's controller had started on it when it was stopped.
	ic := e.cache("imagecache1")
	ic.Status = api.ImageCacheStatus{Status: api.ActionStatusProcessing, Reason: api.ReasonImageCacheCreate,
		Message: "Image cache is being created", StartTime: &metav1.Time{Time: time.Now().Add(-time.Hour)}}
	u, err := api.ToUnstructured(ic)
	if err != nil {
		t.Fatal(err)
	}
	u.SetAPIVersion("kubefledged.io/v1alpha2")
	u.SetKind("ImageCache")
	if _, err := e.dyn.Resource(api.ImageCacheResource).Namespace(e.ns).UpdateStatus(e.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startController(controller.Config{})
	done := e.waitDone("imagecache1", api.ReasonImageCacheRefresh)
	if done.Status.Status != api.ActionStatusSucceeded {
		t.Fatalf("status %+v", done.Status)
	}
	// Every node gets the two unselected images; only the backend the third.
	// Nodes of other tests may exist, so count from this test's nodes.
	for _, img := range []string{"registry.test/public/nginx:1.23.1", "registry.test/public/cassandra:v7"} {
		for _, n := range []string{backend, other} {
			if !e.kubelet.Pulled(n, img) {
				t.Errorf("%s not pulled on %s", img, n)
			}
		}
	}
	if !e.kubelet.Pulled(backend, "registry.test/private/alpine:3.15") || e.kubelet.Pulled(other, "registry.test/private/alpine:3.15") {
		t.Error("the nodeSelector entry was not honoured")
	}
}

// Two replicas: one leads, the other takes over when it stops, and
// finishes the work from what the API holds.
func TestLeaderElectionHandsOver(t *testing.T) {
	e := newEnv(t)
	e.addNode("n", true)
	cfg := func() controller.Config {
		return controller.Config{Kube: kubernetes.NewForConfigOrDie(e.ctlCfg), Dynamic: dynamic.NewForConfigOrDie(e.ctlCfg),
			NoopImage: "registry.test/pullrecords:test", RefreshInterval: -1}
	}
	le := func(id string) controller.LeaderElection {
		return controller.LeaderElection{Namespace: "pullrecords-system", Name: "le-" + e.ns, Identity: id,
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond}
	}
	type replica struct {
		cancel context.CancelFunc
		done   chan error
	}
	replicas := map[string]replica{}
	for _, id := range []string{"one", "two"} {
		c, err := controller.New(cfg())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(e.ctx)
		r := replica{cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- c.RunWithLeaderElection(ctx, le(id)) }()
		replicas[id] = r
	}
	defer func() {
		for _, r := range replicas {
			r.cancel()
			<-r.done
		}
	}()
	holder := func() string {
		l, err := e.admin.CoordinationV1().Leases("pullrecords-system").Get(e.ctx, "le-"+e.ns, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	e.applyCache("c", "  cacheSpec:\n  - images: [a:1]\n    nodeSelector: {"+e.label+": \"yes\"}\n")
	e.waitDone("c", api.ReasonImageCacheCreate)
	leader := holder()
	if replicas[leader].cancel == nil {
		t.Fatalf("lease holder %q is not one of the replicas", leader)
	}
	replicas[leader].cancel()
	if err := <-replicas[leader].done; err != nil && err != context.Canceled {
		t.Errorf("leader stopped with %v", err)
	}
	delete(replicas, leader)
	e.applyCache("c", "  cacheSpec:\n  - images: [a:1, b:1]\n    nodeSelector: {"+e.label+": \"yes\"}\n")
	ic := e.waitDone("c", api.ReasonImageCacheUpdate)
	if ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts.Desired != 2 {
		t.Errorf("after hand-over: %+v", ic.Status)
	}
	if h := holder(); h == leader || h == "" {
		t.Errorf("lease holder %q after the leader %q stopped", h, leader)
	}
}
