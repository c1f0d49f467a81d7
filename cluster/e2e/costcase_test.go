//go:build clustere2e

package e2e

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// costCase is one measured create: a cache of images private images on
// the two nodes labelled cache=yes, alone in namespace ns, and the most
// it may cost the API server per (node, image), a regression guard a
// little above what was measured (BENCHMARKS.md, "API cost").
type costCase struct {
	ns     string
	images int
	// Bounds per (node, image): requests of the controller and kubelets
	// together, of the controller alone, and Events written.
	requests, controller, events float64
}

// costCacheName is the name of every measured cache.
const costCacheName = "many"

// costCases: 10 images a node (one pod of 10 each) and 32 (the default
// pod's size). A pre-pull pod costs about the same whatever its images:
// the kubelet's about 45 requests (its Events stop at its spam filter's
// 25 per pod; its pod reads and status patches, about 8 each, come with
// container changes) and the controller's about 8 (create, delete, a
// spec and a results write on the node's object, its share of the
// cache's status writes and Events). So the cost per pair falls as pods
// carry more images: measured 5.0-5.5 requests and 2.9 Events at 10,
// 1.6-1.7 and 0.9 at 32.
var costCases = []costCase{
	{ns: "tenant-m", images: 10, requests: 5.8, controller: 1.0, events: 3},
	{ns: "tenant-l", images: 32, requests: 2.5, controller: 0.4, events: 1},
}

// image is the short name of the case's i-th image.
func (cc costCase) image(i int) string { return fmt.Sprintf("%s-%d", cc.ns, i) }

// measureCreate creates the case's cache, waits until every pair is
// pulled and its pods are gone, and checks the cost read from the audit
// log against the case's bounds.
func (c *cluster) measureCreate(t *testing.T, cc costCase) {
	t.Helper()
	if _, err := c.admin.CoreV1().Namespaces().Create(c.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cc.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.secret(cc.ns, "regcred", c.auth.Password)
	var images []string
	for i := range cc.images {
		images = append(images, c.images[cc.image(i)])
	}
	pairs := 2 * cc.images
	mark := c.auditMark()
	c.applyCache(cc.ns, costCacheName, images, "regcred")
	ic := c.waitDone(cc.ns, costCacheName, api.ReasonImageCacheCreate)
	if ic.Status.Status != api.ActionStatusSucceeded || int(ic.Status.Counts.Succeeded) != pairs {
		t.Fatalf("create of %d images: %s %+v", cc.images, ic.Status.Status, ic.Status.Counts)
	}
	c.eventually(cc.ns+": the create's pre-pull pods are gone", func() bool { return c.noPrepullPods(cc.ns) })
	cost := c.costSince(mark, cc.ns)
	t.Logf("API cost of the create of %d images, %s", cc.images, cost.perPair(pairs))
	per := func(n int) float64 { return float64(n) / float64(pairs) }
	if got := per(cost.controller + cost.kubelet); got > cc.requests {
		t.Errorf("the create of %d images cost %.2f requests per (node, image), more than %.1f", cc.images, got, cc.requests)
	}
	if got := per(cost.controller); got > cc.controller {
		t.Errorf("the create of %d images cost the controller %.2f requests per (node, image), more than %.1f", cc.images, got, cc.controller)
	}
	if got := per(cost.events); got > cc.events {
		t.Errorf("the create of %d images wrote %.2f Events per (node, image), more than %.1f", cc.images, got, cc.events)
	}
	for _, n := range []string{"node-a", "node-b"} {
		c.mustHaveImage(n, images[len(images)-1], true)
		c.mustHaveRecord(n, cc.ns+"/regcred")
	}
}
