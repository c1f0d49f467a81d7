package controller_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/controller"
)

// A node's images go into pods of at most MaxImagesPerPod, in spec order,
// each container pinned by its annotation; each image gets its own
// result: an image whose pull fails (no secret for a private image) fails
// alone, and its pod's other, pulled images are not made to fail, nor is
// the failed one counted as pulled because its pod's others were.
func TestMultiImagePodsGiveResultsPerImage(t *testing.T) {
	e := newEnv(t)
	node := e.addNode("n", true)
	e.kubelet.Pause(node)
	e.startController(controller.Config{MaxImagesPerPod: 2, MaxInFlightPerNode: 10})
	images := []string{"registry.test/public/a:1", "registry.test/public/b:1", "registry.test/public/c:1",
		"registry.test/private/x:1", "registry.test/public/d:1"}
	e.applyCache("c", fmt.Sprintf("  cacheSpec:\n  - images: [%s]\n    nodeSelector: {%s: \"yes\"}\n", strings.Join(images, ", "), e.label))
	e.waitFor("three pre-pull pods", func() bool { return len(e.managedPods()) == 3 })

	var groups []string
	for _, p := range e.managedPods() {
		if len(p.Spec.Containers) > 2 {
			t.Errorf("pod %s has %d containers, want at most 2", p.Name, len(p.Spec.Containers))
		}
		var imgs []string
		for i, c := range p.Spec.Containers {
			if want := fmt.Sprintf("prepull-%d", i); c.Name != want {
				t.Errorf("pod %s container %d is named %q, want %q", p.Name, i, c.Name, want)
			}
			if got := p.Annotations["pullrecords.io/image."+c.Name]; got != c.Image {
				t.Errorf("pod %s container %s runs %q, its annotation says %q", p.Name, c.Name, c.Image, got)
			}
			imgs = append(imgs, c.Image)
		}
		groups = append(groups, strings.Join(imgs, " "))
	}
	sort.Strings(groups)
	want := []string{images[0] + " " + images[1], images[2] + " " + images[3], images[4]}
	sort.Strings(want)
	if strings.Join(groups, "|") != strings.Join(want, "|") {
		t.Errorf("pods pull %q, want the spec's images in order, two by two: %q", groups, want)
	}

	e.kubelet.Resume(node)
	ic := e.waitDone("c", api.ReasonImageCacheCreate)
	n := ic.Status.Counts
	if ic.Status.Status != api.ActionStatusFailed || n.Succeeded != 4 || n.Failed != 1 || n.AlreadyPulled != 0 {
		t.Errorf("status %q counts %+v, want Failed with 4 pulled and 1 failed", ic.Status.Status, n)
	}
	if f := ic.Status.Failures; len(f) != 1 || len(f[images[3]]) != 1 || f[images[3]][0].Reason != "ErrImagePull" {
		t.Errorf("failures %+v, want only %s with ErrImagePull", f, images[3])
	}
	for _, r := range e.nodeImages(node).Status.Results {
		wantStatus := api.WorkSucceeded
		if r.Image == images[3] {
			wantStatus = api.WorkFailed
		}
		if r.Status != wantStatus {
			t.Errorf("node result of %s: %s (%s), want %s", r.Image, r.Status, r.Reason, wantStatus)
		}
	}
	e.waitFor("the action's pods deleted", func() bool { return len(e.managedPods()) == 0 })
}

// Two caches want the same images on one node, one with the secret the
// registry accepts and one without: each reads only its own pod's
// containers, so the pull the first cache's pod made is never the
// second's answer for the private image.
func TestMultiImagePodsAreReadPerCache(t *testing.T) {
	e := newEnv(t)
	node := e.addNode("n", true)
	e.kubelet.Pause(node)
	e.startController(controller.Config{})
	spec := fmt.Sprintf("  cacheSpec:\n  - images: [registry.test/private/x:1, registry.test/public/y:1]\n    nodeSelector: {%s: \"yes\"}\n", e.label)
	e.applyCache("with", spec+"  imagePullSecrets: [{name: regcred}]\n")
	e.applyCache("without", spec)
	e.waitFor("one pod per cache", func() bool { return len(e.managedPods()) == 2 })
	e.kubelet.Resume(node)
	with := e.waitDone("with", api.ReasonImageCacheCreate)
	without := e.waitDone("without", api.ReasonImageCacheCreate)
	if with.Status.Status != api.ActionStatusSucceeded || with.Status.Counts.Succeeded != 2 {
		t.Errorf("the cache with the secret: %q %+v", with.Status.Status, with.Status.Counts)
	}
	n := without.Status.Counts
	if without.Status.Status != api.ActionStatusFailed || n.Succeeded != 1 || n.Failed != 1 || n.AlreadyPulled != 0 {
		t.Errorf("the cache without the secret: %q %+v, want the private image failed and the public one pulled", without.Status.Status, n)
	}
	if f := without.Status.Failures["registry.test/private/x:1"]; len(f) != 1 || f[0].Reason != "ErrImagePull" {
		t.Errorf("the cache without the secret: failures %+v", without.Status.Failures)
	}
}

// A pod with a failed pull is deleted once every image of it has its
// result written, while the action still waits on another node (else the
// kubelet would keep retrying the failed pull); its pulled image keeps its
// result.
func TestMultiImagePodWithAFailureGoesOnceAllAreWritten(t *testing.T) {
	e := newEnv(t)
	n1, n2 := e.addNode("n1", true), e.addNode("n2", true)
	e.kubelet.Pause(n2)
	e.startController(controller.Config{})
	e.applyCache("c", fmt.Sprintf("  cacheSpec:\n  - images: [registry.test/public/a:1, registry.test/private/x:1]\n    nodeSelector: {%s: \"yes\"}\n", e.label))
	e.waitFor("n1's pod deleted, n2's still there", func() bool {
		pods := e.managedPods()
		return len(pods) == 1 && pods[0].Spec.NodeName == n2
	})
	got := map[string]api.WorkStatus{}
	for _, r := range e.nodeImages(n1).Status.Results {
		got[r.Image] = r.Status
	}
	if got["registry.test/public/a:1"] != "succeeded" || got["registry.test/private/x:1"] != "failed" {
		t.Errorf("n1's results when its pod went: %v", got)
	}
	if ic := e.cache("c"); ic.Status.Status != api.ActionStatusProcessing {
		t.Errorf("status %q while n2 has not answered, want Processing", ic.Status.Status)
	}
	e.kubelet.Resume(n2)
	if ic := e.waitDone("c", api.ReasonImageCacheCreate); ic.Status.Counts.Succeeded != 2 || ic.Status.Counts.Failed != 2 {
		t.Errorf("counts %+v, want 2 pulled and 2 failed", ic.Status.Counts)
	}
}
