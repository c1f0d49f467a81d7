package controller

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/cluster/api"
)

func TestTallyCapsFailuresPerImageAndKeepsCounts(t *testing.T) {
	ic := &api.ImageCache{}
	ic.Status.Reason = api.ReasonImageCacheCreate
	tl := newTally(10)
	for i := 0; i < 1000; i++ {
		o := api.Outcome{Status: api.WorkFailed, Reason: "ErrImagePull", Message: "401"}
		if i%2 == 0 {
			o = api.Outcome{Status: api.WorkSucceeded}
		}
		tl.add(fmt.Sprintf("node-%04d", i), "img:1", o)
	}
	st := tl.status(ic, 1000, 0, 0)
	if st.Status != api.ActionStatusFailed {
		t.Errorf("status %q, want Failed", st.Status)
	}
	got := st.Failures["img:1"]
	if len(got) != 10 || got[0].Node != "node-0001" || got[9].Node != "node-0019" {
		t.Errorf("failures listed %+v, want the first 10 nodes by name", got)
	}
	want := api.ResultCounts{Desired: 1000, Succeeded: 500, Failed: 500, FailuresOmitted: 490}
	if diff := cmp.Diff(want, *st.Counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if st := tl.status(ic, 1001, 0, 0); st.Status != api.ActionStatusProcessing || st.CompletionTime != nil {
		t.Errorf("a pair without result: %q, want Processing", st.Status)
	}
	if st := tl.status(ic, 1000, 0, 1); st.Status != api.ActionStatusProcessing {
		t.Errorf("a result not yet on its node's object: %q, want Processing", st.Status)
	}
	if st := tl.status(ic, 1002, 2, 0); st.Counts.InFlight != 2 {
		t.Errorf("in flight %d, want 2", st.Counts.InFlight)
	}
	if st := newTally(10).status(ic, 0, 0, 0); st.Status != api.ActionStatusNoImagesPulledOrDeleted {
		t.Errorf("nothing to do: %q", st.Status)
	}
}

// A tally's status is the same whatever other caches' or earlier
// statuses left: it starts from the cache's status but replaces its
// failures and counts.
func TestTallyReplacesEarlierFailures(t *testing.T) {
	ic := &api.ImageCache{}
	ic.Status = api.ImageCacheStatus{Reason: api.ReasonImageCacheRefresh, Status: api.ActionStatusFailed,
		Failures: map[string]api.NodeReasonMessageList{"old:1": {{Node: "n", Reason: "ErrImagePull"}}}}
	tl := newTally(10)
	tl.add("n", "a:1", api.Outcome{Status: api.WorkAlreadyPulled})
	st := tl.status(ic, 1, 0, 0)
	if st.Status != api.ActionStatusSucceeded || st.Failures != nil || st.Counts.AlreadyPulled != 1 {
		t.Errorf("status %+v", st)
	}
	if ic.Status.Failures["old:1"] == nil {
		t.Error("status changed the cache it was computed from")
	}
}

func TestTallyPurgeSummary(t *testing.T) {
	ic := &api.ImageCache{}
	ic.Status.Reason = api.ReasonImageCachePurge
	tl := newTally(10)
	tl.add("n1", "a:1", api.Outcome{Status: api.WorkSucceeded, Message: "removed from the runtime"})
	tl.add("n1", "b:1", kept(reasonKept, fmt.Sprintf(msgKeptByOtherCache, "t/x")))
	tl.add("n2", "b:1", kept(reasonKept, fmt.Sprintf(msgKeptByOtherCache, "t/y, t/z")))
	tl.add("n2", "a:1", kept(reasonNotPulled, msgFoundPresent))
	st := tl.status(ic, 4, 0, 0)
	want := "1 image(s) this cache pulled removed from the selected nodes; the others stay: " +
		"kept: another ImageCache keeps it (2); not removed: the cache found it present, did not pull it (1)."
	if st.Status != api.ActionStatusSucceeded || st.Message != want {
		t.Errorf("purge: %s %q\nwant %q", st.Status, st.Message, want)
	}
	all := newTally(10)
	all.add("n1", "a:1", api.Outcome{Status: api.WorkSucceeded})
	if st := all.status(ic, 1, 0, 0); st.Message != "Every image this cache pulled was removed from the selected nodes." {
		t.Errorf("every image removed: %q", st.Message)
	}
	failed := newTally(10)
	failed.add("n1", "a:1", api.Outcome{Status: api.WorkFailed, Reason: "ImageDeleteFailed", Message: "in use"})
	if st := failed.status(ic, 1, 0, 0); st.Status != api.ActionStatusFailed || st.Message != "Some images could not be removed from some nodes; see failures." {
		t.Errorf("a failed removal: %s %q", st.Status, st.Message)
	}
}
