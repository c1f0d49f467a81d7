package pullmanager

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pullrecords/pullrecords/accessor"
)

var cmpSorted = cmpopts.SortSlices(func(a, b string) bool { return a < b })

func storedRefs(s *fakeStore) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for ref := range s.records {
		out = append(out, ref)
	}
	return out
}

// TestPruneUnknownRecords covers facts §4.10.
func TestPruneUnknownRecords(t *testing.T) {
	ctx, _ := testCtx(t)
	store := newFakeStore()
	until := t0.Add(time.Hour)
	for ref, at := range map[string]time.Time{
		"old-unknown":   t0,
		"old-known":     t0,
		"at-until":      until,
		"new-unknown":   until.Add(time.Second),
		"second-before": until.Add(-time.Second),
	} {
		store.records[ref] = rec(ref, at, nil).ForStorage()
	}
	store.intents["some-intent"] = true
	metrics := NewMetrics()
	m, _ := newTestManager(t, store, mustPolicy(t, AlwaysVerify), WithMetrics(metrics))
	m.PruneUnknownRecords(ctx, []string{"old-known"}, until)
	if diff := cmp.Diff([]string{"old-known", "at-until", "new-unknown"}, storedRefs(store), cmpSorted); diff != "" {
		t.Errorf("records left (-want +got):\n%s", diff)
	}
	if !store.hasIntent("some-intent") {
		t.Error("intents must never be pruned")
	}
	if got := counterValue(metrics.records); got != 3 {
		t.Errorf("record gauge = %v, want 3", got)
	}
}

// refreshingStore refreshes a record right after the prune listed it, as a
// concurrent pull would.
type refreshingStore struct {
	*fakeStore
	refresh func()
}

func (s *refreshingStore) ListImagePulledRecords() ([]*accessor.ImagePulledRecord, error) {
	out, err := s.fakeStore.ListImagePulledRecords()
	s.refresh()
	return out, err
}

// TestPruneKeepsRefreshedRecord: the prune re-reads each record under its
// lock, so a record refreshed after the list is kept (upstream holds a global
// lock instead).
func TestPruneKeepsRefreshedRecord(t *testing.T) {
	ctx, _ := testCtx(t)
	fs := newFakeStore()
	fs.records["ref1"] = rec("ref1", t0, nil).ForStorage()
	fs.records["ref2"] = rec("ref2", t0, nil).ForStorage()
	store := &refreshingStore{fakeStore: fs}
	m, clk := newTestManager(t, store, mustPolicy(t, AlwaysVerify))
	store.refresh = func() {
		clk.Step(2 * time.Hour)
		m.RecordImagePulled(ctx, imgX, "ref1", &accessor.ImagePullCredentials{NodePodsAccessible: true})
	}
	m.PruneUnknownRecords(ctx, nil, t0.Add(time.Hour))
	if diff := cmp.Diff([]string{"ref1"}, storedRefs(fs), cmpSorted); diff != "" {
		t.Errorf("records left (-want +got):\n%s", diff)
	}
}

// TestPruneErrors: list and delete errors are logged, the rest proceeds.
func TestPruneErrors(t *testing.T) {
	ctx, _ := testCtx(t)
	store := newFakeStore()
	store.records["ref1"] = rec("ref1", t0, nil).ForStorage()
	m, _ := newTestManager(t, store, mustPolicy(t, AlwaysVerify))
	store.setFail("DeleteImagePulledRecord", errInjected)
	m.PruneUnknownRecords(ctx, nil, t0.Add(time.Hour))
	if store.record("ref1") == nil {
		t.Error("record vanished although delete failed")
	}
	store.setFail("DeleteImagePulledRecord", nil)
	store.setFail("ListImagePulledRecords", errInjected)
	m.PruneUnknownRecords(ctx, nil, t0.Add(time.Hour))
	if store.record("ref1") == nil {
		t.Error("record vanished although the list failed")
	}
}
