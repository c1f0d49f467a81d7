package controller

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// eventRef is the reference Events about a cache name.
func eventRef(ic *api.ImageCache) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion:      api.ImageCacheKind.GroupVersion().String(),
		Kind:            api.ImageCacheKind.Kind,
		Namespace:       ic.Namespace,
		Name:            ic.Name,
		UID:             ic.UID,
		ResourceVersion: ic.ResourceVersion,
	}
}
