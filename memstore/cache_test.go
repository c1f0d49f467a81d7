package memstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
)

func newTestCache(t *testing.T, d accessor.PullRecordsAccessor, opts ...CacheOption) *Cache {
	t.Helper()
	c, err := NewCache(ktesting.NewLogger(t, ktesting.NewConfig()), d, opts...)
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	return c
}

func mustWriteRecord(t *testing.T, s accessor.PullRecordsAccessor, r *accessor.ImagePulledRecord) {
	t.Helper()
	if err := s.WriteImagePulledRecord(ktesting.NewLogger(t, ktesting.NewConfig()), r); err != nil {
		t.Fatalf("WriteImagePulledRecord(%s): %v", r.ImageRef, err)
	}
}

func mustWriteIntent(t *testing.T, s accessor.PullRecordsAccessor, image string) {
	t.Helper()
	if err := s.WriteImagePullIntent(ktesting.NewLogger(t, ktesting.NewConfig()), image); err != nil {
		t.Fatalf("WriteImagePullIntent(%s): %v", image, err)
	}
}

var errInjected = errors.New("injected failure")

// newFaultyDelegate returns an empty Store behind accessortest.Faulty, to be
// handed to a Cache as it is: without the Store's optional interfaces, so
// the cache counts its own entries and warms up from lists.
func newFaultyDelegate() (*accessortest.FaultyAccessor, *Store) {
	inner := New()
	return accessortest.Faulty(inner), inner
}

// injected is the error a delegate fault on method returns.
func injected(method string) error {
	return fmt.Errorf("%s: %w", method, errInjected)
}

// yieldInWrites makes every write and delete that reaches d yield the
// processor before it reaches the store, to widen races.
func yieldInWrites(d *accessortest.FaultyAccessor) {
	d.OnCall(func(c accessortest.Call) {
		if strings.HasPrefix(c.Method, "Write") || strings.HasPrefix(c.Method, "Delete") {
			runtime.Gosched()
		}
	})
}

// wantCalls checks the calls that reached d since the last check, and
// empties d's log.
func wantCalls(t *testing.T, d *accessortest.FaultyAccessor, want ...string) {
	t.Helper()
	var got []string
	for _, c := range d.TakeCalls() {
		got = append(got, c.String())
	}
	if diff := cmp.Diff(want, got, cmpEmptyStrings); diff != "" {
		t.Errorf("calls that reached the delegate (-want +got):\n%s", diff)
	}
}

var cmpEmptyStrings = cmp.Comparer(func(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
})

func TestCacheAuthoritativeAnswersFromMemory(t *testing.T) {
	d, inner := newFaultyDelegate()
	mustWriteRecord(t, inner, accessortest.NewRecord("sha256:a", "example.com/a"))
	mustWriteRecord(t, inner, accessortest.NewNodeAccessibleRecord("sha256:b", "example.com/b"))
	mustWriteIntent(t, inner, "example.com/a:1")
	c := newTestCache(t, d)
	wantCalls(t, d, "ListImagePullIntents", "ListImagePulledRecords")
	if !c.Authoritative() {
		t.Fatal("Authoritative() = false after a clean warm-up")
	}

	for _, ref := range []string{"sha256:a", "sha256:b"} {
		if _, ok, err := c.GetImagePulledRecord(ref); !ok || err != nil {
			t.Errorf("GetImagePulledRecord(%s) = _, %v, %v; want found", ref, ok, err)
		}
		if _, ok, err := c.PeekImagePulledRecord(ref); !ok || err != nil {
			t.Errorf("PeekImagePulledRecord(%s) = _, %v, %v; want found", ref, ok, err)
		}
	}
	if r, ok, err := c.GetImagePulledRecord("sha256:missing"); r != nil || ok || err != nil {
		t.Errorf("GetImagePulledRecord(missing) = %v, %v, %v", r, ok, err)
	}
	if r, ok, err := c.PeekImagePulledRecord("sha256:missing"); r != nil || ok || err != nil {
		t.Errorf("PeekImagePulledRecord(missing) = %v, %v, %v", r, ok, err)
	}
	if ok, err := c.ImagePullIntentExists("example.com/a:1"); !ok || err != nil {
		t.Errorf("ImagePullIntentExists(hit) = %v, %v", ok, err)
	}
	if ok, err := c.ImagePullIntentExists("example.com/missing:1"); ok || err != nil {
		t.Errorf("ImagePullIntentExists(miss) = %v, %v", ok, err)
	}
	if l, err := c.ListImagePulledRecords(); len(l) != 2 || err != nil {
		t.Errorf("ListImagePulledRecords = %d records, %v; want 2", len(l), err)
	}
	if l, err := c.ListImagePullIntents(); len(l) != 1 || err != nil {
		t.Errorf("ListImagePullIntents = %d intents, %v; want 1", len(l), err)
	}
	wantCalls(t, d) // nothing reached the delegate

	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	mustWriteRecord(t, c, accessortest.NewRecord("sha256:c", "example.com/c"))
	mustWriteIntent(t, c, "example.com/c:1")
	if err := c.DeleteImagePulledRecord(logger, "sha256:a"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteImagePullIntent(logger, "example.com/a:1"); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, d, "WriteImagePulledRecord sha256:c", "WriteImagePullIntent example.com/c:1",
		"DeleteImagePulledRecord sha256:a", "DeleteImagePullIntent example.com/a:1")

	// The writes are visible without asking the delegate again.
	if _, ok, _ := c.GetImagePulledRecord("sha256:c"); !ok {
		t.Error("written record not found")
	}
	if _, ok, _ := c.GetImagePulledRecord("sha256:a"); ok {
		t.Error("deleted record still found")
	}
	if ok, _ := c.ImagePullIntentExists("example.com/c:1"); !ok {
		t.Error("written intent not found")
	}
	if ok, _ := c.ImagePullIntentExists("example.com/a:1"); ok {
		t.Error("deleted intent still found")
	}
	wantCalls(t, d)
	if got, want := c.CountImagePulledRecords(), 2; got != want {
		t.Errorf("CountImagePulledRecords = %d; want %d", got, want)
	}
	if got, want := c.CountImagePullIntents(), 1; got != want {
		t.Errorf("CountImagePullIntents = %d; want %d", got, want)
	}
}

func TestCacheInvalidKeysDoNotReachDelegate(t *testing.T) {
	d, _ := newFaultyDelegate()
	c := newTestCache(t, d)
	d.TakeCalls()
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	if err := c.WriteImagePullIntent(logger, ""); !errors.Is(err, accessor.ErrInvalidKey) {
		t.Errorf("WriteImagePullIntent(\"\") = %v; want ErrInvalidKey", err)
	}
	if err := c.WriteImagePulledRecord(logger, accessortest.NewRecord("\xff")); !errors.Is(err, accessor.ErrInvalidKey) {
		t.Errorf("WriteImagePulledRecord(\\xff) = %v; want ErrInvalidKey", err)
	}
	if err := c.WriteImagePulledRecord(logger, nil); !errors.Is(err, accessor.ErrNilRecord) {
		t.Errorf("WriteImagePulledRecord(nil) = %v; want ErrNilRecord", err)
	}
	wantCalls(t, d)
}

func TestCacheWarmUpErrorReadsThrough(t *testing.T) {
	d, inner := newFaultyDelegate()
	good := accessortest.NewRecord("sha256:good", "example.com/good")
	mustWriteRecord(t, inner, good)
	mustWriteRecord(t, inner, accessortest.NewRecord("sha256:corrupt", "example.com/corrupt"))
	mustWriteIntent(t, inner, "example.com/good:1")
	d.Corrupt("sha256:corrupt")

	c := newTestCache(t, d)
	d.TakeCalls()
	if c.Authoritative() {
		t.Fatal("Authoritative() = true after a warm-up list error")
	}
	if !c.intents.Load().authoritative {
		t.Error("intents are not authoritative though their list succeeded")
	}
	if c.records.Load().authoritative {
		t.Error("records are authoritative though their list failed")
	}

	// A record the warm-up got is a hit.
	got, ok, err := c.GetImagePulledRecord("sha256:good")
	if !ok || err != nil {
		t.Fatalf("GetImagePulledRecord(good) = _, %v, %v", ok, err)
	}
	if diff := accessortest.DiffRecords(good, got); diff != "" {
		t.Errorf("GetImagePulledRecord(good) (-want +got):\n%s", diff)
	}
	wantCalls(t, d)

	// The corrupt record is reported as existing with an error, every time:
	// errors are not cached.
	for range 2 {
		r, ok, err := c.GetImagePulledRecord("sha256:corrupt")
		if r != nil || !ok || !errors.Is(err, accessor.ErrCorrupt) {
			t.Errorf("GetImagePulledRecord(corrupt) = %v, %v, %v; want nil, true, ErrCorrupt", r, ok, err)
		}
		r, ok, err = c.PeekImagePulledRecord("sha256:corrupt")
		if r != nil || !ok || !errors.Is(err, accessor.ErrCorrupt) {
			t.Errorf("PeekImagePulledRecord(corrupt) = %v, %v, %v; want nil, true, ErrCorrupt", r, ok, err)
		}
	}
	wantCalls(t, d, "GetImagePulledRecord sha256:corrupt", "GetImagePulledRecord sha256:corrupt",
		"GetImagePulledRecord sha256:corrupt", "GetImagePulledRecord sha256:corrupt")

	// A miss asks the delegate, every time, since it may appear behind us.
	for range 2 {
		if _, ok, err := c.GetImagePulledRecord("sha256:absent"); ok || err != nil {
			t.Errorf("GetImagePulledRecord(absent) = _, %v, %v", ok, err)
		}
	}
	wantCalls(t, d, "GetImagePulledRecord sha256:absent", "GetImagePulledRecord sha256:absent")

	// A record that appears in the delegate is found and then cached.
	late := accessortest.NewRecord("sha256:late", "example.com/late")
	mustWriteRecord(t, inner, late)
	for range 2 {
		got, ok, err := c.GetImagePulledRecord("sha256:late")
		if !ok || err != nil {
			t.Fatalf("GetImagePulledRecord(late) = _, %v, %v", ok, err)
		}
		if diff := accessortest.DiffRecords(late, got); diff != "" {
			t.Errorf("GetImagePulledRecord(late) (-want +got):\n%s", diff)
		}
	}
	wantCalls(t, d, "GetImagePulledRecord sha256:late")

	// A delegate read error is returned and not cached.
	d.Fail("GetImagePulledRecord", injected("GetImagePulledRecord"))
	if _, _, err := c.GetImagePulledRecord("sha256:absent"); !errors.Is(err, errInjected) {
		t.Errorf("GetImagePulledRecord with failing delegate = %v; want injected error", err)
	}
	d.Heal("GetImagePulledRecord")
	d.TakeCalls()

	// Lists go to the delegate and carry its error.
	list, err := c.ListImagePulledRecords()
	var listErr *accessor.ListError
	if !errors.As(err, &listErr) || len(listErr.Errs) != 1 {
		t.Errorf("ListImagePulledRecords error = %v; want a ListError with one entry", err)
	}
	if diff := cmp.Diff([]string{"sha256:good", "sha256:late"}, accessortest.RecordRefs(list)); diff != "" {
		t.Errorf("ListImagePulledRecords (-want +got):\n%s", diff)
	}
	// Intents stay authoritative.
	if ok, _ := c.ImagePullIntentExists("example.com/absent:1"); ok {
		t.Error("absent intent found")
	}
	wantCalls(t, d, "ListImagePulledRecords")

	// Reload while the file is still corrupt: still not authoritative, and
	// the error is returned.
	if err := c.Reload(context.Background()); !errors.As(err, &listErr) {
		t.Errorf("Reload = %v; want a ListError", err)
	}
	if c.Authoritative() {
		t.Error("Authoritative() = true after a failing Reload")
	}

	// Once repaired (the fsck quarantines the file), Reload makes the cache
	// authoritative again and misses stop reaching the delegate.
	d.Repair("sha256:corrupt")
	if err := inner.DeleteImagePulledRecord(ktesting.NewLogger(t, ktesting.NewConfig()), "sha256:corrupt"); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(context.Background()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if !c.Authoritative() {
		t.Fatal("Authoritative() = false after a clean Reload")
	}
	d.TakeCalls()
	if _, ok, err := c.GetImagePulledRecord("sha256:corrupt"); ok || err != nil {
		t.Errorf("GetImagePulledRecord(repaired) = _, %v, %v; want not found", ok, err)
	}
	if _, ok, err := c.GetImagePulledRecord("sha256:late"); !ok || err != nil {
		t.Errorf("GetImagePulledRecord(late) = _, %v, %v; want found", ok, err)
	}
	wantCalls(t, d)
}

func TestCacheWarmUpIntentErrorReadsThrough(t *testing.T) {
	d, inner := newFaultyDelegate()
	mustWriteIntent(t, inner, "example.com/a:1")
	d.Fail("ListImagePullIntents", injected("ListImagePullIntents"))
	c := newTestCache(t, d)
	d.Heal("ListImagePullIntents")
	d.TakeCalls()
	if c.intents.Load().authoritative || !c.records.Load().authoritative {
		t.Fatalf("authoritative intents=%v records=%v; want false, true",
			c.intents.Load().authoritative, c.records.Load().authoritative)
	}
	for range 2 {
		if ok, err := c.ImagePullIntentExists("example.com/a:1"); !ok || err != nil {
			t.Errorf("ImagePullIntentExists(a) = %v, %v; want true", ok, err)
		}
		if ok, err := c.ImagePullIntentExists("example.com/b:1"); ok || err != nil {
			t.Errorf("ImagePullIntentExists(b) = %v, %v; want false", ok, err)
		}
	}
	// The found intent is cached; the miss asks every time.
	wantCalls(t, d, "ImagePullIntentExists example.com/a:1", "ImagePullIntentExists example.com/b:1",
		"ImagePullIntentExists example.com/b:1")
	d.Fail("ImagePullIntentExists", injected("ImagePullIntentExists"))
	if _, err := c.ImagePullIntentExists("example.com/b:1"); !errors.Is(err, errInjected) {
		t.Errorf("ImagePullIntentExists with failing delegate = %v; want injected error", err)
	}
	if l, err := c.ListImagePullIntents(); len(l) != 1 || err != nil {
		t.Errorf("ListImagePullIntents = %d, %v; want 1 intent from the delegate", len(l), err)
	}
}

func TestCacheReloadSeesChangesUnderneath(t *testing.T) {
	d, inner := newFaultyDelegate()
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	old := accessortest.NewRecord("sha256:edited", "example.com/old")
	mustWriteRecord(t, inner, old)
	mustWriteRecord(t, inner, accessortest.NewRecord("sha256:removed", "example.com/removed"))
	mustWriteIntent(t, inner, "example.com/removed:1")
	c := newTestCache(t, d)

	// An operator edits the store behind the cache's back.
	edited := accessortest.NewNodeAccessibleRecord("sha256:edited", "example.com/new")
	added := accessortest.NewRecord("sha256:added", "example.com/added")
	mustWriteRecord(t, inner, edited)
	mustWriteRecord(t, inner, added)
	mustWriteIntent(t, inner, "example.com/added:1")
	if err := inner.DeleteImagePulledRecord(logger, "sha256:removed"); err != nil {
		t.Fatal(err)
	}
	if err := inner.DeleteImagePullIntent(logger, "example.com/removed:1"); err != nil {
		t.Fatal(err)
	}

	// Until Reload, the authoritative cache still answers from memory.
	if got, _, _ := c.GetImagePulledRecord("sha256:edited"); accessortest.DiffRecords(old, got) != "" {
		t.Errorf("before Reload: got %+v; want the old record", got)
	}
	if _, ok, _ := c.GetImagePulledRecord("sha256:added"); ok {
		t.Error("before Reload: added record already visible")
	}

	if err := c.Reload(context.Background()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	wantRecords := []*accessor.ImagePulledRecord{added, edited}
	list, err := c.ListImagePulledRecords()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"sha256:added", "sha256:edited"}, accessortest.RecordRefs(list)); diff != "" {
		t.Errorf("ListImagePulledRecords after Reload (-want +got):\n%s", diff)
	}
	for _, want := range wantRecords {
		got, ok, err := c.GetImagePulledRecord(want.ImageRef)
		if !ok || err != nil {
			t.Errorf("GetImagePulledRecord(%s) = _, %v, %v", want.ImageRef, ok, err)
			continue
		}
		if diff := accessortest.DiffRecords(want, got); diff != "" {
			t.Errorf("GetImagePulledRecord(%s) after Reload (-want +got):\n%s", want.ImageRef, diff)
		}
	}
	if _, ok, _ := c.GetImagePulledRecord("sha256:removed"); ok {
		t.Error("removed record still visible after Reload")
	}
	intents, _ := c.ListImagePullIntents()
	if diff := cmp.Diff([]string{"example.com/added:1"}, accessortest.IntentImages(intents)); diff != "" {
		t.Errorf("ListImagePullIntents after Reload (-want +got):\n%s", diff)
	}
	if got := c.CountImagePulledRecords(); got != 2 {
		t.Errorf("CountImagePulledRecords after Reload = %d; want 2", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Reload(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Reload(cancelled) = %v; want context.Canceled", err)
	}
}

func TestCacheDelegateFailuresLeaveCacheUnchanged(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	old := accessortest.NewRecord("sha256:a", "example.com/old")
	tests := []struct {
		name   string
		method string
		do     func(c *Cache) error
	}{
		{"write record", "WriteImagePulledRecord", func(c *Cache) error {
			return c.WriteImagePulledRecord(logger, accessortest.NewRecord("sha256:a", "example.com/new"))
		}},
		{"write new record", "WriteImagePulledRecord", func(c *Cache) error {
			return c.WriteImagePulledRecord(logger, accessortest.NewRecord("sha256:new"))
		}},
		{"delete record", "DeleteImagePulledRecord", func(c *Cache) error {
			return c.DeleteImagePulledRecord(logger, "sha256:a")
		}},
		{"write intent", "WriteImagePullIntent", func(c *Cache) error {
			return c.WriteImagePullIntent(logger, "example.com/new:1")
		}},
		{"delete intent", "DeleteImagePullIntent", func(c *Cache) error {
			return c.DeleteImagePullIntent(logger, "example.com/a:1")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, inner := newFaultyDelegate()
			mustWriteRecord(t, inner, old)
			mustWriteIntent(t, inner, "example.com/a:1")
			c := newTestCache(t, d)
			d.Fail(tc.method, injected(tc.method))
			if err := tc.do(c); !errors.Is(err, errInjected) {
				t.Fatalf("%s = %v; want the delegate's error", tc.method, err)
			}
			d.TakeCalls()
			records, _ := c.ListImagePulledRecords()
			if len(records) != 1 || accessortest.DiffRecords(old, records[0]) != "" {
				t.Errorf("records after a failed %s: %v; want only the old record", tc.method, accessortest.RecordRefs(records))
			}
			intents, _ := c.ListImagePullIntents()
			if diff := cmp.Diff([]string{"example.com/a:1"}, accessortest.IntentImages(intents)); diff != "" {
				t.Errorf("intents after a failed %s (-want +got):\n%s", tc.method, diff)
			}
			if got, ok, _ := c.GetImagePulledRecord("sha256:a"); !ok || accessortest.DiffRecords(old, got) != "" {
				t.Errorf("GetImagePulledRecord after a failed %s = %+v, %v; want the old record", tc.method, got, ok)
			}
			wantCalls(t, d) // still authoritative: answered from memory
		})
	}
}

func TestCacheConcurrentWritersToOneKey(t *testing.T) {
	d, inner := newFaultyDelegate()
	yieldInWrites(d)
	c := newTestCache(t, d, withStripes(4))
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	const ref, image = "sha256:contended", "example.com/contended:1"
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				var err error
				switch (g + i) % 5 {
				case 0:
					err = c.DeleteImagePulledRecord(logger, ref)
				case 1:
					err = c.DeleteImagePullIntent(logger, image)
				case 2:
					err = c.WriteImagePullIntent(logger, image)
				default:
					err = c.WriteImagePulledRecord(logger, accessortest.NewRecord(ref, fmt.Sprintf("example.com/writer-%d/op-%d", g, i)))
				}
				if err != nil {
					t.Errorf("goroutine %d op %d: %v", g, i, err)
				}
			}
		})
	}
	wg.Wait()

	inDelegate, okDelegate, _ := inner.GetImagePulledRecord(ref)
	inCache, okCache, err := c.GetImagePulledRecord(ref)
	if err != nil || okCache != okDelegate {
		t.Fatalf("cache found = %v (%v), delegate found = %v", okCache, err, okDelegate)
	}
	if diff := accessortest.DiffRecords(inDelegate, inCache); diff != "" {
		t.Errorf("cache and delegate disagree on the final record (-delegate +cache):\n%s", diff)
	}
	intentDelegate, _ := inner.ImagePullIntentExists(image)
	intentCache, _ := c.ImagePullIntentExists(image)
	if intentCache != intentDelegate {
		t.Errorf("intent: cache says %v, delegate says %v", intentCache, intentDelegate)
	}
	if got, want := c.CountImagePulledRecords(), inner.CountImagePulledRecords(); got != want {
		t.Errorf("cached record count = %d; delegate has %d", got, want)
	}
}

func TestCacheConcurrentReloadAndWrites(t *testing.T) {
	d, inner := newFaultyDelegate()
	c := newTestCache(t, d)
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				ref := fmt.Sprintf("sha256:g%d-%d", g, i%5)
				var err error
				if i%3 == 2 {
					err = c.DeleteImagePulledRecord(logger, ref)
				} else {
					err = c.WriteImagePulledRecord(logger, accessortest.NewRecord(ref, fmt.Sprintf("example.com/op-%d", i)))
				}
				if err != nil {
					t.Errorf("write: %v", err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if err := c.Reload(context.Background()); err != nil {
				t.Errorf("Reload: %v", err)
			}
		}
	})
	wg.Wait()
	want, _ := inner.ListImagePulledRecords()
	got, err := c.ListImagePulledRecords()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(accessortest.RecordRefs(want), accessortest.RecordRefs(got)); diff != "" {
		t.Fatalf("cache and delegate disagree after concurrent reloads (-delegate +cache):\n%s", diff)
	}
	for _, w := range want {
		g, _, _ := c.GetImagePulledRecord(w.ImageRef)
		if diff := accessortest.DiffRecords(w, g); diff != "" {
			t.Errorf("record %s (-delegate +cache):\n%s", w.ImageRef, diff)
		}
	}
}

func TestCachePeekSharesGetCopies(t *testing.T) {
	c := newTestCache(t, New())
	rec := accessortest.NewRecord("sha256:p", "example.com/p")
	mustWriteRecord(t, c, rec)
	p1, _, _ := c.PeekImagePulledRecord("sha256:p")
	p2, _, _ := c.PeekImagePulledRecord("sha256:p")
	if p1 != p2 {
		t.Error("two peeks of an unchanged record returned different pointers")
	}
	g1, _, _ := c.GetImagePulledRecord("sha256:p")
	g2, _, _ := c.GetImagePulledRecord("sha256:p")
	if g1 == g2 || g1 == p1 {
		t.Error("GetImagePulledRecord returned a shared pointer")
	}
	for _, r := range []*accessor.ImagePulledRecord{p1, g1, g2} {
		if diff := accessortest.DiffRecords(rec, r); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
	// A write replaces what peeks return; the old peeked record is untouched.
	newer := accessortest.NewNodeAccessibleRecord("sha256:p", "example.com/q")
	mustWriteRecord(t, c, newer)
	p3, _, _ := c.PeekImagePulledRecord("sha256:p")
	if diff := accessortest.DiffRecords(newer, p3); diff != "" {
		t.Errorf("peek after write (-want +got):\n%s", diff)
	}
	if diff := accessortest.DiffRecords(rec, p1); diff != "" {
		t.Errorf("earlier peeked record changed (-want +got):\n%s", diff)
	}
}

func TestCacheHotPathDoesNotAllocate(t *testing.T) {
	c := newTestCache(t, New())
	mustWriteRecord(t, c, accessortest.NewRecord("sha256:hot", "example.com/hot", "example.com/other"))
	mustWriteIntent(t, c, "example.com/hot:1")
	c.PeekImagePulledRecord("sha256:hot") // build the shared record once
	tests := map[string]func(){
		"peek hit":    func() { c.PeekImagePulledRecord("sha256:hot") },
		"peek miss":   func() { c.PeekImagePulledRecord("sha256:cold") },
		"intent hit":  func() { c.ImagePullIntentExists("example.com/hot:1") },
		"intent miss": func() { c.ImagePullIntentExists("example.com/cold:1") },
	}
	for name, fn := range tests {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocations per call; want 0", name, n)
		}
	}
}

func TestCacheCounts(t *testing.T) {
	// A delegate that counts: the cache, warmed up empty, holds none of
	// what is written behind its back afterwards, and answers with the
	// delegate's counts, not its own.
	counting, inner := newFaultyDelegate()
	c := newTestCache(t, counting.Accessor())
	for i := range 7 {
		mustWriteIntent(t, inner, fmt.Sprintf("example.com/a:%d", i))
	}
	for i := range 9 {
		mustWriteRecord(t, inner, accessortest.NewRecord(fmt.Sprintf("sha256:%d", i)))
	}
	if got := c.CountImagePullIntents(); got != 7 {
		t.Errorf("CountImagePullIntents = %d; want the delegate's 7", got)
	}
	if got := c.CountImagePulledRecords(); got != 9 {
		t.Errorf("CountImagePulledRecords = %d; want the delegate's 9", got)
	}

	plain, inner := newFaultyDelegate()
	mustWriteIntent(t, inner, "example.com/a:1")
	mustWriteRecord(t, inner, accessortest.NewRecord("sha256:a"))
	mustWriteRecord(t, inner, accessortest.NewRecord("sha256:b"))
	c = newTestCache(t, plain)
	if got := c.CountImagePullIntents(); got != 1 {
		t.Errorf("CountImagePullIntents = %d; want 1 cached", got)
	}
	if got := c.CountImagePulledRecords(); got != 2 {
		t.Errorf("CountImagePulledRecords = %d; want 2 cached", got)
	}
}

func TestNewCacheOptions(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	if _, err := NewCache(logger, nil); !errors.Is(err, ErrNilDelegate) {
		t.Errorf("NewCache(nil) = %v; want ErrNilDelegate", err)
	}
	invalid := []struct {
		name string
		opt  CacheOption
		want string // in the error message
	}{
		{"zero stripes", withStripes(0), "withStripes(0)"},
		{"negative stripes", withStripes(-1), "withStripes(-1)"},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewCache(logger, New(), tc.opt)
			if !errors.Is(err, errInvalidOption) {
				t.Fatalf("NewCache = %v; want errInvalidOption", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
		})
	}
	c, err := NewCache(logger, New(), withStripes(1))
	if err != nil {
		t.Fatalf("withStripes(1): %v", err)
	}
	mustWriteRecord(t, c, accessortest.NewRecord("sha256:one"))
	if _, ok, _ := c.GetImagePulledRecord("sha256:one"); !ok {
		t.Error("record written through a one-stripe cache not found")
	}
}

// Every stripe is used: the index is hash modulo the stripe count, with no
// clamp that would pile keys onto one stripe (kubernetes#138935).
func TestCacheStripesAllUsed(t *testing.T) {
	for _, n := range []int{1, 7, 31, 64, 100} {
		c := newTestCache(t, New(), withStripes(n))
		used := make([]int, n)
		for i := range 50 * n {
			used[c.locks.Index(fmt.Sprintf("sha256:%064x", i))]++
		}
		for i, u := range used {
			if u == 0 {
				t.Errorf("%d stripes: stripe %d never used by %d keys", n, i, 50*n)
			}
			// A fair hash puts about 50 keys on each; allow a wide margin.
			if u > 150 {
				t.Errorf("%d stripes: stripe %d holds %d of %d keys", n, i, u, 50*n)
			}
		}
	}
}

func TestStoreCounts(t *testing.T) {
	s := New()
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	mustWriteIntent(t, s, "a:1")
	mustWriteIntent(t, s, "a:1")
	mustWriteIntent(t, s, "b:1")
	mustWriteRecord(t, s, accessortest.NewRecord("sha256:a"))
	mustWriteRecord(t, s, accessortest.NewRecord("sha256:a", "x/y"))
	if err := s.DeleteImagePullIntent(logger, "c:1"); err != nil {
		t.Fatal(err)
	}
	if got := s.CountImagePullIntents(); got != 2 {
		t.Errorf("CountImagePullIntents = %d; want 2", got)
	}
	if got := s.CountImagePulledRecords(); got != 1 {
		t.Errorf("CountImagePulledRecords = %d; want 1", got)
	}
	if err := s.DeleteImagePulledRecord(logger, "sha256:a"); err != nil {
		t.Fatal(err)
	}
	if got := s.CountImagePulledRecords(); got != 0 {
		t.Errorf("CountImagePulledRecords after delete = %d; want 0", got)
	}
}
