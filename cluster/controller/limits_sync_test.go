package controller

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/imagecache"
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

// A large cache failing on many nodes lists at most maxFailuresListed
// failures in its status; the others are counted.
func TestAggregateBoundsFailuresListed(t *testing.T) {
	ic := cacheOf("t", "c", "b", api.CacheSpecImages{Images: imagesN("a", 1000)})
	ic.Status.Reason = api.ReasonImageCacheCreate
	var results []imagecache.ImageWorkResult
	for n := 0; n < 20; n++ {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%02d", n)}}
		results = append(results, refusedResults(nodeRequests(ic, node), t0)...)
	}
	st := aggregateCount(ic, len(results), results, 0, 0, 10)
	listed := 0
	for _, fs := range st.Failures {
		listed += len(fs)
	}
	if listed != maxFailuresListed || int(st.Counts.FailuresOmitted) != len(results)-maxFailuresListed || st.Status != api.ActionStatusFailed {
		t.Fatalf("listed %d, omitted %d of %d, status %s", listed, st.Counts.FailuresOmitted, len(results), st.Status)
	}
}
