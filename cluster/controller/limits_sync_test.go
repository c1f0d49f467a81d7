package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// A node that refuses a cache answers no request as pulled or present:
// pulls fail, purges say the node holds nothing of the cache.
func TestRefusedResultsNeverSayPresent(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	ic := cacheOf("t", "c", "b", api.CacheSpecImages{Images: imagesN("a", 3)})
	ic.Status.Reason = api.ReasonImageCacheCreate
	for _, res := range refusedResults(nodeRequests(ic, node), t0) {
		if res.Status != "failed" || res.Reason != ReasonNodeImageLimit || !strings.Contains(res.Message, "per-node limit") {
			t.Fatalf("%+v", res)
		}
	}
	ic.Status.Reason = api.ReasonImageCachePurge
	for _, res := range refusedResults(nodeRequests(ic, node), t0) {
		if res.Status != "succeeded" || res.Reason != ReasonNodeImageLimit {
			t.Fatalf("%+v", res)
		}
	}
	st := aggregateCount(ic, 3, refusedResults(nodeRequests(ic, node), t0), 0, 0, 10)
	if st.Counts.AlreadyPulled != 0 {
		t.Fatalf("%+v", st.Counts)
	}
}
