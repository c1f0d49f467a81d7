package controller

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// A node that refuses a cache answers no image as pulled or present:
// pulls fail, purges say the node holds nothing of the cache.
func TestRefusedResultsNeverSayPresent(t *testing.T) {
	ic := cacheOf("t", "c", "b", api.CacheSpecImages{Images: imagesN("a", 3)})
	ic.Status.Reason = api.ReasonImageCacheCreate
	if o := refusedOutcome(ic); o.Status != api.WorkFailed || o.Reason != ReasonNodeImageLimit || !strings.Contains(o.Message, "per-node limit") {
		t.Fatalf("create: %+v", o)
	}
	ic.Status.Reason = api.ReasonImageCachePurge
	o := refusedOutcome(ic)
	if o.Status != api.WorkSucceeded || o.Reason != ReasonNodeImageLimit {
		t.Fatalf("purge: %+v", o)
	}
	tl := newTally(10)
	for _, img := range imagesN("a", 3) {
		tl.add("n", img, o)
	}
	if st := tl.status(ic, 3, 0, 0); st.Counts.AlreadyPulled != 0 || st.Counts.Succeeded != 3 {
		t.Fatalf("%+v", st.Counts)
	}
}

// A large cache failing on many nodes lists at most maxFailuresListed
// failures in its status; the others are counted.
func TestTallyBoundsFailuresListed(t *testing.T) {
	ic := cacheOf("t", "c", "b", api.CacheSpecImages{Images: imagesN("a", 1000)})
	ic.Status.Reason = api.ReasonImageCacheCreate
	tl := newTally(10)
	total := 0
	for n := 0; n < 20; n++ {
		for _, img := range imagesN("a", 1000) {
			tl.add(fmt.Sprintf("n%02d", n), img, refusedOutcome(ic))
			total++
		}
	}
	st := tl.status(ic, total, 0, 0)
	listed := 0
	for _, fs := range st.Failures {
		listed += len(fs)
	}
	if listed != maxFailuresListed || int(st.Counts.FailuresOmitted) != total-maxFailuresListed || st.Status != api.ActionStatusFailed {
		t.Fatalf("listed %d, omitted %d of %d, status %s", listed, st.Counts.FailuresOmitted, total, st.Status)
	}
}
