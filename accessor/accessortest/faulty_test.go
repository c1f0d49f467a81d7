package accessortest_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
	"github.com/pullrecords/pullrecords/memstore"
)

var errBoom = errors.New("boom")

// fullStore is a memstore that also ranges, so it has every optional
// interface.
type fullStore struct {
	*memstore.Store
}

func (s fullStore) RangeImagePulledRecords(fn func(*accessor.ImagePulledRecord)) error {
	records, err := s.ListImagePulledRecords()
	for _, r := range records {
		fn(r)
	}
	return err
}

func TestFaultyConformance(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		accessortest.Run(t, func(t *testing.T) accessor.PullRecordsAccessor {
			return accessortest.Faulty(memstore.New())
		})
	})
	t.Run("optional interfaces", func(t *testing.T) {
		accessortest.Run(t, func(t *testing.T) accessor.PullRecordsAccessor {
			return accessortest.Faulty(fullStore{memstore.New()}).Accessor()
		})
	})
	// Faults that never fire still run their bookkeeping on every call,
	// concurrently in the suite's Concurrency case (run with -race).
	t.Run("faults that never fire", func(t *testing.T) {
		accessortest.Run(t, func(t *testing.T) accessor.PullRecordsAccessor {
			f := accessortest.Faulty(memstore.New())
			for _, m := range []string{"ListImagePullIntents", "ImagePullIntentExists", "WriteImagePullIntent", "DeleteImagePullIntent",
				"ListImagePulledRecords", "GetImagePulledRecord", "WriteImagePulledRecord", "DeleteImagePulledRecord", "PeekImagePulledRecord"} {
				f.FailNth(m, 1<<30, errBoom)
			}
			f.OnCall(func(accessortest.Call) {})
			return f.Accessor()
		})
	})
}

// TestFaultyFaults sets faults on ImagePullIntentExists and checks which of
// ten calls fail, and with which error.
func TestFaultyFaults(t *testing.T) {
	errOther := errors.New("other")
	keys := []string{"a", "b", "a", "c", "a", "b", "a", "c", "a", "b"}
	for _, tc := range []struct {
		name string
		set  func(f *accessortest.FaultyAccessor)
		want string // per call: . passes, x fails with errBoom, o fails with errOther
	}{
		{"none", func(f *accessortest.FaultyAccessor) {}, ".........."},
		{"nth", func(f *accessortest.FaultyAccessor) { f.FailNth("ImagePullIntentExists", 3, errBoom) }, "..x......."},
		{"next", func(f *accessortest.FaultyAccessor) { f.FailNth("ImagePullIntentExists", 1, errBoom) }, "x........."},
		{"twice", func(f *accessortest.FaultyAccessor) {
			f.FailNth("ImagePullIntentExists", 3, errBoom)
			f.FailNth("ImagePullIntentExists", 7, errOther)
		}, "..x...o..."},
		{"always", func(f *accessortest.FaultyAccessor) { f.Fail("ImagePullIntentExists", errBoom) }, "xxxxxxxxxx"},
		{"first set wins", func(f *accessortest.FaultyAccessor) {
			f.FailNth("ImagePullIntentExists", 2, errOther)
			f.Fail("ImagePullIntentExists", errBoom)
		}, "xoxxxxxxxx"},
		{"another method", func(f *accessortest.FaultyAccessor) { f.Fail("GetImagePulledRecord", errBoom) }, ".........."},
		{"healed", func(f *accessortest.FaultyAccessor) {
			f.Fail("ImagePullIntentExists", errBoom)
			f.Heal("ImagePullIntentExists")
		}, ".........."},
		{"all healed", func(f *accessortest.FaultyAccessor) {
			f.Fail("ImagePullIntentExists", errBoom)
			f.Heal()
		}, ".........."},
		{"other healed", func(f *accessortest.FaultyAccessor) {
			f.FailNth("ImagePullIntentExists", 2, errBoom)
			f.Heal("GetImagePulledRecord")
		}, ".x........"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := memstore.New()
			if err := inner.WriteImagePullIntent(klog.Background(), "a"); err != nil {
				t.Fatal(err)
			}
			f := accessortest.Faulty(inner)
			// Calls made before a fault is set do not count towards it.
			if _, err := f.ImagePullIntentExists("before"); err != nil {
				t.Fatal(err)
			}
			tc.set(f)
			var got strings.Builder
			for _, k := range keys {
				ok, err := f.ImagePullIntentExists(k)
				switch {
				case err == nil:
					if ok != (k == "a") {
						t.Errorf("ImagePullIntentExists(%s) = %v, want %v", k, ok, k == "a")
					}
					got.WriteByte('.')
				case ok:
					t.Errorf("failed ImagePullIntentExists(%s) = true, %v", k, err)
				case err == errBoom:
					got.WriteByte('x')
				case err == errOther:
					got.WriteByte('o')
				default:
					t.Errorf("ImagePullIntentExists(%s): unexpected error %v", k, err)
				}
			}
			if got.String() != tc.want {
				t.Errorf("calls %q: got %s, want %s", keys, got.String(), tc.want)
			}
			if n := f.CallCount("ImagePullIntentExists"); n != len(keys)+1 {
				t.Errorf("CallCount = %d, want %d (failed calls count too)", n, len(keys)+1)
			}
		})
	}
}

// TestFaultyFailedCalls fails each method in turn: it returns the
// documented values and the wrapped store sees nothing.
func TestFaultyFailedCalls(t *testing.T) {
	logger := klog.Background()
	for _, tc := range []struct {
		method string
		call   func(s accessor.PullRecordsAccessor) error
	}{
		{"ListImagePullIntents", func(s accessor.PullRecordsAccessor) error {
			l, err := s.ListImagePullIntents()
			return wantZero(err, l == nil)
		}},
		{"ImagePullIntentExists", func(s accessor.PullRecordsAccessor) error {
			ok, err := s.ImagePullIntentExists("x/y:1")
			return wantZero(err, !ok)
		}},
		{"WriteImagePullIntent", func(s accessor.PullRecordsAccessor) error { return s.WriteImagePullIntent(logger, "x/new:1") }},
		{"DeleteImagePullIntent", func(s accessor.PullRecordsAccessor) error { return s.DeleteImagePullIntent(logger, "x/y:1") }},
		{"ListImagePulledRecords", func(s accessor.PullRecordsAccessor) error {
			l, err := s.ListImagePulledRecords()
			return wantZero(err, l == nil)
		}},
		{"GetImagePulledRecord", func(s accessor.PullRecordsAccessor) error {
			r, ok, err := s.GetImagePulledRecord("sha256:a")
			return wantZero(err, r == nil && ok)
		}},
		{"WriteImagePulledRecord", func(s accessor.PullRecordsAccessor) error {
			return s.WriteImagePulledRecord(logger, accessortest.NewRecord("sha256:new", "x/new"))
		}},
		{"DeleteImagePulledRecord", func(s accessor.PullRecordsAccessor) error { return s.DeleteImagePulledRecord(logger, "sha256:a") }},
		{"PeekImagePulledRecord", func(s accessor.PullRecordsAccessor) error {
			r, ok, err := s.(accessor.RecordPeeker).PeekImagePulledRecord("sha256:a")
			return wantZero(err, r == nil && ok)
		}},
		{"RangeImagePulledRecords", func(s accessor.PullRecordsAccessor) error {
			called := false
			err := s.(accessor.PulledRecordRanger).RangeImagePulledRecords(func(*accessor.ImagePulledRecord) { called = true })
			return wantZero(err, !called)
		}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			inner := fullStore{memstore.New()}
			rec := accessortest.NewRecord("sha256:a", "x/y")
			if err := inner.WriteImagePulledRecord(logger, rec); err != nil {
				t.Fatal(err)
			}
			if err := inner.WriteImagePullIntent(logger, "x/y:1"); err != nil {
				t.Fatal(err)
			}
			f := accessortest.Faulty(inner)
			f.Fail(tc.method, errBoom)
			if err := tc.call(f.Accessor()); !errors.Is(err, errBoom) {
				t.Fatalf("%s = %v, want the fault's error", tc.method, err)
			}
			if diff := cmp.Diff([]accessortest.Call{{Method: tc.method, Key: keyOf(f.Calls())}}, f.Calls()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			// Nothing changed underneath.
			intents, _ := inner.ListImagePullIntents()
			records, _ := inner.ListImagePulledRecords()
			if diff := cmp.Diff([]string{"x/y:1"}, accessortest.IntentImages(intents)); diff != "" {
				t.Errorf("intents (-want +got):\n%s", diff)
			}
			if len(records) != 1 || accessortest.DiffRecords(rec, records[0]) != "" {
				t.Errorf("records = %q, want only sha256:a", accessortest.RecordRefs(records))
			}
			// Healed, the same call passes.
			f.Heal()
			if err := tc.call(f.Accessor()); errors.Is(err, errBoom) {
				t.Errorf("healed %s still fails", tc.method)
			}
		})
	}
}

// wantZero turns a failed call into its error, or into a complaint when the
// other return values are not the documented ones.
func wantZero(err error, zero bool) error {
	switch {
	case err == nil:
		return errors.New("no error")
	case !zero:
		return fmt.Errorf("values besides the error %v are not the documented ones", err)
	}
	return err
}

func keyOf(calls []accessortest.Call) string {
	if len(calls) == 0 {
		return ""
	}
	return calls[0].Key
}

func TestFaultyCorrupt(t *testing.T) {
	logger := klog.Background()
	inner := fullStore{memstore.New()}
	good := accessortest.NewRecord("sha256:good", "x/good")
	bad := accessortest.NewRecord("sha256:bad", "x/bad")
	for _, r := range []*accessor.ImagePulledRecord{good, bad} {
		if err := inner.WriteImagePulledRecord(logger, r); err != nil {
			t.Fatal(err)
		}
	}
	f := accessortest.Faulty(inner)
	s := f.Accessor()
	f.Corrupt("sha256:bad")
	f.Corrupt("sha256:absent") // not stored: stays absent

	r, ok, err := s.GetImagePulledRecord("sha256:bad")
	if r != nil || !ok || !errors.Is(err, accessor.ErrCorrupt) || !errors.Is(err, accessor.ErrMalformed) {
		t.Errorf("GetImagePulledRecord(bad) = %v, %v, %v; want nil, true, a corrupt record error", r, ok, err)
	}
	r, ok, err = s.(accessor.RecordPeeker).PeekImagePulledRecord("sha256:bad")
	if r != nil || !ok || !errors.Is(err, accessor.ErrCorrupt) {
		t.Errorf("PeekImagePulledRecord(bad) = %v, %v, %v; want nil, true, ErrCorrupt", r, ok, err)
	}
	if r, ok, err := s.GetImagePulledRecord("sha256:absent"); r != nil || ok || err != nil {
		t.Errorf("GetImagePulledRecord(absent) = %v, %v, %v; want nil, false, nil", r, ok, err)
	}
	if r, ok, err := s.GetImagePulledRecord("sha256:good"); !ok || err != nil || accessortest.DiffRecords(good, r) != "" {
		t.Errorf("GetImagePulledRecord(good) = %v, %v, %v", r, ok, err)
	}

	wantListed := func(what string, refs []string, err error) {
		t.Helper()
		var le *accessor.ListError
		if !errors.As(err, &le) || len(le.Errs) != 1 || !errors.Is(le.Errs[0], accessor.ErrCorrupt) {
			t.Errorf("%s error = %v; want a ListError naming one corrupt record", what, err)
		}
		if diff := cmp.Diff([]string{"sha256:good"}, refs); diff != "" {
			t.Errorf("%s (-want +got):\n%s", what, diff)
		}
	}
	list, err := s.ListImagePulledRecords()
	wantListed("ListImagePulledRecords", accessortest.RecordRefs(list), err)
	var mu sync.Mutex
	var ranged []*accessor.ImagePulledRecord
	err = s.(accessor.PulledRecordRanger).RangeImagePulledRecords(func(r *accessor.ImagePulledRecord) {
		mu.Lock()
		defer mu.Unlock()
		ranged = append(ranged, r)
	})
	wantListed("RangeImagePulledRecords", accessortest.RecordRefs(ranged), err)

	// A list error of the wrapped store is kept beside the corrupt record's.
	f.FailNth("ListImagePulledRecords", 1, errBoom) // fails the call itself
	if l, err := s.ListImagePulledRecords(); l != nil || !errors.Is(err, errBoom) {
		t.Errorf("failed ListImagePulledRecords = %d records, %v", len(l), err)
	}

	// Rewriting the record repairs it; so does deleting it, or Repair.
	if err := s.WriteImagePulledRecord(logger, bad); err != nil {
		t.Fatal(err)
	}
	if r, ok, err := s.GetImagePulledRecord("sha256:bad"); !ok || err != nil || accessortest.DiffRecords(bad, r) != "" {
		t.Errorf("GetImagePulledRecord(bad) after a rewrite = %v, %v, %v", r, ok, err)
	}
	f.Corrupt("sha256:bad")
	if err := s.DeleteImagePulledRecord(logger, "sha256:bad"); err != nil {
		t.Fatal(err)
	}
	if err := inner.WriteImagePulledRecord(logger, bad); err != nil { // behind f's back
		t.Fatal(err)
	}
	if _, ok, err := s.GetImagePulledRecord("sha256:bad"); !ok || err != nil {
		t.Errorf("GetImagePulledRecord(bad) after a delete and a new write = _, %v, %v", ok, err)
	}
	f.Corrupt("sha256:good")
	f.Repair("sha256:good")
	if list, err := s.ListImagePulledRecords(); err != nil || len(list) != 2 {
		t.Errorf("ListImagePulledRecords after Repair = %q, %v", accessortest.RecordRefs(list), err)
	}
	// A failed write repairs nothing.
	f.Corrupt("sha256:good")
	f.FailNth("WriteImagePulledRecord", 1, errBoom)
	if err := s.WriteImagePulledRecord(logger, good); !errors.Is(err, errBoom) {
		t.Fatalf("WriteImagePulledRecord = %v", err)
	}
	if _, _, err := s.GetImagePulledRecord("sha256:good"); !errors.Is(err, accessor.ErrCorrupt) {
		t.Errorf("GetImagePulledRecord(good) after a failed write = %v, want still corrupt", err)
	}
}

// listErrorStore fails every list with a ListError of its own.
type listErrorStore struct{ *memstore.Store }

var errUnreadable = &accessor.CorruptRecordError{Path: "other", Err: errBoom}

func (s listErrorStore) ListImagePulledRecords() ([]*accessor.ImagePulledRecord, error) {
	l, _ := s.Store.ListImagePulledRecords()
	return l, &accessor.ListError{What: "image pulled records", Errs: []error{errUnreadable}}
}

func TestFaultyCorruptKeepsListErrors(t *testing.T) {
	inner := listErrorStore{memstore.New()}
	for _, ref := range []string{"sha256:a", "sha256:b"} {
		if err := inner.WriteImagePulledRecord(klog.Background(), accessortest.NewRecord(ref)); err != nil {
			t.Fatal(err)
		}
	}
	f := accessortest.Faulty(inner)
	f.Corrupt("sha256:b")
	list, err := f.ListImagePulledRecords()
	var le *accessor.ListError
	if !errors.As(err, &le) || len(le.Errs) != 2 || le.Errs[0] != errUnreadable || !errors.Is(le.Errs[1], accessor.ErrCorrupt) {
		t.Errorf("error = %v; want the store's ListError entry and the corrupt record's", err)
	}
	if diff := cmp.Diff([]string{"sha256:a"}, accessortest.RecordRefs(list)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestFaultyOptionalInterfaces checks Accessor over stores with every
// combination of the optional interfaces: it has exactly the inner store's,
// never one the inner store lacks, and their calls are logged and reach the
// inner store.
func TestFaultyOptionalInterfaces(t *testing.T) {
	type (
		a   = accessor.PullRecordsAccessor
		pk  = accessor.RecordPeeker
		ct  = accessor.RecordCounter
		rgr = accessor.PulledRecordRanger
	)
	s := fullStore{memstore.New()}
	inners := []a{
		struct{ a }{s},
		struct {
			a
			pk
		}{s, s},
		struct {
			a
			ct
		}{s, s},
		struct {
			a
			rgr
		}{s, s},
		struct {
			a
			pk
			ct
		}{s, s, s},
		struct {
			a
			pk
			rgr
		}{s, s, s},
		struct {
			a
			ct
			rgr
		}{s, s, s},
		s,
	}
	if err := s.WriteImagePulledRecord(klog.Background(), accessortest.NewRecord("sha256:a")); err != nil {
		t.Fatal(err)
	}
	seen := map[[3]bool]bool{}
	for _, inner := range inners {
		want := optionalOf(inner)
		seen[want] = true
		t.Run(fmt.Sprint(want), func(t *testing.T) {
			f := accessortest.Faulty(inner)
			got := f.Accessor()
			if optionalOf(got) != want {
				t.Fatalf("Accessor() has optional interfaces %v, want %v", optionalOf(got), want)
			}
			if optionalOf(f) != [3]bool{} {
				t.Errorf("*FaultyAccessor has optional interfaces %v, want none", optionalOf(f))
			}
			var wantCalls []string
			if p, ok := got.(accessor.RecordPeeker); ok {
				if _, found, err := p.PeekImagePulledRecord("sha256:a"); !found || err != nil {
					t.Errorf("PeekImagePulledRecord = _, %v, %v", found, err)
				}
				wantCalls = append(wantCalls, "PeekImagePulledRecord sha256:a")
			}
			if c, ok := got.(accessor.RecordCounter); ok {
				if n, m := c.CountImagePullIntents(), c.CountImagePulledRecords(); n != 0 || m != 1 {
					t.Errorf("counts = %d, %d; want 0, 1", n, m)
				}
				wantCalls = append(wantCalls, "CountImagePullIntents", "CountImagePulledRecords")
			}
			if r, ok := got.(accessor.PulledRecordRanger); ok {
				n := 0
				if err := r.RangeImagePulledRecords(func(*accessor.ImagePulledRecord) { n++ }); err != nil || n != 1 {
					t.Errorf("RangeImagePulledRecords = %v after %d records; want nil after 1", err, n)
				}
				wantCalls = append(wantCalls, "RangeImagePulledRecords")
			}
			if diff := cmp.Diff(wantCalls, callStrings(f.TakeCalls())); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
	if len(seen) != 8 {
		t.Errorf("the test covers %d combinations, want 8", len(seen))
	}
}

// optionalOf reports which of accessor.RecordPeeker, accessor.RecordCounter
// and accessor.PulledRecordRanger s implements.
func optionalOf(s accessor.PullRecordsAccessor) [3]bool {
	_, p := s.(accessor.RecordPeeker)
	_, c := s.(accessor.RecordCounter)
	_, g := s.(accessor.PulledRecordRanger)
	return [3]bool{p, c, g}
}

func callStrings(calls []accessortest.Call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.String())
	}
	return out
}

func TestFaultyCallLog(t *testing.T) {
	logger := klog.Background()
	f := accessortest.Faulty(memstore.New())
	s := f.Accessor()
	_ = s.WriteImagePullIntent(logger, "x/y:1")
	_, _ = s.ImagePullIntentExists("x/y:1")
	_, _ = s.ListImagePullIntents()
	_ = s.WriteImagePulledRecord(logger, accessortest.NewRecord("sha256:a"))
	_ = s.WriteImagePulledRecord(logger, nil)
	_, _, _ = s.GetImagePulledRecord("sha256:a")
	_, _ = s.ListImagePulledRecords()
	_ = s.DeleteImagePulledRecord(logger, "sha256:a")
	_ = s.DeleteImagePullIntent(logger, "x/y:1")
	want := []string{
		"WriteImagePullIntent x/y:1", "ImagePullIntentExists x/y:1", "ListImagePullIntents",
		"WriteImagePulledRecord sha256:a", "WriteImagePulledRecord", "GetImagePulledRecord sha256:a",
		"ListImagePulledRecords", "DeleteImagePulledRecord sha256:a", "DeleteImagePullIntent x/y:1",
	}
	if diff := cmp.Diff(want, callStrings(f.Calls())); diff != "" {
		t.Errorf("Calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, callStrings(f.TakeCalls())); diff != "" {
		t.Errorf("TakeCalls (-want +got):\n%s", diff)
	}
	if calls := f.TakeCalls(); len(calls) != 0 {
		t.Errorf("TakeCalls after TakeCalls = %v, want none", calls)
	}
	if n := f.CallCount("WriteImagePulledRecord"); n != 2 {
		t.Errorf("CallCount(WriteImagePulledRecord) = %d after TakeCalls, want 2", n)
	}
	// Calls on Inner are not logged.
	_, _ = f.Inner().ListImagePullIntents()
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("a call on Inner was logged: %v", calls)
	}
}

// TestFaultyConcurrentUse sets faults and reads the log while goroutines
// call the accessor (meaningful under -race).
func TestFaultyConcurrentUse(t *testing.T) {
	logger := klog.Background()
	f := accessortest.Faulty(memstore.New())
	s := f.Accessor()
	const goroutines, ops = 4, 200
	var wg sync.WaitGroup
	var failed sync.Map
	for g := range goroutines {
		wg.Go(func() {
			for i := range ops {
				key := fmt.Sprintf("x/g%d:%d", g, i%5)
				if err := s.WriteImagePullIntent(logger, key); err != nil {
					failed.Store(key, true)
				}
				_, _ = s.ImagePullIntentExists(key)
			}
		})
	}
	wg.Go(func() {
		for i := range ops {
			f.FailNth("WriteImagePullIntent", 1+i%3, errBoom)
			_ = f.Calls()
			_ = f.CallCount("WriteImagePullIntent")
			if i%10 == 0 {
				f.Heal()
				_ = f.TakeCalls()
			}
		}
	})
	wg.Wait()
	if n := f.CallCount("WriteImagePullIntent"); n != goroutines*ops {
		t.Errorf("CallCount(WriteImagePullIntent) = %d, want %d", n, goroutines*ops)
	}
}

func TestFaultyOnCall(t *testing.T) {
	logger := klog.Background()
	f := accessortest.Faulty(memstore.New())
	var seen []string
	once := true
	f.OnCall(func(c accessortest.Call) {
		seen = append(seen, c.String())
		if once && c.Method == "ImagePullIntentExists" {
			once = false
			// A call from the hook: as a concurrent writer would, between the
			// caller's call and the store's answer.
			if err := f.WriteImagePullIntent(logger, c.Key); err != nil {
				t.Error(err)
			}
		}
	})
	f.FailNth("DeleteImagePullIntent", 1, errBoom)
	if ok, err := f.ImagePullIntentExists("x/y:1"); !ok || err != nil {
		t.Errorf("ImagePullIntentExists = %v, %v; want the intent the hook wrote", ok, err)
	}
	if err := f.DeleteImagePullIntent(logger, "x/y:1"); !errors.Is(err, errBoom) {
		t.Errorf("DeleteImagePullIntent = %v, want errBoom", err)
	}
	f.OnCall(nil)
	_, _ = f.ListImagePullIntents()
	want := []string{"ImagePullIntentExists x/y:1", "WriteImagePullIntent x/y:1", "DeleteImagePullIntent x/y:1"}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("hook saw (-want +got):\n%s", diff)
	}
}

func TestFaultyPanics(t *testing.T) {
	f := accessortest.Faulty(memstore.New())
	for name, fn := range map[string]func(){
		"nil inner":       func() { accessortest.Faulty(nil) },
		"mistyped method": func() { f.Fail("GetImagePulledRecords", errBoom) },
		"count method":    func() { f.Fail("CountImagePulledRecords", errBoom) },
		"call zero":       func() { f.FailNth("GetImagePulledRecord", 0, errBoom) },
		"negative call":   func() { f.FailNth("GetImagePulledRecord", -1, errBoom) },
		"nil error":       func() { f.Fail("GetImagePulledRecord", nil) },
		"nil error (nth)": func() { f.FailNth("GetImagePulledRecord", 1, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			fn()
		})
	}
}

// A cache in front of a store must not remember a write the store refused.
// Faulty fails the second record write and logs what reached the store.
func ExampleFaulty() {
	logger := klog.Background()
	store := accessortest.Faulty(memstore.New())
	store.FailNth("WriteImagePulledRecord", 2, errors.New("no space left on device"))
	cache, err := memstore.NewCache(logger, store.Accessor())
	if err != nil {
		panic(err)
	}
	for _, ref := range []string{"sha256:a", "sha256:b"} {
		err := cache.WriteImagePulledRecord(logger, accessortest.NewRecord(ref, "example.com/app"))
		_, found, _ := cache.GetImagePulledRecord(ref)
		fmt.Printf("%s: write error %v, cached %t\n", ref, err, found)
	}
	for _, c := range store.Calls() {
		fmt.Println(c)
	}
	// Output:
	// sha256:a: write error <nil>, cached true
	// sha256:b: write error no space left on device, cached false
	// ListImagePullIntents
	// ListImagePulledRecords
	// WriteImagePulledRecord sha256:a
	// WriteImagePulledRecord sha256:b
}
