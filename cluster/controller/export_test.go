package controller

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/imagecache"
)

// PrepullPodForTest is the pod a controller with cfg creates to pull image
// on node for ic, for the admission tests of package controller_test.
func PrepullPodForTest(cfg Config, ic *api.ImageCache, node, image string) *corev1.Pod {
	c := &Controller{cfg: cfg}
	return c.prepullPod(ic, imagecache.ImageWorkRequest{Node: node, Image: image, WorkType: imagecache.WorkTypeCreate})
}

// PairBytes is pairBytes, for the measurement on the API server.
func PairBytes(imageLen, cacheKeyLen int) int { return pairBytes(imageLen, cacheKeyLen) }
