package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

func node(name string, labels map[string]string, images ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n.Status.NodeInfo.ContainerRuntimeVersion = "containerd://1.6.20"
	for _, img := range images {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{img}})
	}
	return n
}

func TestImagesForFollowSelectors(t *testing.T) {
	ic := &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	ic.Spec.CacheSpec = []api.CacheSpecImages{
		{Images: []string{"a:1", "b:1", "a:1"}, NodeSelector: map[string]string{"pool": "gpu"}},
		{Images: []string{" c:1 ", ""}},
	}
	var pairs []string
	for _, n := range []*corev1.Node{node("n1", map[string]string{"pool": "gpu"}), node("n2", nil)} {
		for _, img := range imagesFor(ic, n) {
			pairs = append(pairs, n.Name+" "+img)
		}
	}
	want := []string{"n1 a:1", "n1 b:1", "n1 c:1", "n2 c:1"}
	if diff := cmp.Diff(want, pairs); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
}

// kube-fledged matched node status by substring (app:1.2 matched
// app:1.21); the fallback compares canonical names exactly.
func TestNodeStatusPresenceIsExact(t *testing.T) {
	n := node("n", nil, "registry.local:5000/app:1.21", "docker.io/library/busybox:1.36")
	for image, want := range map[string]bool{
		"registry.local:5000/app:1.2":  false,
		"registry.local:5000/app:1.21": true,
		"registry.local:5000/app":      false,
		"busybox:1.36":                 true,
		"library/busybox:1.36":         true,
		"busybox:1.3":                  false,
	} {
		if got := presentInNodeStatus(n, image); got != want {
			t.Errorf("presentInNodeStatus(%q) = %v, want %v", image, got, want)
		}
	}
}

func TestAlwaysPullLikeKubeFledged(t *testing.T) {
	for image, want := range map[string]bool{
		"busybox": true, "busybox:latest": true, "busybox:1.36": false,
		"localhost:5000/x": true, "localhost:5000/x:2": false,
		"busybox@sha256:" + "0123456789012345678901234567890123456789012345678901234567890123": false,
	} {
		if got := alwaysPull(image); got != want {
			t.Errorf("alwaysPull(%q) = %v, want %v", image, got, want)
		}
	}
}

func waiting(reason, msg string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "prepull-0", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
}

func TestPodOutcome(t *testing.T) {
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pod := func(phase corev1.PodPhase, cs ...corev1.ContainerStatus) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		p.Status.Phase = phase
		p.Status.ContainerStatuses = cs
		return p
	}
	running := corev1.ContainerStatus{Name: "prepull-0", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	exited := corev1.ContainerStatus{Name: "prepull-0", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	cases := []struct {
		name string
		pod  *corev1.Pod
		age  time.Duration
		want api.Outcome
	}{
		{"succeeded", pod(corev1.PodSucceeded), time.Second, api.Outcome{Status: api.WorkSucceeded}},
		{"running means pulled", pod(corev1.PodRunning, running), time.Second, api.Outcome{Status: api.WorkSucceeded}},
		{"exit code does not matter", pod(corev1.PodFailed, exited), time.Second, api.Outcome{Status: api.WorkSucceeded}},
		{"401", pod(corev1.PodPending, waiting("ErrImagePull", "failed to pull: 401 Unauthorized")), time.Second,
			api.Outcome{Status: api.WorkFailed, Reason: "ErrImagePull", Message: "failed to pull: 401 Unauthorized"}},
		{"backoff", pod(corev1.PodPending, waiting("ImagePullBackOff", "Back-off pulling")), time.Second,
			api.Outcome{Status: api.WorkFailed, Reason: "ImagePullBackOff", Message: "Back-off pulling"}},
		{"still pulling", pod(corev1.PodPending, waiting("ContainerCreating", "")), time.Second, api.Outcome{Status: api.WorkJobCreated}},
		{"deadline with a reason", pod(corev1.PodPending, waiting("ContainerCreating", "slow")), 5 * time.Minute,
			api.Outcome{Status: api.WorkFailed, Reason: "ContainerCreating", Message: "not pulled within 5m0s: ContainerCreating: slow"}},
		{"deadline while the helper runs", pod(corev1.PodPending, waiting("PodInitializing", "")), 5 * time.Minute,
			api.Outcome{Status: api.WorkFailed, Reason: "PodInitializing", Message: "not pulled within 5m0s: the pre-pull helper (init container install-noop) had not finished installing the no-op program"}},
		{"deadline without any status", pod(corev1.PodPending), 6 * time.Minute,
			api.Outcome{Status: api.WorkFailed, Reason: "Pending", Message: "the node reported nothing on the pre-pull pod within 5m0s; check that the node is Ready and its kubelet runs"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := containerOutcome(tc.pod, "prepull-0", created.Add(tc.age), 5*time.Minute)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("containerOutcome (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("helper image not pullable", func(t *testing.T) {
		p := pod(corev1.PodPending)
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: installContainer,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}
		got := containerOutcome(p, "prepull-0", created, time.Minute)
		if !got.Final() || got.Status != api.WorkFailed || got.Reason != "NoopImageErrImagePull" {
			t.Errorf("got %+v", got)
		}
	})
}

func TestNextAction(t *testing.T) {
	c := &Controller{cfg: Config{RefreshInterval: time.Hour}}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	done := &metav1.Time{Time: now.Add(-30 * time.Minute)}
	mk := func(gen int64, st api.ImageCacheStatus, annos ...string) *api.ImageCache {
		ic := &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Generation: gen, Annotations: map[string]string{}}, Status: st}
		for _, a := range annos {
			ic.Annotations[a] = ""
		}
		return ic
	}
	finished := api.ImageCacheStatus{Status: api.ActionStatusSucceeded, Reason: api.ReasonImageCacheCreate, Batch: "1-x", ObservedGeneration: 1, CompletionTime: done}
	purging := api.ImageCacheStatus{Status: api.ActionStatusProcessing, Reason: api.ReasonImageCachePurge, Batch: "1-y", ObservedGeneration: 1}
	cases := []struct {
		name string
		ic   *api.ImageCache
		want string
	}{
		{"new", mk(1, api.ImageCacheStatus{}), api.ReasonImageCacheCreate},
		{"left by kube-fledged", mk(1, api.ImageCacheStatus{Status: api.ActionStatusSucceeded}), api.ReasonImageCacheRefresh},
		{"spec changed", mk(2, finished), api.ReasonImageCacheUpdate},
		{"purge asked", mk(1, finished, api.PurgeAnnotation), api.ReasonImageCachePurge},
		{"purge running", mk(1, purging, api.PurgeAnnotation), ""},
		{"refresh asked", mk(1, finished, api.RefreshAnnotation), api.ReasonImageCacheRefresh},
		{"nothing due", mk(1, finished), ""},
	}
	for _, tc := range cases {
		got, due := c.nextAction(tc.ic, now)
		if got != tc.want || due != (tc.want != "") {
			t.Errorf("%s: nextAction = %q %v, want %q", tc.name, got, due, tc.want)
		}
	}
	if got, _ := c.nextAction(mk(1, finished), now.Add(31*time.Minute)); got != api.ReasonImageCacheRefresh {
		t.Errorf("after the refresh interval: %q, want a refresh", got)
	}
	purgedDone := finished
	purgedDone.Reason = api.ReasonImageCachePurge
	if got, _ := c.nextAction(mk(1, purgedDone), now.Add(2*time.Hour)); got != "" {
		t.Errorf("a purged cache was refreshed periodically: %q", got)
	}
}

// The purge list holds only images some cache's pre-pull pulled (a record
// with an image ID), never one every cache found present; it remembers a
// purge while the agent is away, and drops an entry only when the agent
// reported it done (gone, or kept for a final reason; in use is not) and
// every waiting purge action has its result.
func TestDesiredSpecPurgesOnlyPulledImages(t *testing.T) {
	rec := func(cache, uid, ref string) api.PullRecord {
		return api.PullRecord{Cache: cache, CacheUID: uid, Batch: "b1", ImageRef: ref}
	}
	ni := &api.NodeImages{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	ni.Spec.Purge = []api.NodeImage{
		{Image: "done:1", Pulled: []api.PullRecord{rec("ns/x", "ux", "sha256:d")}},
		{Image: "kept:1", Pulled: []api.PullRecord{rec("ns/x", "ux", "sha256:k")}},
		{Image: "unanswered:1", Pulled: []api.PullRecord{rec("ns/p", "up", "sha256:u")}},
		{Image: "refused:1", Pulled: []api.PullRecord{rec("ns/x", "ux", "sha256:r")}},
		{Image: "inuse:1", Pulled: []api.PullRecord{rec("ns/x", "ux", "sha256:i")}},
	}
	records := map[string][]api.PullRecord{
		"a:1":          {rec("ns/x", "ux", "sha256:a")},
		"pulled:1":     {rec("ns/x", "ux", "sha256:p")},
		"inflight:1":   {{Cache: "ns/x", CacheUID: "ux", Batch: "b2"}},
		"done:1":       ni.Spec.Purge[0].Pulled,
		"kept:1":       ni.Spec.Purge[1].Pulled,
		"unanswered:1": ni.Spec.Purge[2].Pulled,
		"refused:1":    ni.Spec.Purge[3].Pulled,
		"inuse:1":      ni.Spec.Purge[4].Pulled,
	}
	want := map[string][]string{"a:1": {"ns/y", "ns/x"}, "present:1": {"ns/y"}}
	alive := agentView{liveness: liveness{alive: true}, observed: 3, generation: 3, presence: map[string]api.ImagePresence{
		"done:1":       {Image: "done:1"},
		"kept:1":       {Image: "kept:1", Present: true, Kept: api.KeptPinned},
		"inuse:1":      {Image: "inuse:1", Present: true, Kept: api.KeptInUse},
		"unanswered:1": {Image: "unanswered:1"},
		"refused:1":    {Image: "refused:1", Present: true, RemoveError: "in use"},
	}}
	answered := func(image string, _ []api.PullRecord) bool { return image != "unanswered:1" }
	got := desiredSpec(ni, want, records, alive, answered)
	wantSpec := api.NodeImagesSpec{
		Images: []api.NodeImage{
			{Image: "a:1", Caches: []string{"ns/x", "ns/y"}, Pulled: records["a:1"]},
			{Image: "present:1", Caches: []string{"ns/y"}},
		},
		Purge: []api.NodeImage{
			{Image: "inuse:1", Pulled: records["inuse:1"]},
			{Image: "pulled:1", Pulled: records["pulled:1"]},
			{Image: "refused:1", Pulled: records["refused:1"]},
			{Image: "unanswered:1", Pulled: records["unanswered:1"]},
		},
	}
	if diff := cmp.Diff(wantSpec, got); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	// The agent is away: every purge is remembered, none is taken as done.
	got = desiredSpec(ni, want, records, agentView{}, answered)
	var names []string
	for _, e := range got.Purge {
		names = append(names, e.Image)
	}
	if diff := cmp.Diff([]string{"done:1", "inuse:1", "kept:1", "pulled:1", "refused:1", "unanswered:1"}, names); diff != "" {
		t.Errorf("purge list without an agent (-want +got):\n%s", diff)
	}
}

func TestPodNamesAreDeterministicAndDistinct(t *testing.T) {
	ic := &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Name: "a-very-long-image-cache-name-that-goes-on-and-on-and-on", UID: "u1"}}
	a := podName(ic, "b1", "n1", []string{"img:1"})
	if a != podName(ic, "b1", "n1", []string{"img:1"}) {
		t.Error("same inputs, different names")
	}
	seen := map[string]bool{a: true}
	for _, other := range []string{podName(ic, "b2", "n1", []string{"img:1"}), podName(ic, "b1", "n2", []string{"img:1"}), podName(ic, "b1", "n1", []string{"img:2"})} {
		if seen[other] {
			t.Errorf("collision: %s", other)
		}
		seen[other] = true
	}
	if len(a) > 63 {
		t.Errorf("name %q is %d long", a, len(a))
	}
}

// A pull record takes the image the kubelet reports only from the pod this
// controller makes for the image: a pod of the same name running another
// image (one a tenant made ahead of it) records nothing.
func TestPulledImageRefOnlyFromThePrepullPod(t *testing.T) {
	pod := func(image, imageID string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"pullrecords.io/image.prepull-0": "reg/app:1"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "prepull-0", Image: image}}},
			Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "prepull-0", Image: image, ImageID: imageID}}},
		}
	}
	if got := pulledImageRef(pod("reg/app:1", "reg/app@sha256:aa"), "prepull-0", "reg/app:1"); got != "reg/app@sha256:aa" {
		t.Errorf("the pre-pull pod's imageID: %q", got)
	}
	if got := pulledImageRef(pod("reg/victim:1", "reg/victim@sha256:bb"), "prepull-0", "reg/app:1"); got != "" {
		t.Errorf("a pod running another image gave %q, want nothing", got)
	}
	if got := pulledImageRef(pod("reg/app:1", "docker-pullable://reg/app@sha256:aa"), "prepull-0", "reg/app:1"); got != "reg/app@sha256:aa" {
		t.Errorf("a docker-pullable imageID: %q", got)
	}
}
