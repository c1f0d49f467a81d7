package controller

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// multiPod is the controller's pod for images, created at created, with
// the container statuses given by container name.
func multiPod(created time.Time, images []string, statuses map[string]corev1.ContainerState) *corev1.Pod {
	ic := &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u"}}
	p := (&Controller{cfg: Config{NoopImage: "noop:1"}}).prepullPod(ic, "n", images)
	p.CreationTimestamp = metav1.NewTime(created)
	p.Status.Phase = corev1.PodPending
	for _, ct := range p.Spec.Containers {
		if st, ok := statuses[ct.Name]; ok {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses,
				corev1.ContainerStatus{Name: ct.Name, Image: ct.Image, ImageID: ct.Image + "@sha256:aa", State: st})
		}
	}
	return p
}

func waitingState(reason, msg string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

// Each image of a pod has its own outcome: one image pulled, one refused
// by the registry and one still pulling give three different answers, and
// the pod is final only once all are.
func TestOutcomesPerContainer(t *testing.T) {
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	images := []string{"reg/a:1", "reg/private:1", "reg/slow:1"}
	pod := multiPod(created, images, map[string]corev1.ContainerState{
		"prepull-0": {Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}},
		"prepull-1": waitingState("ErrImagePull", "401 Unauthorized"),
		"prepull-2": waitingState("ContainerCreating", ""),
	})
	outs := podOutcomes(pod, created.Add(time.Second), time.Minute)
	if o := outs["prepull-0"]; !o.Final() || o.Status != api.WorkSucceeded {
		t.Errorf("pulled image: %+v", o)
	}
	if o := outs["prepull-1"]; !o.Final() || o.Status != api.WorkFailed || o.Reason != "ErrImagePull" || o.Message != "401 Unauthorized" {
		t.Errorf("refused image: %+v, want failed with the kubelet's reason and message", o)
	}
	if o := outs["prepull-2"]; o.Final() {
		t.Errorf("image still pulling is final: %+v", o)
	}
	if allFinal(outs) || !anyFailed(outs) {
		t.Errorf("allFinal %v anyFailed %v, want false and true", allFinal(outs), anyFailed(outs))
	}
	if got := pulledImageRef(pod, "prepull-0", "reg/a:1"); got != "reg/a:1@sha256:aa" {
		t.Errorf("image ID of the pulled image: %q", got)
	}

	// At the deadline the waiting image fails with what it last said; the
	// others keep theirs.
	outs = podOutcomes(pod, created.Add(time.Minute), time.Minute)
	if o := outs["prepull-2"]; !o.Final() || o.Status != api.WorkFailed || o.Reason != "ContainerCreating" {
		t.Errorf("image waiting at the deadline: %+v", o)
	}
	if o := outs["prepull-0"]; o.Status != api.WorkSucceeded {
		t.Errorf("pulled image at the deadline: %+v", o)
	}
	if !allFinal(outs) {
		t.Error("every image final at the deadline, but the pod is not")
	}

	// The helper failing fails every image, even one whose container
	// status a stale or forged status shows running.
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: installContainer, State: waitingState("ImagePullBackOff", "no such image")}}
	for name, o := range podOutcomes(pod, created.Add(time.Second), time.Minute) {
		if !o.Final() || o.Status != api.WorkFailed || o.Reason != "NoopImageImagePullBackOff" {
			t.Errorf("%s with the helper image unpullable: %+v", name, o)
		}
	}
}

// A container whose image is not the one its annotation names (a pod this
// controller did not build) is not read as pulling anything: no outcome,
// no image ID, so it never answers "pulled" for either image.
func TestContainerNotMatchingItsAnnotationPullsNothing(t *testing.T) {
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pod := multiPod(created, []string{"reg/app:1", "reg/b:1"}, map[string]corev1.ContainerState{
		"prepull-0": {Running: &corev1.ContainerStateRunning{}},
		"prepull-1": {Running: &corev1.ContainerStateRunning{}},
	})
	pod.Spec.Containers[0].Image = "reg/victim:1"
	pod.Status.Phase = corev1.PodSucceeded
	imgs := podImages(pod)
	if _, ok := imgs["prepull-0"]; ok || imgs["prepull-1"] != "reg/b:1" || len(imgs) != 1 {
		t.Errorf("podImages = %v, want only prepull-1 -> reg/b:1", imgs)
	}
	outs := podOutcomes(pod, created, time.Minute)
	if _, ok := outs["prepull-0"]; ok {
		t.Errorf("outcome for the mismatched container: %+v", outs["prepull-0"])
	}
	for _, image := range []string{"reg/app:1", "reg/victim:1"} {
		if got := pulledImageRef(pod, "prepull-0", image); got != "" {
			t.Errorf("image ID %q for %s from the mismatched container", got, image)
		}
	}
}

// Pod names differ for every image set and order, and repeat for the same.
func TestPodNamesPerImageSet(t *testing.T) {
	ic := &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "u"}}
	a := podName(ic, "b", "n", []string{"x:1", "y:1"})
	if a != podName(ic, "b", "n", []string{"x:1", "y:1"}) {
		t.Error("same image set, different names")
	}
	seen := map[string]bool{a: true}
	for _, set := range [][]string{{"y:1", "x:1"}, {"x:1"}, {"x:1", "y:1", "z:1"}, {"x:1\x00y:1"}} {
		n := podName(ic, "b", "n", set)
		if seen[n] {
			t.Errorf("image set %q collides", set)
		}
		seen[n] = true
	}
}

// MaxImagesPerPod defaults to 32 and is refused outside 1..64, the
// containers admission.yaml admits.
func TestMaxImagesPerPodBounds(t *testing.T) {
	for n, want := range map[int]int{0: 32, 1: 1, 64: 64, 65: -1, -1: -1} {
		cfg := Config{Kube: kubefake.NewClientset(), Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), NoopImage: "x", MaxImagesPerPod: n}
		err := cfg.setDefaults()
		switch {
		case want < 0 && !errors.Is(err, ErrInvalidConfig):
			t.Errorf("MaxImagesPerPod %d: %v, want ErrInvalidConfig", n, err)
		case want > 0 && (err != nil || cfg.MaxImagesPerPod != want):
			t.Errorf("MaxImagesPerPod %d: %v, %d, want %d", n, err, cfg.MaxImagesPerPod, want)
		}
	}
}

// The kubelet pulls a pod's images one after another: an image waiting
// behind a slow one has the deadline from the pod's last progress, not
// from its creation.
func TestDeadlineCountsFromLastProgress(t *testing.T) {
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	done := metav1.NewTime(created.Add(50 * time.Second))
	pod := multiPod(created, []string{"reg/big:1", "reg/next:1"}, map[string]corev1.ContainerState{
		"prepull-0": {Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, StartedAt: done, FinishedAt: done}},
		"prepull-1": waitingState("ContainerCreating", ""),
	})
	if o := containerOutcome(pod, "prepull-1", created.Add(70*time.Second), time.Minute); o.Final() {
		t.Errorf("20s after the previous image finished, with a minute's deadline: %+v", o)
	}
	if o := containerOutcome(pod, "prepull-1", created.Add(110*time.Second), time.Minute); !o.Final() || o.Status != api.WorkFailed {
		t.Errorf("a minute after the pod's last progress: %+v, want failed", o)
	}
	if got := lastProgress(pod); !got.Equal(done.Time) {
		t.Errorf("lastProgress = %v, want %v", got, done.Time)
	}
}
