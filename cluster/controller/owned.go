package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// Which pods are the controller's own. The managed-by label alone proves
// nothing: anyone who may create pods could set it (admission.yaml refuses
// it to everyone but the controller and system:masters, but pods created
// before that policy, or past it, exist). A pod is the controller's only
// if it carries the label AND is controlled by an ImageCache in its own
// namespace whose UID the controller knows: one in the informer's view, or
// one it saw deleted and has not finished cleaning up after. Only such pods
// count against the pre-pull budget, give results, and are ever deleted.

// cacheControllerRef returns the pod's controller reference to an
// ImageCache when the pod also carries the controller's label, else nil.
func cacheControllerRef(pod *corev1.Pod) *metav1.OwnerReference {
	if pod.Labels[managedByLabel] != managedByValue {
		return nil
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != api.ImageCacheKind.Kind || ref.APIVersion != api.ImageCacheKind.GroupVersion().String() {
		return nil
	}
	return ref
}

// ownerKey is the namespace/name of the ImageCache a labelled pod names as
// its controller, or "" (the pod is then no one's: it is not indexed).
func ownerKey(pod *corev1.Pod) string {
	if ref := cacheControllerRef(pod); ref != nil {
		return pod.Namespace + "/" + ref.Name
	}
	return ""
}

// owns reports whether pod is one of the controller's pre-pull pods.
func (c *Controller) owns(pod *corev1.Pod) bool {
	ref := cacheControllerRef(pod)
	if ref == nil || ref.UID == "" {
		return false
	}
	key := pod.Namespace + "/" + ref.Name
	if obj, err := c.caches.ByNamespace(pod.Namespace).Get(ref.Name); err == nil {
		if m, ok := obj.(metav1.Object); ok && m.GetUID() == ref.UID {
			return true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone[ref.UID] == key
}

// cacheGone remembers a deleted cache's UID, so that its pods stay the
// controller's to delete; forgetGone drops it once they are.
func (c *Controller) cacheGone(key string, uid types.UID) {
	if uid == "" {
		return
	}
	c.mu.Lock()
	c.gone[uid] = key
	c.mu.Unlock()
}

func (c *Controller) forgetGone(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, k := range c.gone {
		if k == key {
			delete(c.gone, uid)
		}
	}
}
