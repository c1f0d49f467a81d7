package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/controller"
)

// What one pre-pull pod costs a ResourceQuota, whatever its number of
// images: its pod-level resources (pods.go).
var prepullPodCharge = corev1.ResourceList{
	corev1.ResourceLimitsCPU:      resource.MustParse("100m"),
	corev1.ResourceLimitsMemory:   resource.MustParse("128Mi"),
	corev1.ResourceRequestsCPU:    resource.MustParse("64m"),
	corev1.ResourceRequestsMemory: resource.MustParse("64Mi"),
	corev1.ResourcePods:           resource.MustParse("1"),
}

// times is charge n times over.
func times(charge corev1.ResourceList, n int64) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range charge {
		v := q.DeepCopy()
		v.SetMilli(q.MilliValue() * n)
		out[name] = v
	}
	return out
}

// usedIs checks that the quota's used values are want, resource by resource.
func (e *env) usedIs(quota string, want corev1.ResourceList) {
	e.t.Helper()
	q, err := e.admin.CoreV1().ResourceQuotas(e.ns).Get(e.ctx, quota, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for name, w := range want {
		if got, ok := q.Status.Used[name]; !ok || got.Cmp(w) != 0 {
			e.t.Errorf("quota used %s = %s, want %s (used %v)", name, got.String(), w.String(), q.Status.Used)
		}
	}
}

// A tenant namespace with a tight ResourceQuota and a LimitRange (container
// defaults, max, and a pod max) admits the controller's pre-pull pods of 64
// images, and charges each exactly its pod-level resources, the same for 1
// image as for 64.
//
// The quota's hard values are tight on purpose. limits.memory 256Mi and
// requests.memory 128Mi are exactly two pods' pod-level limits and requests,
// so the third pod is refused: the used values must be the pod-level ones,
// not the containers' sums. main's 64-image pod (64 containers of limits 50m
// and 32Mi, requests 1m and 4Mi) asks limits of 3.2 CPU and 2Gi and requests
// of 256Mi memory: refused on three counts, as the LimitRange's pod max
// (200m, 256Mi) refuses it too. requests.cpu 200m and pods 10 leave room
// for exactly what the memory allows.
func TestPrepullPodsFitTightQuota(t *testing.T) {
	e := newEnv(t)
	node := e.addNode("a", true)
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "tenant-defaults", Namespace: e.ns}, Spec: corev1.LimitRangeSpec{
		Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer,
			Default: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
				corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
				corev1.ResourceEphemeralStorage: resource.MustParse("64Mi")},
			Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		}, {
			Type: corev1.LimitTypePod,
			Max:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		}},
	}}
	if _, err := e.admin.CoreV1().LimitRanges(e.ns).Create(e.ctx, lr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.quota(corev1.ResourceList{
		corev1.ResourceLimitsCPU: resource.MustParse("500m"), corev1.ResourceLimitsMemory: resource.MustParse("256Mi"),
		corev1.ResourceRequestsCPU: resource.MustParse("200m"), corev1.ResourceRequestsMemory: resource.MustParse("128Mi"),
		corev1.ResourcePods: resource.MustParse("10"),
	})

	// 1. The controller's own pod of 64 images, through the controller: the
	//    cache succeeds (the stand-in kubelet runs the pod).
	var images []string
	for i := range 64 {
		images = append(images, fmt.Sprintf("registry.test/public/q-%d:1", i))
	}
	log := e.logPods(e.ns)
	e.startController(controller.Config{MaxImagesPerPod: 64})
	e.applyCache("big", fmt.Sprintf("  cacheSpec:\n  - images: [%s]\n    nodeSelector: {%s: \"yes\"}\n", strings.Join(images, ", "), e.label))
	ic := e.waitDone("big", api.ReasonImageCacheCreate)
	if ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts == nil || ic.Status.Counts.Succeeded != 64 {
		t.Fatalf("the 64-image cache: %s counts %+v, want 64 pulled; failure of the first image: %+v",
			ic.Status.Status, ic.Status.Counts, ic.Status.Failures[images[0]])
	}
	e.stopController()
	pods := log.on(node)
	if len(pods) != 1 || len(pods[0].Spec.Containers) != 64 {
		t.Fatalf("%d pre-pull pods, want one of 64 containers", len(pods))
	}
	// The LimitRange defaulted only what the pod leaves unset
	// (ephemeral-storage); the containers' CPU and memory are the
	// controller's.
	for _, c := range append(pods[0].Spec.InitContainers, pods[0].Spec.Containers...) {
		if _, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; !ok {
			t.Errorf("container %s: the LimitRange did not default ephemeral-storage: %v", c.Name, c.Resources)
		}
		if c.Resources.Limits.Cpu().Cmp(resource.MustParse("50m")) != 0 || c.Resources.Requests.Memory().Cmp(resource.MustParse("1Mi")) != 0 {
			t.Errorf("container %s: resources %v, want the controller's own", c.Name, c.Resources)
		}
	}
	// No quota controller runs here: the used values are what quota
	// admission charged at creation.
	e.usedIs("pin-quota", prepullPodCharge)

	// 2. A pod of one image costs the same, and a third pod does not fit.
	ctl := kubernetes.NewForConfigOrDie(e.ctlCfg)
	cfg := controller.Config{NoopImage: testNoopImage}
	one := controller.PrepullPodForTest(cfg, ic, node, "registry.test/public/one:1")
	if _, err := ctl.CoreV1().Pods(e.ns).Create(e.ctx, one, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a one-image pre-pull pod was refused: %v", err)
	}
	e.usedIs("pin-quota", times(prepullPodCharge, 2))
	third := controller.PrepullPodForTest(cfg, ic, node, images[:32]...)
	_, err := ctl.CoreV1().Pods(e.ns).Create(e.ctx, third, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "exceeded quota") || !strings.Contains(err.Error(), "limits.memory=128Mi") {
		t.Errorf("a third pre-pull pod: %v, want refused, exceeded quota on limits.memory by one pod's 128Mi", err)
	}
	e.usedIs("pin-quota", times(prepullPodCharge, 2))
}

// Without the PodLevelResources feature gate the API server drops the
// pre-pull pod's spec.resources before admission; policy 2 then denies the
// pod, and the cache fails visibly (each image's failure and one Warning
// event say why) instead of pods charged their 65 containers' limits.
func TestPrepullPodsRefusedWithoutPodLevelResources(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := apiservertest.Start(ctx, apiservertest.Options{ExtraAPIServerFlags: []string{
		// The gate and those that depend on it.
		"--feature-gates=PodLevelResources=false,PodLevelResourcesFixDefaulting=false,PodLevelResourcesFixKubeletQOSClass=false," +
			"InPlacePodLevelResourcesVerticalScaling=false,PodLevelResourceManagers=false",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if err := apiservertest.Apply(ctx, srv.Admin,
		repoFile("deploy", "crds", "imagecaches.kubefledged.io.yaml"),
		repoFile("deploy", "crds", "nodeimages.pullrecords.io.yaml"),
		repoFile("deploy", "cluster", "namespace.yaml"),
		repoFile("deploy", "cluster", "rbac.yaml"),
		repoFile("deploy", "cluster", "admission.yaml")); err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(srv.Admin)
	if _, err := admin.CoreV1().ConfigMaps("pullrecords-system").Patch(ctx, "pullrecords-prepull", "application/merge-patch+json",
		fmt.Appendf(nil, `{"data":{"noopImage":%q}}`, testNoopImage), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ctlCfg, err := srv.ServiceAccountConfig(ctx, "pullrecords-system", "pullrecords-controller", "")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, admin: admin, dyn: dynamic.NewForConfigOrDie(srv.Admin), ns: "no-pod-level", label: "test-no-pod-level", ctlCfg: ctlCfg}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cleanup)

	// The gate is off: the API server keeps no spec.resources.
	e.applyCache("probe", "  cacheSpec:\n  - images: [registry.test/x:1]\n    nodeSelector: {none: none}\n")
	probe := controller.PrepullPodForTest(controller.Config{NoopImage: testNoopImage}, e.cache("probe"), "n", "registry.test/x:1")
	dry, err := admin.CoreV1().Pods(e.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Spec.Resources != nil {
		t.Fatalf("the API server kept spec.resources %v with PodLevelResources off", dry.Spec.Resources)
	}
	// Policy 2 is loaded once it denies the controller this pod.
	ctl := kubernetes.NewForConfigOrDie(ctlCfg)
	e.waitFor("policy 2 denies the pod without pod-level resources", func() bool {
		_, err := ctl.CoreV1().Pods(e.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), denyPodRes)
	})
	e.refusedCache(controller.ReasonAdmissionPolicyDenied, denyPodRes)
}
