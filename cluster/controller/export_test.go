package controller

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// PrepullPodForTest is the pod a controller with cfg creates to pull
// images on node for ic, for the admission tests of package
// controller_test.
func PrepullPodForTest(cfg Config, ic *api.ImageCache, node string, images ...string) *corev1.Pod {
	c := &Controller{cfg: cfg}
	return c.prepullPod(ic, node, images)
}

// PairBytes is pairBytes, for the measurement on the API server.
func PairBytes(imageLen, cacheKeyLen int) int { return pairBytes(imageLen, cacheKeyLen) }
