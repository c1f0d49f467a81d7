package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// fakeController is a Controller over fake clients, not running, its
// clock at now: tests call its methods and look at what it asked the API
// server for.
func fakeController(t testing.TB, now time.Time) (*Controller, *kubefake.Clientset, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	kube := kubefake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		api.ImageCacheResource: "ImageCacheList", api.NodeImagesResource: "NodeImagesList"})
	c, err := New(Config{Kube: kube, Dynamic: dyn, NoopImage: "registry.test/noop:1", Clock: clocktesting.NewFakeClock(now)})
	if err != nil {
		t.Fatal(err)
	}
	return c, kube, dyn
}

var fakeNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testCache() *api.ImageCache {
	return &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "c", UID: "cache-uid"},
		Status: api.ImageCacheStatus{Status: api.ActionStatusProcessing, Reason: api.ReasonImageCacheCreate, Batch: "1-x"}}
}

// A pod's results are written together: those that come in while its
// other images pull are held, and its last result releases them all.
func TestPodResultsAreWrittenTogether(t *testing.T) {
	c, _, _ := fakeController(t, fakeNow)
	ic := testCache()
	ok := api.Outcome{Status: api.WorkSucceeded}
	c.settle(ic, "n1", "a:1", ok, fromPod{key: "t/p1"})
	c.settle(ic, "n1", "x:1", api.Outcome{Status: api.WorkAlreadyPulled}, fromPod{})
	due := c.dueResults("n1")
	if len(due) != 1 || due[resultKey{cache: "t/c", image: "x:1"}].result.Image != "x:1" {
		t.Fatalf("due while p1 still pulls: %v, want only the result not read off a pod", due)
	}
	if n := c.unwritten("t/c", map[string]liveness{"n1": {}}); n != 2 {
		t.Errorf("unwritten = %d, want 2: a held result is not written yet", n)
	}
	c.settle(ic, "n1", "b:1", ok, fromPod{key: "t/p1", done: true})
	due = c.dueResults("n1")
	for _, img := range []string{"a:1", "b:1", "x:1"} {
		if _, ok := due[resultKey{cache: "t/c", image: img}]; !ok {
			t.Errorf("%s not due once its pod's last result came: %v", img, due)
		}
	}
}

// A held result is released when its pod goes before its last result
// came (deleted by someone, its node gone): nothing else would write it.
func TestHeldResultsAreReleasedWhenThePodGoes(t *testing.T) {
	c, _, _ := fakeController(t, fakeNow)
	ic := testCache()
	c.settle(ic, "n1", "a:1", api.Outcome{Status: api.WorkSucceeded}, fromPod{key: "t/p1"})
	c.settle(ic, "n1", "a:2", api.Outcome{Status: api.WorkSucceeded}, fromPod{key: "t/p2"})
	if due := c.dueResults("n1"); len(due) != 0 {
		t.Fatalf("due before any pod finished: %v", due)
	}
	c.podGone(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "p1", UID: "p1-uid"}, Spec: corev1.PodSpec{NodeName: "n1"}})
	due := c.dueResults("n1")
	if _, ok := due[resultKey{cache: "t/c", image: "a:1"}]; !ok || len(due) != 1 {
		t.Errorf("after p1 went: due %v, want a:1 only (p2 still holds a:2)", due)
	}
}

func ownedPod(uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "p1", UID: uid,
		Labels: map[string]string{managedByLabel: managedByValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: api.ImageCacheKind.GroupVersion().String(),
			Kind: api.ImageCacheKind.Kind, Name: "c", UID: "cache-uid", Controller: ptr.To(true)}}}}
}

// A pod is deleted once: while the informer still shows a pod the
// controller deleted, a second delete is not sent; once the informer saw
// it go, a new pod of the same name is deleted again.
func TestPodIsDeletedOnce(t *testing.T) {
	c, kube, _ := fakeController(t, fakeNow)
	deletes := func() int {
		n := 0
		for _, a := range kube.Actions() {
			if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
				n++
			}
		}
		return n
	}
	first := ownedPod("uid-1")
	for range 3 {
		if err := c.deletePod(t.Context(), first.Namespace, first.Name, first.UID); err != nil {
			t.Fatal(err)
		}
	}
	if n := deletes(); n != 1 {
		t.Fatalf("%d deletes of one pod, want 1", n)
	}
	c.podGone(first)
	second := ownedPod("uid-2")
	if err := c.deletePod(t.Context(), second.Namespace, second.Name, second.UID); err != nil {
		t.Fatal(err)
	}
	if n := deletes(); n != 2 {
		t.Errorf("%d deletes after the pod of the same name came back, want 2", n)
	}
	c.mu.Lock()
	left := len(c.deleted)
	c.mu.Unlock()
	if left != 1 {
		t.Errorf("the controller remembers %d deleted pods, want 1 (the first was forgotten when it went)", left)
	}
}
