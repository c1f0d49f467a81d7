package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/controller"
	"github.com/pullrecords/pullrecords/cluster/internal/metricstest"
)

// metricValue is the value of the series name{labels} in reg (counter or
// gauge), and whether it exists.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	v, ok, err := metricstest.Value(reg, name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return v, ok
}

func (e *env) newOpsController(m *controller.Metrics) *controller.Controller {
	e.t.Helper()
	c, err := controller.New(controller.Config{
		Kube: kubernetes.NewForConfigOrDie(controller.Protobuf(e.ctlCfg)), Dynamic: dynamic.NewForConfigOrDie(e.ctlCfg),
		NoopImage: "registry.test/pullrecords:test", RefreshInterval: -1, PullDeadline: time.Minute, Metrics: m,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// The controller's metrics count its work and Healthy follows Run: not
// healthy before Run or after it returns, healthy once the informers have
// synced.
func TestMetricsAndHealthUnderRun(t *testing.T) {
	e := newEnv(t)
	n := e.addNode("n", true)
	reg := prometheus.NewRegistry()
	m := controller.NewMetrics()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	c := e.newOpsController(m)
	if err := c.Healthy(); err == nil {
		t.Error("Healthy() = nil before Run")
	}
	if v, ok := metricValue(t, reg, "pullrecords_controller_results_total", map[string]string{"status": "succeeded"}); !ok || v != 0 {
		t.Errorf("results_total{succeeded} before any work = %v (present %v), want a 0 series", v, ok)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	e.waitFor("healthy once synced", func() bool { return c.Healthy() == nil })
	if v, _ := metricValue(t, reg, "pullrecords_controller_is_leader", nil); v != 1 {
		t.Errorf("is_leader = %v while Run runs, want 1", v)
	}

	// A public image and a private one with a secret the registry refuses:
	// one pod of two images, one succeeded result, one failed.
	e.applyCache("ops", "  cacheSpec:\n  - images: [registry.test/public/a:1, registry.test/private/b:1]\n    nodeSelector: {"+
		e.label+": \"yes\"}\n  imagePullSecrets:\n  - name: wrong\n")
	ic := e.waitDone("ops", api.ReasonImageCacheCreate)
	if got := resultsOf(e.nodeImages(n), e.ns+"/ops", ic.Status.Batch); len(got) != 2 {
		t.Fatalf("results on %s: %+v", n, got)
	}
	for _, want := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"pullrecords_controller_prepull_pods_created_total", nil, 1},
		{"pullrecords_controller_results_total", map[string]string{"status": "succeeded"}, 1},
		{"pullrecords_controller_results_total", map[string]string{"status": "failed"}, 1},
		{"pullrecords_controller_syncs_total", map[string]string{"queue": "imagecaches"}, 1},
		{"pullrecords_controller_syncs_total", map[string]string{"queue": "nodeimages"}, 1},
	} {
		if v, _ := metricValue(t, reg, want.name, want.labels); v < want.min {
			t.Errorf("%s%v = %v, want at least %v", want.name, want.labels, v, want.min)
		}
	}
	// One decision each: decided again while pending, a result is not
	// counted twice.
	if v, _ := metricValue(t, reg, "pullrecords_controller_results_total", map[string]string{"status": "succeeded"}); v != 1 {
		t.Errorf("results_total{succeeded} = %v, want 1 (one image succeeded on one node)", v)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := c.Healthy(); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("Healthy() after Run returned = %v, want not running", err)
	}
	if v, _ := metricValue(t, reg, "pullrecords_controller_is_leader", nil); v != 0 {
		t.Errorf("is_leader = %v after Run returned, want 0", v)
	}
}

// Two replicas under leader election: both healthy (the leader synced, the
// standby knowing who leads), exactly one is_leader; after
// RunWithLeaderElection returns, neither is healthy.
func TestHealthUnderLeaderElection(t *testing.T) {
	e := newEnv(t)
	e.addNode("n", true)
	type replica struct {
		c      *controller.Controller
		reg    *prometheus.Registry
		cancel context.CancelFunc
		done   chan error
	}
	var replicas []replica
	for _, id := range []string{"one", "two"} {
		reg := prometheus.NewRegistry()
		m := controller.NewMetrics()
		if err := m.Register(reg); err != nil {
			t.Fatal(err)
		}
		c := e.newOpsController(m)
		ctx, cancel := context.WithCancel(e.ctx)
		r := replica{c: c, reg: reg, cancel: cancel, done: make(chan error, 1)}
		go func() {
			r.done <- c.RunWithLeaderElection(ctx, controller.LeaderElection{Namespace: "pullrecords-system", Name: "ops-" + e.ns, Identity: id,
				LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond})
		}()
		replicas = append(replicas, r)
	}
	e.waitFor("both replicas healthy", func() bool { return replicas[0].c.Healthy() == nil && replicas[1].c.Healthy() == nil })
	leaders := 0.0
	for _, r := range replicas {
		v, _ := metricValue(t, r.reg, "pullrecords_controller_is_leader", nil)
		leaders += v
	}
	if leaders != 1 {
		t.Errorf("is_leader summed over the replicas = %v, want 1", leaders)
	}
	l, err := e.admin.CoordinationV1().Leases("pullrecords-system").Get(e.ctx, "ops-"+e.ns, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		t.Fatalf("lease: %v %+v", err, l)
	}
	for _, r := range replicas {
		r.cancel()
		if err := <-r.done; err != nil && err != context.Canceled {
			t.Errorf("RunWithLeaderElection: %v", err)
		}
		if err := r.c.Healthy(); err == nil {
			t.Error("Healthy() = nil after RunWithLeaderElection returned")
		}
	}
}
