package controller_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/controller"
)

// kubeFledgedPod creates a pod that looks like kube-fledged's controller
// (its manifests' labels), running under service account sa in namespace
// ns, and marks it Running.
func (e *env) kubeFledgedPod(ns, sa, name string) {
	e.t.Helper()
	e.kubeFledgedPodLabelled(ns, sa, name, map[string]string{"app": "kubefledged", "kubefledged": "kubefledged-controller"})
}

// kubeFledgedPodLabelled is kubeFledgedPod with the given labels.
func (e *env) kubeFledgedPodLabelled(ns, sa, name string, labels map[string]string) {
	e.t.Helper()
	if _, err := apiservertest.Current().ServiceAccountConfig(e.ctx, ns, sa, ""); err != nil { // namespace and account
		e.t.Fatal(err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: "elsewhere", ServiceAccountName: sa,
			Containers: []corev1.Container{{Name: "c", Image: "senthilrch/kubefledged-controller:v0.10.0"}}}}
	p, err := e.admin.CoreV1().Pods(ns).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	if _, err := e.admin.CoreV1().Pods(ns).UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = e.admin.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
}

// Only kube-fledged's own controller stops ours: a pod with its labels in
// a tenant's namespace, or in kube-fledged's namespace under another
// service account, changes nothing.
func TestKubeFledgedLookAlikesChangeNothing(t *testing.T) {
	e := newEnv(t)
	e.addNode("n", true)
	kfNS := "kf-" + e.ns
	e.kubeFledgedPod(e.ns, "kubefledged-controller", "tenant-lookalike")
	e.kubeFledgedPod(kfNS, "someone-else", "other-account")
	e.startController(controller.Config{KubeFledgedNamespace: kfNS})
	e.applyCache("c", fmt.Sprintf("  cacheSpec:\n  - images: [x:1]\n    nodeSelector: {%s: \"yes\"}\n", e.label))
	if ic := e.waitDone("c", api.ReasonImageCacheCreate); ic.Status.Status != api.ActionStatusSucceeded {
		t.Errorf("status %+v", ic.Status)
	}
	e.stopController()
	// kube-fledged's own controller does stop it.
	e.kubeFledgedPod(kfNS, "kubefledged-controller", "kubefledged-controller-0")
	e.startController(controller.Config{KubeFledgedNamespace: kfNS})
	if err := e.runError(); !errors.Is(err, controller.ErrKubeFledgedRunning) {
		t.Errorf("Run beside kube-fledged's controller: %v, want ErrKubeFledgedRunning", err)
	}
}

// runError waits for the running controller's Run to return and gives its
// error; a Run still going after a minute (it should have refused to
// start) is stopped and reported as nil.
func (e *env) runError() error {
	e.t.Helper()
	defer func() { e.stop = nil }()
	select {
	case err := <-e.done:
		return err
	case <-time.After(time.Minute):
		e.stop()
		<-e.done
		return nil
	}
}

// kube-fledged installed with its Helm chart, as its README says (`helm
// install kube-fledged kubefledged-charts/kube-fledged`), labels its
// controller's pods app.kubernetes.io/name=kube-fledged and runs them under
// kube-fledged-controller: that stops ours too, with the default flags.
func TestKubeFledgedHelmInstallStopsTheController(t *testing.T) {
	e := newEnv(t)
	kfNS := "kf-" + e.ns
	e.kubeFledgedPodLabelled(kfNS, "kube-fledged-controller", "kube-fledged-controller-7d9f",
		map[string]string{"app.kubernetes.io/name": "kube-fledged", "app.kubernetes.io/instance": "kube-fledged-controller"})
	e.startController(controller.Config{KubeFledgedNamespace: kfNS})
	if err := e.runError(); !errors.Is(err, controller.ErrKubeFledgedRunning) {
		t.Errorf("Run beside kube-fledged's Helm-installed controller: %v, want ErrKubeFledgedRunning", err)
	}
}

// Under leader election, Run's failure (kube-fledged runs) is logged as an
// error, the lease is given up and RunWithLeaderElection returns the error,
// so the process exits non-zero and its restarts show the reason.
func TestLeaderElectionReturnsRunFailure(t *testing.T) {
	e := newEnv(t)
	kfNS := "kf-" + e.ns
	e.kubeFledgedPod(kfNS, "kubefledged-controller", "kubefledged-controller-0")
	c, err := controller.New(controller.Config{Kube: kubernetes.NewForConfigOrDie(e.ctlCfg), Dynamic: dynamic.NewForConfigOrDie(e.ctlCfg),
		NoopImage: "registry.test/pullrecords:test", KubeFledgedNamespace: kfNS})
	if err != nil {
		t.Fatal(err)
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(e.ctx, logger))
	defer cancel()
	lease := "le-" + e.ns
	done := make(chan error, 1)
	go func() {
		done <- c.RunWithLeaderElection(ctx, controller.LeaderElection{Namespace: "pullrecords-system", Name: lease, Identity: "one",
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, controller.ErrKubeFledgedRunning) {
			t.Errorf("RunWithLeaderElection: %v, want ErrKubeFledgedRunning", err)
		}
	case <-time.After(90 * time.Second):
		cancel()
		<-done
		t.Fatal("RunWithLeaderElection kept the lease and never returned Run's failure")
	}
	logged := false
	for _, entry := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
		if entry.Type == ktesting.LogError && errors.Is(entry.Err, controller.ErrKubeFledgedRunning) {
			logged = true
		}
	}
	if !logged {
		t.Error("Run's failure was not logged at error level")
	}
	l, err := e.admin.CoordinationV1().Leases("pullrecords-system").Get(e.ctx, lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h == "one" {
		t.Errorf("the failed replica still holds the lease")
	}
}
