package controller

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// createParallelism is how many pod creations one sync has in flight: a
// round of a large cache creates up to MaxInFlight pods, and one at a time
// the API server's latency, not its capacity, would bound the rate.
const createParallelism = 16

// createPods creates the pods a sync decided on, createParallelism at a
// time, and returns the first error (the others are attempted anyway; the
// retry finds those that exist by name). A pod the API server refuses for
// good is not an error: its request fails with the refusal (refused.go).
func (c *Controller) createPods(ctx context.Context, ic *api.ImageCache, pods []plannedPod) error {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		first   error
		refused []refusedPod
		slots   = make(chan struct{}, createParallelism)
	)
	for _, p := range pods {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			err := c.createPod(ctx, p.pod)
			if r, ok := podRefusal(err); ok {
				mu.Lock()
				refused = append(refused, refusedPod{planned: p, refusal: r, err: err})
				mu.Unlock()
				return
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := c.settleRefused(ctx, ic, refused); first == nil {
		first = err
	}
	return first
}

func (c *Controller) createPod(ctx context.Context, pod *corev1.Pod) error {
	_, err := c.cfg.Kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating pre-pull pod %s/%s for %d image(s) on %s: %w", pod.Namespace, pod.Name, len(pod.Spec.Containers), pod.Spec.NodeName, err)
	}
	c.mu.Lock()
	images := make([]string, 0, len(pod.Spec.Containers))
	for _, ct := range pod.Spec.Containers {
		images = append(images, ct.Image)
	}
	c.created[pod.Namespace+"/"+pod.Name] = createdPod{node: pod.Spec.NodeName, at: c.cfg.Clock.Now(),
		cacheUID: pod.Labels[cacheUIDLabel], batch: pod.Labels[batchLabel], images: images}
	c.mu.Unlock()
	c.cfg.Metrics.podCreated()
	klog.FromContext(ctx).V(2).Info("Created pre-pull pod", "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "images", len(pod.Spec.Containers))
	return nil
}

// deletePods deletes the cache's pods that match and have no pending
// result (those go once their result is written).
func (c *Controller) deletePods(ctx context.Context, key string, match func(*corev1.Pod) bool) error {
	objs, err := c.podIndex.ByIndex(podsByCacheIndex, key)
	if err != nil {
		return err
	}
	for _, o := range objs {
		pod := o.(*corev1.Pod)
		if !match(pod) || pod.DeletionTimestamp != nil || !c.owns(pod) {
			continue
		}
		if err := c.deletePod(ctx, pod.Namespace, pod.Name, pod.UID); err != nil {
			return err
		}
	}
	return nil
}

// deletePodNamed deletes the pod of key (namespace/name) as the informer
// shows it; a pod the informer does not show is gone already.
func (c *Controller) deletePodNamed(ctx context.Context, key string) error {
	obj, ok, err := c.podIndex.GetByKey(key)
	if err != nil || !ok {
		return err
	}
	pod := obj.(*corev1.Pod)
	if !c.owns(pod) {
		return nil
	}
	return c.deletePod(ctx, pod.Namespace, pod.Name, pod.UID)
}

// deletePod deletes one pod, with its UID as a precondition, at once (no
// grace: it pulls, it serves nothing). A pod this controller deleted is
// not deleted again while the informer still shows it: the API server
// removed it already (grace 0), and a second request would only cost.
func (c *Controller) deletePod(ctx context.Context, ns, name string, uid types.UID) error {
	c.mu.Lock()
	again := c.deleted[uid]
	c.mu.Unlock()
	if again {
		return nil
	}
	opts := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &uid}}
	err := c.cfg.Kube.CoreV1().Pods(ns).Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pre-pull pod %s/%s: %w", ns, name, err)
	}
	c.mu.Lock()
	c.deleted[uid] = true
	c.mu.Unlock()
	return nil
}

// deleteActionPods deletes the current action's remaining pods once its
// results are written: one request per pod, each with the pod's UID as a
// precondition, and only pods the controller owns (a collection delete by
// label would also take pods anyone else labelled alike).
func (c *Controller) deleteActionPods(ctx context.Context, ic *api.ImageCache) error {
	objs, err := c.podIndex.ByIndex(podsByCacheIndex, cacheKey(ic))
	if err != nil {
		return err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		slots = make(chan struct{}, createParallelism)
	)
	for _, o := range objs {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp != nil || p.Labels[batchLabel] != ic.Status.Batch || !c.owns(p) {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := c.deletePod(ctx, p.Namespace, p.Name, p.UID); err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("deleting the pre-pull pods of %s: %w", cacheKey(ic), err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}
