package fsstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
)

type walkResult struct {
	Records []*accessor.ImagePulledRecord
	Errs    []string
}

func walkStore(t *testing.T, s *Store, order WalkOrder) walkResult {
	t.Helper()
	var res walkResult
	err := s.WalkImagePulledRecords(order, func(r *accessor.ImagePulledRecord, err error) error {
		switch {
		case err != nil && r != nil:
			t.Errorf("walk gave both a record and an error: %v", err)
		case err != nil:
			res.Errs = append(res.Errs, err.Error())
		case r == nil:
			t.Error("walk gave neither a record nor an error")
		default:
			res.Records = append(res.Records, r)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk: %v", err)
	}
	return res
}

// A walk in file-name order gives what a list gives, records and errors in
// the same order; a walk by key gives the same records sorted by key and
// the same errors; on the batch path and on the dirFS path, scanned at open
// or not.
func TestWalkMatchesList(t *testing.T) {
	for _, plain := range []bool{false, true} {
		for _, scan := range []bool{false, true} {
			t.Run(fmt.Sprintf("plain=%v/scan=%v", plain, scan), func(t *testing.T) {
				dir := mixedDir(t)
				opts := []Option{WithReadOnly()}
				if !scan {
					opts = append(opts, WithoutScan())
				}
				if plain {
					opts = append(opts, withFS(func(_ string, d dirFS) dirFS { return plainFS{d} }))
				}
				s := openStore(t, dir, opts...)
				list := listAll(t, s, false)
				byName := walkStore(t, s, ByFileName)
				if diff := cmp.Diff(list.Records, byName.Records); diff != "" {
					t.Errorf("walk by file name differs from the list (-list +walk):\n%s", diff)
				}
				if !slices.Equal(list.Errs, byName.Errs) {
					t.Errorf("errors differ:\nlist %q\nwalk %q", list.Errs, byName.Errs)
				}
				byKey := walkStore(t, s, ByKey)
				want := slices.Clone(list.Records)
				slices.SortFunc(want, func(a, b *accessor.ImagePulledRecord) int { return strings.Compare(a.ImageRef, b.ImageRef) })
				if diff := cmp.Diff(want, byKey.Records); diff != "" {
					t.Errorf("walk by key (-want +got):\n%s", diff)
				}
				if !slices.Equal(list.Errs, byKey.Errs) {
					t.Errorf("errors differ:\nlist %q\nwalk %q", list.Errs, byKey.Errs)
				}
				if len(list.Records) < 600 || len(list.Errs) < 5 {
					t.Fatalf("%d records, %d errors", len(list.Records), len(list.Errs))
				}
				// The walks leave the open-time snapshot to the first list.
				if scan {
					s2 := openStore(t, dir, opts...)
					walkStore(t, s2, ByKey)
					s2.records.mu.Lock()
					kept := s2.records.snapshot != nil
					s2.records.mu.Unlock()
					if !kept {
						t.Error("a walk consumed the open-time snapshot")
					}
				}
			})
		}
	}
}

func TestWalkIntentsByKey(t *testing.T) {
	dir := emptyStoreDir(t)
	var images []string
	for i := range 300 {
		img := fmt.Sprintf("registry.example.com/team-%d/app:%d", i%7, i)
		images = append(images, img)
		writeRaw(t, filepath.Join(intentsPath(dir), FileName(img)), mustEncodeIntent(t, img))
	}
	writeRaw(t, filepath.Join(intentsPath(dir), FileName("torn")), []byte(`{"kind":`))
	writeRaw(t, filepath.Join(recordsPath(dir), FileName("sha256:x")), mustEncodeRecord(t, testRecord(1)))
	s := openStore(t, dir, WithReadOnly(), WithoutScan())
	var got []string
	var errs []error
	err := s.WalkImagePullIntents(ByKey, func(in *accessor.ImagePullIntent, err error) error {
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if len(errs) > 0 {
			t.Errorf("intent %s after an error: errors come last", in.Image)
		}
		got = append(got, in.Image)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(images)
	if diff := cmp.Diff(images, got); diff != "" {
		t.Errorf("intents (-want +got):\n%s", diff)
	}
	var ce *accessor.CorruptRecordError
	if len(errs) != 1 || !errors.As(errs[0], &ce) {
		t.Errorf("errors %v, want one CorruptRecordError", errs)
	}
}

// An error from fn stops the walk and is returned, and the walk's workers
// are gone when it returns.
func TestWalkStopsOnError(t *testing.T) {
	dir := emptyStoreDir(t)
	for i := range 2000 {
		r := testRecord(i)
		writeRaw(t, filepath.Join(recordsPath(dir), FileName(r.ImageRef)), mustEncodeRecord(t, r))
	}
	s := openStore(t, dir, WithReadOnly(), WithoutScan())
	stop := errors.New("stop")
	for _, order := range []WalkOrder{ByFileName, ByKey} {
		before := runtime.NumGoroutine()
		calls := 0
		err := s.WalkImagePulledRecords(order, func(*accessor.ImagePulledRecord, error) error {
			calls++
			if calls == 300 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || calls != 300 {
			t.Errorf("order %d: walk = %v after %d calls, want the error of call 300", order, err, calls)
		}
		// A worker that called Done may still be exiting: give it time.
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if after := runtime.NumGoroutine(); after > before {
			t.Errorf("order %d: %d goroutines before the walk, %d after", order, before, after)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.WalkImagePulledRecords(ByFileName, func(*accessor.ImagePulledRecord, error) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("walk of a closed store = %v, want ErrClosed", err)
	}
}

// openCounter counts the files opened for reading.
type openCounter struct {
	dirFS
	opens *atomic.Int64
}

func (c openCounter) OpenRead(name string) (fsFile, error) {
	c.opens.Add(1)
	return c.dirFS.OpenRead(name)
}

// A walk reads ahead of fn by a bounded number of blocks, whatever the
// number of files: while fn holds the first record, the workers read
// walkWindow blocks per worker and stop. The test runs in a synctest bubble
// so that "and stop" is an event: synctest.Wait returns once every goroutine
// of the walk is blocked (the workers waiting for a block, the walk in fn),
// so no read can still be on its way when the count is checked.
func TestWalkReadsAheadABoundedAmount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers = 2
		dir := emptyStoreDir(t)
		n := (walkWindow*workers + 4) * blockSize
		for i := range n {
			r := testRecord(i)
			writeRaw(t, filepath.Join(recordsPath(dir), FileName(r.ImageRef)), mustEncodeRecord(t, r))
		}
		var opens atomic.Int64
		// The dirFS path, where every read opens through the wrapper.
		s := openStore(t, dir, WithReadOnly(), WithoutScan(),
			withFS(func(_ string, d dirFS) dirFS { return openCounter{dirFS: plainFS{d}, opens: &opens} }))
		s.opts.workers = workers
		release := make(chan struct{})
		held := make(chan struct{})
		done := make(chan error)
		go func() {
			first := true
			done <- s.WalkImagePulledRecords(ByFileName, func(*accessor.ImagePulledRecord, error) error {
				if first {
					first = false
					close(held)
					<-release
				}
				return nil
			})
		}()
		<-held
		synctest.Wait()
		want := int64(walkWindow * workers * blockSize)
		if got := opens.Load(); got != want {
			t.Errorf("%d files read while fn held the first record, want %d (%d blocks of %d)", got, want, walkWindow*workers, blockSize)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := opens.Load(); got != int64(n) {
			t.Errorf("%d files read in all, want %d", got, n)
		}
	})
}

// The walk by key reads each file twice and keeps no decoded record from
// the first read: a file replaced between the reads is handed out as the
// second read finds it; one removed is left out.
func TestWalkByKeyRereads(t *testing.T) {
	dir := emptyStoreDir(t)
	var refs []string
	for i := range 10 {
		r := testRecord(i)
		refs = append(refs, r.ImageRef)
		writeRaw(t, filepath.Join(recordsPath(dir), FileName(r.ImageRef)), mustEncodeRecord(t, r))
	}
	slices.Sort(refs)
	s := openStore(t, dir, WithReadOnly(), WithoutScan())
	var got []string
	err := s.WalkImagePulledRecords(ByKey, func(r *accessor.ImagePulledRecord, err error) error {
		if err != nil {
			return err
		}
		got = append(got, r.ImageRef)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(refs, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}

	// Between the reads: with more than the read-ahead, files past it are
	// read the second time only after fn saw the first record.
	dir = emptyStoreDir(t)
	n := (walkWindow*runtime.GOMAXPROCS(0) + 4) * blockSize
	refs = refs[:0]
	for i := range n {
		r := testRecord(i)
		refs = append(refs, r.ImageRef)
		writeRaw(t, filepath.Join(recordsPath(dir), FileName(r.ImageRef)), mustEncodeRecord(t, r))
	}
	slices.Sort(refs)
	last, lastButOne := refs[n-1], refs[n-2]
	s = openStore(t, dir, WithReadOnly(), WithoutScan())
	seen := map[string]*accessor.ImagePulledRecord{}
	first := true
	err = s.WalkImagePulledRecords(ByKey, func(r *accessor.ImagePulledRecord, err error) error {
		if err != nil {
			return err
		}
		if first {
			first = false
			// Both come last by key: their second read is still ahead.
			if err := os.Remove(filepath.Join(recordsPath(dir), FileName(last))); err != nil {
				return err
			}
			other := testRecord(0)
			other.ImageRef = lastButOne
			other.CredentialMapping = nil
			writeRaw(t, filepath.Join(recordsPath(dir), FileName(lastButOne)), mustEncodeRecord(t, other))
		}
		seen[r.ImageRef] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := seen[last]; ok || len(seen) != n-1 {
		t.Errorf("%d records seen (removed one seen: %v), want %d", len(seen), ok, n-1)
	}
	if r := seen[lastButOne]; r == nil || len(r.CredentialMapping) != 0 {
		t.Errorf("the replaced record was handed out as first read: %+v", r)
	}
}

// emptyStoreDir returns a kubelet directory with the store's empty
// directories.
func emptyStoreDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	openStore(t, dir, WithoutSync()).Close()
	return dir
}
