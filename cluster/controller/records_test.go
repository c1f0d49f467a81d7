package controller

import (
	"testing"

	"k8s.io/client-go/util/workqueue"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// A pull record added while a node sync runs (a pre-pull pod created, or
// one finished, by a cache sync meanwhile) survives that sync even though
// its spec does not hold it; one the sync used and did not keep goes.
func TestRecordsAddedDuringANodeSyncSurvive(t *testing.T) {
	c := &Controller{records: map[string]map[recordKey]api.PullRecord{},
		nodeQueue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	defer c.nodeQueue.ShutDown()
	stale := api.PullRecord{Cache: "ns/gone", CacheUID: "u0", Batch: "b0"}
	c.addRecord("n", "old:1", stale)
	_, used := c.nodeRecords("n", nil)
	marker := api.PullRecord{Cache: "ns/c", CacheUID: "u1", Batch: "b1"}
	c.addRecord("n", "new:1", marker) // after the sync read its records
	c.forgetRecords("n", api.NodeImagesSpec{}, used)
	if _, ok := c.records["n"][recordKey{"new:1", "u1"}]; !ok {
		t.Error("a record added during the sync was forgotten: the pull it marks could never be purged")
	}
	if _, ok := c.records["n"][recordKey{"old:1", "u0"}]; ok {
		t.Error("a record the sync used and did not keep is still remembered")
	}
	// Changed during the sync (the pod's pull succeeded): kept too.
	_, used = c.nodeRecords("n", nil)
	pulled := marker
	pulled.ImageRef = "reg/new@sha256:aa"
	c.addRecord("n", "new:1", pulled)
	c.forgetRecords("n", api.NodeImagesSpec{}, used)
	if got := c.records["n"][recordKey{"new:1", "u1"}]; got != pulled {
		t.Errorf("record after a change during the sync: %+v, want %+v", got, pulled)
	}
}
