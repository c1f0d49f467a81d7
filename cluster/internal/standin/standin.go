// Package standin plays the kubelet's part for pre-pull pods in tests and
// benchmarks that run a real API server without real nodes: it watches the
// controller's pods and writes the status a kubelet would write after
// trying the pull (Succeeded, or ErrImagePull with the registry's message),
// as the nodes' own identity would.
//
// Guarantees: each pod gets at most one status write, decided by the
// Decide function; a pod whose node is paused gets none until Resume.
// Non-guarantees: no image is pulled and no container runs; this is not a
// model of the kubelet's timing, back-off or credential check (the
// end-to-end tests use real kubelets for that).
package standin

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Decide says how the pull of image on node, with the pod's pull secrets,
// goes: nil is success, an error's text becomes the ErrImagePull message.
type Decide func(node, image string, secrets []corev1.LocalObjectReference) error

// Kubelet is the stand-in.
type Kubelet struct {
	kube    kubernetes.Interface
	decide  Decide
	queue   workqueue.TypedInterface[string]
	pods    cache.Indexer
	mu      sync.Mutex
	paused  map[string]bool
	pulled  map[string]map[string]bool // node -> image
	imageID func(node, image string) string
	Written atomic.Int64 // status writes made
}

// SetImageID makes the stand-in report imageID(node, image) as a
// successful pull's containerStatuses imageID, as a kubelet reports the
// runtime's image reference; unset (or an empty answer), it reports
// "sha256:standin".
func (k *Kubelet) SetImageID(imageID func(node, image string) string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.imageID = imageID
}

// Start runs a stand-in until ctx is done, with workers goroutines writing
// statuses. The selector picks the pods it answers for.
func Start(ctx context.Context, kube kubernetes.Interface, selector string, workers int, decide Decide) (*Kubelet, error) {
	k := &Kubelet{kube: kube, decide: decide, queue: workqueue.NewTyped[string](),
		paused: map[string]bool{}, pulled: map[string]map[string]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := f.Core().V1().Pods().Informer()
	add := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: add}); err != nil {
		return nil, err
	}
	k.pods = inf.GetIndexer()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("stand-in kubelet: informer did not sync")
	}
	for i := 0; i < workers; i++ {
		go func() {
			for {
				key, stop := k.queue.Get()
				if stop {
					return
				}
				k.handle(ctx, key)
				k.queue.Done(key)
			}
		}()
	}
	go func() { <-ctx.Done(); k.queue.ShutDown(); f.Shutdown() }()
	return k, nil
}

// Pause stops answering for node's pods (a node that hangs); Resume answers
// them again.
func (k *Kubelet) Pause(node string) {
	k.mu.Lock()
	k.paused[node] = true
	k.mu.Unlock()
}

// Resume answers node's pods again, including those that arrived paused.
func (k *Kubelet) Resume(node string) {
	k.mu.Lock()
	delete(k.paused, node)
	k.mu.Unlock()
	for _, obj := range k.pods.List() {
		if p := obj.(*corev1.Pod); p.Spec.NodeName == node {
			k.queue.Add(p.Namespace + "/" + p.Name)
		}
	}
}

// Pulled reports whether a pod pulled image on node.
func (k *Kubelet) Pulled(node, image string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pulled[node][image]
}

func (k *Kubelet) handle(ctx context.Context, key string) {
	obj, ok, err := k.pods.GetByKey(key)
	if err != nil || !ok {
		return
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	k.mu.Lock()
	paused := k.paused[pod.Spec.NodeName]
	k.mu.Unlock()
	if paused || pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending || len(pod.Spec.Containers) == 0 {
		return
	}
	// Every container's image is tried, in order, as the kubelet does: a
	// failed pull leaves its container waiting and the pod Pending, and
	// does not stop the others.
	pod.Status.ContainerStatuses = nil
	failed := false
	for _, c := range pod.Spec.Containers {
		if err := k.decide(pod.Spec.NodeName, c.Image, pod.Spec.ImagePullSecrets); err != nil {
			failed = true
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: err.Error()}}})
			continue
		}
		id := "sha256:standin"
		k.mu.Lock()
		if k.imageID != nil {
			if got := k.imageID(pod.Spec.NodeName, c.Image); got != "" {
				id = got
			}
		}
		if k.pulled[pod.Spec.NodeName] == nil {
			k.pulled[pod.Spec.NodeName] = map[string]bool{}
		}
		k.pulled[pod.Spec.NodeName][c.Image] = true
		k.mu.Unlock()
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: id,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}})
	}
	pod.Status.Phase = corev1.PodSucceeded
	if failed {
		pod.Status.Phase = corev1.PodPending
	}
	_, err = k.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err == nil {
		k.Written.Add(1)
		return
	}
	if !apierrors.IsNotFound(err) && ctx.Err() == nil {
		k.queue.Add(key) // conflict: try again with the informer's newer copy
	}
}
