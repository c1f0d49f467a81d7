package pullmanager

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/memstore"
)

var cmpSorted = cmpopts.SortSlices(func(a, b string) bool { return a < b })

// TestPruneUnknownRecords covers the kubelet's PruneUnknownRecords
// (pkg/kubelet/images/pullmanager/image_pull_manager.go): a record is
// deleted when updated before until and its imageRef is not in the list.
func TestPruneUnknownRecords(t *testing.T) {
	ctx, _ := testCtx(t)
	store := newFaultyStore()
	until := t0.Add(time.Hour)
	for ref, at := range map[string]time.Time{
		"old-unknown":   t0,
		"old-known":     t0,
		"at-until":      until,
		"new-unknown":   until.Add(time.Second),
		"second-before": until.Add(-time.Second),
	} {
		putRecords(t, store, rec(ref, at, nil))
	}
	putIntents(t, store, "some-intent")
	metrics := NewMetrics()
	m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, AlwaysVerify), WithMetrics(metrics))
	m.PruneUnknownRecords(ctx, []string{"old-known"}, until)
	if diff := cmp.Diff([]string{"old-known", "at-until", "new-unknown"}, storedRefs(t, store.Inner()), cmpSorted); diff != "" {
		t.Errorf("records left (-want +got):\n%s", diff)
	}
	if !hasIntent(t, store, "some-intent") {
		t.Error("intents must never be pruned")
	}
	if got := counterValue(metrics.records); got != 3 {
		t.Errorf("record gauge = %v, want 3", got)
	}
}

// refreshingStore refreshes a record right after the prune listed it, as a
// concurrent pull would.
type refreshingStore struct {
	*memstore.Store
	refresh func()
}

func (s *refreshingStore) ListImagePulledRecords() ([]*accessor.ImagePulledRecord, error) {
	out, err := s.Store.ListImagePulledRecords()
	s.refresh()
	return out, err
}

// TestPruneKeepsRefreshedRecord: the prune re-reads each record under its
// lock, so a record refreshed after the list is kept (upstream holds a global
// lock instead).
func TestPruneKeepsRefreshedRecord(t *testing.T) {
	ctx, _ := testCtx(t)
	store := &refreshingStore{Store: memstore.New()}
	for _, ref := range []string{"ref1", "ref2"} {
		if err := store.WriteImagePulledRecord(klog.Background(), rec(ref, t0, nil)); err != nil {
			t.Fatal(err)
		}
	}
	m, clk := newTestManager(t, store, mustPolicy(t, AlwaysVerify))
	store.refresh = func() {
		clk.Step(2 * time.Hour)
		m.RecordImagePulled(ctx, imgX, "ref1", &accessor.ImagePullCredentials{NodePodsAccessible: true})
	}
	m.PruneUnknownRecords(ctx, nil, t0.Add(time.Hour))
	if diff := cmp.Diff([]string{"ref1"}, storedRefs(t, store.Store), cmpSorted); diff != "" {
		t.Errorf("records left (-want +got):\n%s", diff)
	}
}

// TestPruneErrors: list and delete errors are logged, the rest proceeds.
func TestPruneErrors(t *testing.T) {
	ctx, _ := testCtx(t)
	store := newFaultyStore()
	putRecords(t, store, rec("ref1", t0, nil))
	m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, AlwaysVerify))
	setFail(store, "DeleteImagePulledRecord", errInjected)
	m.PruneUnknownRecords(ctx, nil, t0.Add(time.Hour))
	if storedRecord(t, store, "ref1") == nil {
		t.Error("record vanished although delete failed")
	}
	setFail(store, "DeleteImagePulledRecord", nil)
	setFail(store, "ListImagePulledRecords", errInjected)
	m.PruneUnknownRecords(ctx, nil, t0.Add(time.Hour))
	if storedRecord(t, store, "ref1") == nil {
		t.Error("record vanished although the list failed")
	}
}

// PruneImagePulledRecord deletes a record only while the runtime still lacks
// the image, asked under the record's lock: a pull of the same content that
// finished meanwhile keeps its record.
func TestPruneImagePulledRecord(t *testing.T) {
	ctx, logger := testCtx(t)
	store := newFaultyStore()
	m, clk := newTestManager(t, store.Accessor(), mustPolicy(t, NeverVerifyPreloadedImages))
	for _, ref := range []string{"sha256:gone", "sha256:back"} {
		if err := store.WriteImagePulledRecord(logger, rec(ref, clk.Now(), map[string]accessor.ImagePullCredentials{"registry.example/a": {NodePodsAccessible: true}})); err != nil {
			t.Fatal(err)
		}
	}
	asked := 0
	answer := func(gone bool) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) { asked++; return gone, nil }
	}
	if err := m.PruneImagePulledRecord(ctx, "sha256:gone", answer(true)); err != nil {
		t.Fatal(err)
	}
	if err := m.PruneImagePulledRecord(ctx, "sha256:back", answer(false)); err != nil {
		t.Fatal(err)
	}
	if err := m.PruneImagePulledRecord(ctx, "sha256:absent", answer(true)); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := store.GetImagePulledRecord("sha256:gone"); found {
		t.Error("record of a removed image was kept")
	}
	if _, found, _ := store.GetImagePulledRecord("sha256:back"); !found {
		t.Error("record of an image the runtime has again was deleted")
	}
	if asked != 2 {
		t.Errorf("runtime asked %d times, want 2 (not for a missing record)", asked)
	}
	boom := errors.New("runtime down")
	if err := m.PruneImagePulledRecord(ctx, "sha256:back", func(context.Context) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("runtime error: %v, want it returned", err)
	}
}
