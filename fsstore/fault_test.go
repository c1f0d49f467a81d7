package fsstore

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
)

// errInjected is the error the fault file system returns.
var errInjected = errors.New("injected fault")

// faultCtl decides which file-system operation fails. Operations are
// counted from 1 after arm; the failAt-th fails (and, when persistent,
// every later one). With only set, just operations of that name count.
type faultCtl struct {
	mu         sync.Mutex
	n          int
	failAt     int
	persistent bool
	only       string
	err        error
	shortWrite bool // a failing write first writes half its buffer
	log        []string
}

func (c *faultCtl) arm(failAt int, persistent bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n, c.failAt, c.persistent, c.log = 0, failAt, persistent, nil
	if c.err == nil {
		c.err = errInjected
	}
}

func (c *faultCtl) disarm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failAt = 0
}

func (c *faultCtl) ops() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *faultCtl) check(op, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failAt == 0 || (c.only != "" && op != c.only) {
		return nil
	}
	c.n++
	c.log = append(c.log, op+" "+name)
	if c.n == c.failAt || (c.persistent && c.n > c.failAt) {
		return fmt.Errorf("%s %s (operation %d): %w", op, name, c.n, c.err)
	}
	return nil
}

type faultFS struct {
	inner dirFS
	ctl   *faultCtl
}

func (f *faultFS) ReadDir() ([]fs.DirEntry, error) {
	if err := f.ctl.check("readdir", "."); err != nil {
		return nil, err
	}
	return f.inner.ReadDir()
}

func (f *faultFS) Lstat(name string) (fs.FileInfo, error) {
	if err := f.ctl.check("lstat", name); err != nil {
		return nil, err
	}
	return f.inner.Lstat(name)
}

func (f *faultFS) OpenRead(name string) (fsFile, error) {
	if err := f.ctl.check("open", name); err != nil {
		return nil, err
	}
	file, err := f.inner.OpenRead(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{inner: file, name: name, ctl: f.ctl}, nil
}

func (f *faultFS) CreateExcl(name string) (fsFile, error) {
	if err := f.ctl.check("create", name); err != nil {
		return nil, err
	}
	file, err := f.inner.CreateExcl(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{inner: file, name: name, ctl: f.ctl}, nil
}

func (f *faultFS) Rename(oldname, newname string) error {
	if err := f.ctl.check("rename", oldname); err != nil {
		return err
	}
	return f.inner.Rename(oldname, newname)
}

func (f *faultFS) Remove(name string) error {
	if err := f.ctl.check("remove", name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

func (f *faultFS) SyncDir() error {
	if err := f.ctl.check("syncdir", "."); err != nil {
		return err
	}
	return f.inner.SyncDir()
}

func (f *faultFS) Close() error { return f.inner.Close() }

type faultFile struct {
	inner fsFile
	name  string
	ctl   *faultCtl
}

func (f *faultFile) Read(p []byte) (int, error) {
	if err := f.ctl.check("read", f.name); err != nil {
		return 0, err
	}
	return f.inner.Read(p)
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.ctl.check("write", f.name); err != nil {
		if f.ctl.shortWrite && len(p) > 1 {
			n, _ := f.inner.Write(p[:len(p)/2])
			return n, err
		}
		return 0, err
	}
	return f.inner.Write(p)
}

func (f *faultFile) Stat() (fs.FileInfo, error) {
	if err := f.ctl.check("stat", f.name); err != nil {
		return nil, err
	}
	return f.inner.Stat()
}

func (f *faultFile) Chmod(mode fs.FileMode) error {
	if err := f.ctl.check("chmod", f.name); err != nil {
		return err
	}
	return f.inner.Chmod(mode)
}

func (f *faultFile) Sync() error {
	if err := f.ctl.check("sync", f.name); err != nil {
		return err
	}
	return f.inner.Sync()
}

func (f *faultFile) Close() error {
	err := f.ctl.check("close", f.name)
	// The descriptor is released either way, as close(2) does.
	if cerr := f.inner.Close(); err == nil {
		err = cerr
	}
	return err
}

func withFaults(ctl *faultCtl) Option {
	return withFS(func(_ string, d dirFS) dirFS { return &faultFS{inner: d, ctl: ctl} })
}

// faultCase is one public operation run under faults.
type faultCase struct {
	name string
	// before is written (without faults) before the store is opened: nil
	// means no value stored.
	before *accessor.ImagePulledRecord
	// op runs the operation; after is the state it should leave (nil =
	// no record).
	op    func(s *Store) error
	after *accessor.ImagePulledRecord
	// intent cases use the intents directory; values are then only
	// "present" (non-nil) or not.
	intent bool
}

func faultCases(t *testing.T) []faultCase {
	oldRec, newRec := testRecord(10), testRecord(10)
	newRec.LastUpdatedTime.Time = newRec.LastUpdatedTime.Add(3600e9)
	newRec.CredentialMapping = map[string]accessor.ImagePullCredentials{"registry.example.com/x": {NodePodsAccessible: true}}
	logger := testLogger(t)
	present := &accessor.ImagePulledRecord{}
	const image = "registry.example.com/app:v1"
	return []faultCase{
		{name: "record/new", op: func(s *Store) error { return s.WriteImagePulledRecord(logger, newRec) }, after: newRec},
		{name: "record/overwrite", before: oldRec, op: func(s *Store) error { return s.WriteImagePulledRecord(logger, newRec) }, after: newRec},
		{name: "record/delete", before: oldRec, op: func(s *Store) error { return s.DeleteImagePulledRecord(logger, oldRec.ImageRef) }},
		{name: "intent/new", intent: true, op: func(s *Store) error { return s.WriteImagePullIntent(logger, image) }, after: present},
		{name: "intent/overwrite", intent: true, before: present, op: func(s *Store) error { return s.WriteImagePullIntent(logger, image) }, after: present},
		{name: "intent/delete", intent: true, before: present, op: func(s *Store) error { return s.DeleteImagePullIntent(logger, image) }},
	}
}

// stateOf reads the case's key from a store opened without faults.
func (fc faultCase) stateOf(t *testing.T, s *Store) *accessor.ImagePulledRecord {
	t.Helper()
	if fc.intent {
		ok, err := s.ImagePullIntentExists("registry.example.com/app:v1")
		if err != nil {
			t.Fatalf("reading the intent after the fault: %v", err)
		}
		if ok {
			return &accessor.ImagePulledRecord{}
		}
		return nil
	}
	rec, found, err := s.GetImagePulledRecord(testRecord(10).ImageRef)
	if err != nil {
		t.Fatalf("reading the record after the fault: %v (torn?)", err)
	}
	if !found {
		return nil
	}
	return rec
}

func (fc faultCase) setUp(t *testing.T, kubeletDir string) {
	t.Helper()
	s := openStore(t, kubeletDir)
	if fc.before != nil {
		var err error
		if fc.intent {
			err = s.WriteImagePullIntent(testLogger(t), "registry.example.com/app:v1")
		} else {
			err = s.WriteImagePulledRecord(testLogger(t), fc.before)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
}

// TestFaultEveryOperation fails each file-system operation of a write of a
// new key, an overwrite and a delete in turn (once, and from then on), then
// reopens the store without faults and checks that the key holds the old or
// the new value, whole, that no temporary file is left and that writes work.
func TestFaultEveryOperation(t *testing.T) {
	for _, fc := range faultCases(t) {
		for _, persistent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/persistent=%v", fc.name, persistent), func(t *testing.T) {
				injected := 0
				for k := 1; ; k++ {
					if k > 100 {
						t.Fatal("the operation never completed")
					}
					kubeletDir := t.TempDir()
					fc.setUp(t, kubeletDir)
					ctl := &faultCtl{}
					s, err := New(testLogger(t), kubeletDir, withFaults(ctl))
					if err != nil {
						t.Fatal(err)
					}
					ctl.arm(k, persistent)
					err = fc.op(s)
					ops := ctl.ops()
					ctl.disarm()
					s.Close()
					if ops < k {
						// The operation finished before reaching fault k.
						if err != nil {
							t.Fatalf("k=%d: no fault injected but %v", k, err)
						}
						s2 := openStore(t, kubeletDir)
						if diff := cmp.Diff(fc.after, fc.stateOf(t, s2)); diff != "" {
							t.Errorf("after success (-want +got):\n%s", diff)
						}
						break
					}
					injected++
					if !errors.Is(err, errInjected) {
						t.Fatalf("k=%d (%v): error %v, want the injected fault", k, ctl.log, err)
					}
					s2 := openStore(t, kubeletDir)
					got := fc.stateOf(t, s2)
					if cmp.Diff(fc.before, got) != "" && cmp.Diff(fc.after, got) != "" {
						t.Errorf("k=%d (%v): state %+v is neither the old %+v nor the new %+v", k, ctl.log, got, fc.before, fc.after)
					}
					if tmps := tempFiles(t, kubeletDir); len(tmps) != 0 {
						t.Errorf("k=%d: temp files after reopen: %v", k, tmps)
					}
					if _, err := s2.ListImagePulledRecords(); err != nil {
						t.Errorf("k=%d: list after reopen: %v", k, err)
					}
					// The store still works: run the operation again.
					if err := fc.op(s2); err != nil {
						t.Errorf("k=%d: retry after reopen: %v", k, err)
					}
					if diff := cmp.Diff(fc.after, fc.stateOf(t, s2)); diff != "" {
						t.Errorf("k=%d: after retry (-want +got):\n%s", k, diff)
					}
				}
				// A write is create, chmod, write, sync, close, rename,
				// sync dir; a delete is remove, sync dir.
				want := 7
				if strings.HasSuffix(fc.name, "/delete") {
					want = 2
				}
				if injected != want {
					t.Errorf("%d faults injected, want one per step: %d", injected, want)
				}
			})
		}
	}
}

// TestFaultENOSPC runs out of space on the write and on the sync of a
// record overwrite: the error matches syscall.ENOSPC, the old record is
// intact, no temp file is left, and the write succeeds once space is back.
func TestFaultENOSPC(t *testing.T) {
	logger := testLogger(t)
	oldRec, newRec := testRecord(20), testRecord(20)
	newRec.CredentialMapping = nil
	for _, op := range []string{"write", "sync"} {
		for _, short := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/short=%v", op, short), func(t *testing.T) {
				kubeletDir := t.TempDir()
				ctl := &faultCtl{only: op, err: syscall.ENOSPC, shortWrite: short}
				s := openStore(t, kubeletDir, withFaults(ctl))
				if err := s.WriteImagePulledRecord(logger, oldRec); err != nil {
					t.Fatal(err)
				}
				ctl.arm(1, true)
				err := s.WriteImagePulledRecord(logger, newRec)
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("error %v, want ENOSPC", err)
				}
				if tmps := tempFiles(t, kubeletDir); len(tmps) != 0 {
					t.Errorf("temp files left: %v", tmps)
				}
				got, _, err := s.GetImagePulledRecord(oldRec.ImageRef)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(oldRec, got); diff != "" {
					t.Errorf("record after ENOSPC (-want +got):\n%s", diff)
				}
				ctl.disarm()
				if err := s.WriteImagePulledRecord(logger, newRec); err != nil {
					t.Fatalf("write after space is back: %v", err)
				}
				got, _, err = s.GetImagePulledRecord(oldRec.ImageRef)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(newRec, got); diff != "" {
					t.Errorf("record after retry (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestFaultReads checks that I/O errors while reading surface as errors (not
// as "not found" and not as corrupt records).
func TestFaultReads(t *testing.T) {
	kubeletDir := t.TempDir()
	rec := testRecord(30)
	writeRaw(t, recordsPath(kubeletDir)+"/"+FileName(rec.ImageRef), mustEncodeRecord(t, rec))
	for _, op := range []string{"lstat", "open", "stat", "read"} {
		t.Run(op, func(t *testing.T) {
			ctl := &faultCtl{only: op, err: syscall.EIO}
			s := openStore(t, kubeletDir, withFaults(ctl), WithoutSync())
			ctl.arm(1, true)
			_, found, err := s.GetImagePulledRecord(rec.ImageRef)
			if !errors.Is(err, syscall.EIO) || errors.Is(err, accessor.ErrCorrupt) || !found {
				t.Errorf("Get: found=%v err=%v, want found and a non-corrupt EIO", found, err)
			}
			s.ListImagePulledRecords() // use up the snapshot
			_, err = s.ListImagePulledRecords()
			if !errors.Is(err, syscall.EIO) {
				t.Errorf("List: %v, want EIO", err)
			}
		})
	}
}
