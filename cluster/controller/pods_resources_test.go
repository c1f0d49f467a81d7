package controller

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// The bounds policy 2 of deploy/cluster/admission.yaml puts on a pre-pull
// pod's resources.
var (
	podLimitBound       = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	podRequestBound     = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	containerLimitBound = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	containerReqBound   = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4m"), corev1.ResourceMemory: resource.MustParse("4Mi")}
)

// atMost reports the resources of got (cpu and memory, both required) that
// exceed bound.
func atMost(got, bound corev1.ResourceList) []string {
	var over []string
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q, ok := got[name]
		b := bound[name]
		if !ok || q.Cmp(b) > 0 {
			over = append(over, fmt.Sprintf("%s=%s (bound %s)", name, q.String(), b.String()))
		}
	}
	return over
}

// A pre-pull pod's resources are the same at every size, within what the
// API server's validation asks (aggregate container requests at most the
// pod's, no container limit above the pod's, requests at most limits) and
// within admission.yaml's bounds.
func TestPrepullPodResources(t *testing.T) {
	ic := &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"}}
	c := &Controller{cfg: Config{NoopImage: "noop:1"}}
	for _, n := range []int{1, 2, defaultMaxImagesPerPod, maxImagesPerPodLimit} {
		images := make([]string, n)
		for i := range images {
			images[i] = fmt.Sprintf("registry.test/img-%d:1", i)
		}
		pod := c.prepullPod(ic, "node", images)
		pr := pod.Spec.Resources
		if pr == nil {
			t.Fatalf("%d images: no pod-level resources", n)
		}
		want := map[string]corev1.ResourceList{
			"requests": {corev1.ResourceCPU: resource.MustParse("64m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			"limits":   {corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		}
		for which, got := range map[string]corev1.ResourceList{"requests": pr.Requests, "limits": pr.Limits} {
			if len(got) != 2 {
				t.Errorf("%d images: pod-level %s %v, want cpu and memory only", n, which, got)
			}
			for name, w := range want[which] {
				if q := got[name]; q.Cmp(w) != 0 {
					t.Errorf("%d images: pod-level %s %s = %s, want %s", n, which, name, q.String(), w.String())
				}
			}
		}
		if over := atMost(pr.Limits, podLimitBound); len(over) > 0 {
			t.Errorf("%d images: pod-level limits above admission's bound: %v", n, over)
		}
		if over := atMost(pr.Requests, podRequestBound); len(over) > 0 {
			t.Errorf("%d images: pod-level requests above admission's bound: %v", n, over)
		}
		if over := atMost(pr.Requests, pr.Limits); len(over) > 0 {
			t.Errorf("%d images: pod-level requests above its limits: %v", n, over)
		}
		// Validation's aggregate: the regular containers' sum, or the
		// largest init container's request if larger.
		sum := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0")}
		for _, ct := range pod.Spec.Containers {
			for name, q := range ct.Resources.Requests {
				s := sum[name]
				s.Add(q)
				sum[name] = s
			}
		}
		for _, ct := range pod.Spec.InitContainers {
			for name, q := range ct.Resources.Requests {
				if q.Cmp(sum[name]) > 0 {
					sum[name] = q
				}
			}
		}
		if over := atMost(sum, pr.Requests); len(over) > 0 {
			t.Errorf("%d images: aggregate container requests above the pod's: %v", n, over)
		}
		for _, ct := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			if len(ct.Resources.Requests) != 2 || len(ct.Resources.Limits) != 2 {
				t.Errorf("%d images, %s: resources %v, want CPU and memory requests and limits only", n, ct.Name, ct.Resources)
			}
			if over := atMost(ct.Resources.Limits, pr.Limits); len(over) > 0 {
				t.Errorf("%d images, %s: limits above the pod's: %v", n, ct.Name, over)
			}
			if over := atMost(ct.Resources.Limits, containerLimitBound); len(over) > 0 {
				t.Errorf("%d images, %s: limits above admission's bound: %v", n, ct.Name, over)
			}
			if over := atMost(ct.Resources.Requests, containerReqBound); len(over) > 0 {
				t.Errorf("%d images, %s: requests above admission's bound: %v", n, ct.Name, over)
			}
			if over := atMost(ct.Resources.Requests, ct.Resources.Limits); len(over) > 0 {
				t.Errorf("%d images, %s: requests above its limits: %v", n, ct.Name, over)
			}
		}
		// No two containers share a map: one's change (the API server's
		// defaulting works per container) touches no other.
		pod.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1")
		if q := pod.Spec.InitContainers[0].Resources.Limits[corev1.ResourceCPU]; q.Cmp(resource.MustParse(prepullCPULimit)) != 0 {
			t.Errorf("%d images: the init container shares the first container's limits", n)
		}
		if n > 1 {
			if q := pod.Spec.Containers[1].Resources.Limits[corev1.ResourceCPU]; q.Cmp(resource.MustParse(prepullCPULimit)) != 0 {
				t.Errorf("%d images: containers share their limits", n)
			}
		}
	}
	// Validation's floor for the largest pod: the pod-level requests cover
	// maxImagesPerPodLimit containers' requests.
	for name, per := range map[corev1.ResourceName]string{corev1.ResourceCPU: prepullCPURequest, corev1.ResourceMemory: prepullMemoryRequest} {
		q := resource.MustParse(per)
		total := resource.NewMilliQuantity(q.MilliValue()*maxImagesPerPodLimit, q.Format)
		pod := map[corev1.ResourceName]string{corev1.ResourceCPU: podCPURequest, corev1.ResourceMemory: podMemoryRequest}[name]
		if total.Cmp(resource.MustParse(pod)) > 0 {
			t.Errorf("%s: %d containers request %s, more than the pod's %s", name, maxImagesPerPodLimit, total.String(), pod)
		}
	}
}

// A kubelet with PodLevelResources disabled rejects the pod at admission
// (pod Failed, reason PodLevelResourcesNotSupported): every image of the
// pod fails with that reason and the kubelet's message.
func TestKubeletRejectingPodLevelResources(t *testing.T) {
	ic := &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"}}
	c := &Controller{cfg: Config{NoopImage: "noop:1"}}
	pod := c.prepullPod(ic, "node", []string{"registry.test/a:1", "registry.test/b:1"})
	pod.CreationTimestamp = metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "PodLevelResourcesNotSupported",
		Message: "Pod was rejected: PodLevelResources feature gate is disabled"}
	outs := podOutcomes(pod, time.Now(), time.Minute)
	if len(outs) != 2 {
		t.Fatalf("outcomes %v, want one per image", outs)
	}
	for name, o := range outs {
		if o.Status != api.WorkFailed || o.Reason != "PodLevelResourcesNotSupported" || o.Message != pod.Status.Message {
			t.Errorf("%s: %+v, want failed with the kubelet's reason and message", name, o)
		}
	}
}
