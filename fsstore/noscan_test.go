package fsstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
)

// opLog is a dirFS that records every operation made through it, by
// directory, before passing it on.
type opLog struct {
	dirFS
	dir string
	mu  *sync.Mutex
	ops *[]string
}

func (l opLog) log(op, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.ops = append(*l.ops, l.dir+": "+op+" "+name)
}

func (l opLog) ReadDir() ([]fs.DirEntry, error) { l.log("readdir", "."); return l.dirFS.ReadDir() }
func (l opLog) Lstat(name string) (fs.FileInfo, error) {
	l.log("lstat", name)
	return l.dirFS.Lstat(name)
}
func (l opLog) OpenRead(name string) (fsFile, error) {
	l.log("open", name)
	return l.dirFS.OpenRead(name)
}
func (l opLog) CreateExcl(name string) (fsFile, error) {
	l.log("create", name)
	return l.dirFS.CreateExcl(name)
}
func (l opLog) Rename(o, n string) error { l.log("rename", o); return l.dirFS.Rename(o, n) }
func (l opLog) Remove(name string) error { l.log("remove", name); return l.dirFS.Remove(name) }
func (l opLog) SyncDir() error           { l.log("syncdir", "."); return l.dirFS.SyncDir() }

// withOpLog logs every operation of the store's directories into ops.
func withOpLog(ops *[]string) Option {
	var mu sync.Mutex
	return withFS(func(dir string, d dirFS) dirFS { return opLog{dirFS: d, dir: dir, mu: &mu, ops: ops} })
}

func TestInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		want string // in the error message
	}{
		{"WithoutScan alone", []Option{WithoutScan()}, "WithoutScan without WithReadOnly"},
		{"WithoutScan with WithoutSync", []Option{WithoutSync(), WithoutScan()}, "WithoutScan without WithReadOnly"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kubeletDir := t.TempDir()
			s, err := New(testLogger(t), kubeletDir, tc.opts...)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("New = %v; want ErrInvalidOption", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
			if _, err := os.Lstat(filepath.Join(kubeletDir, DirName)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the refused New created %s: %v", DirName, err)
			}
		})
	}
}

// A store opened WithoutScan reads exactly the one file a point read names:
// no listing, and no other entry opened, even beside entries that would make
// a scan report problems (undecodable, non-regular, oversized) and among many
// records.
func TestWithoutScanGetReadsOneFile(t *testing.T) {
	kubeletDir := t.TempDir()
	records, intents := recordsPath(kubeletDir), intentsPath(kubeletDir)
	for i := range 1000 {
		r := testRecord(i)
		writeRaw(t, filepath.Join(records, FileName(r.ImageRef)), mustEncodeRecord(t, r))
	}
	writeRaw(t, filepath.Join(intents, FileName("example.com/app:1")), mustEncodeIntent(t, "example.com/app:1"))
	writeRaw(t, filepath.Join(records, FileName("sha256:garbage")), []byte("{not json"))
	big := filepath.Join(records, FileName("sha256:big"))
	writeRaw(t, big, mustEncodeRecord(t, testRecord(2000)))
	if err := os.Truncate(big, maxFileSize+1); err != nil {
		t.Fatal(err)
	}
	for i, kind := range nonRegularKinds {
		plantNonRegular(t, kind, filepath.Join(records, FileName(fmt.Sprint("sha256:odd", i))))
	}
	plantNonRegular(t, "fifo", filepath.Join(intents, FileName("fifo")))

	var ops []string
	s := openStore(t, kubeletDir, WithReadOnly(), WithoutScan(), withOpLog(&ops))
	if len(ops) != 0 {
		t.Fatalf("New WithoutScan touched the directories: %q", ops)
	}
	want := testRecord(500)
	got, found, err := s.GetImagePulledRecord(want.ImageRef)
	if err != nil || !found {
		t.Fatalf("Get = %v, %v", found, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	name := FileName(want.ImageRef)
	if diff := cmp.Diff([]string{RecordsDir + ": lstat " + name, RecordsDir + ": open " + name}, ops); diff != "" {
		t.Errorf("operations of one Get (-want +got):\n%s", diff)
	}

	ops = nil
	if _, found, err := s.GetImagePulledRecord("sha256:absent"); found || err != nil {
		t.Errorf("Get(absent) = %v, %v; want not found", found, err)
	}
	if ok, err := s.ImagePullIntentExists("example.com/app:1"); !ok || err != nil {
		t.Errorf("ImagePullIntentExists = %v, %v", ok, err)
	}
	wantOps := []string{
		RecordsDir + ": lstat " + FileName("sha256:absent"),
		IntentsDir + ": lstat " + FileName("example.com/app:1"),
		IntentsDir + ": open " + FileName("example.com/app:1"),
	}
	if diff := cmp.Diff(wantOps, ops); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
}

// Every fail-safe rule of Get holds for a store opened WithoutScan, with the
// same answers as a store that scanned at open: an entry that cannot be used
// is an error (found, *accessor.CorruptRecordError), never "not found".
func TestWithoutScanGetFailsSafe(t *testing.T) {
	rec := testRecord(7)
	good := mustEncodeRecord(t, rec)
	alpha := bytes.Replace(good, []byte(betaVersion), []byte(alphaVersion), 1)
	unknown := bytes.Replace(good, []byte(betaVersion), []byte(`"apiVersion":"kubelet.config.k8s.io/v1gamma1"`), 1)
	tests := []struct {
		name      string
		plant     func(t *testing.T, path string)
		wantFound bool
		wantErr   error // nil: no error
	}{
		{name: "good", plant: writeFile(good), wantFound: true},
		{name: "v1alpha1", plant: writeFile(alpha), wantFound: true},
		{name: "missing", plant: func(*testing.T, string) {}},
		{name: "content names another key", plant: writeFile(mustEncodeRecord(t, testRecord(8)))},
		{name: "undecodable", plant: writeFile([]byte(`{"kind":"ImagePulledRecord",`)), wantFound: true, wantErr: accessor.ErrMalformed},
		{name: "empty", plant: writeFile(nil), wantFound: true, wantErr: accessor.ErrCorrupt},
		{name: "unknown version", plant: writeFile(unknown), wantFound: true, wantErr: accessor.ErrCorrupt},
		{name: "wrong kind", plant: writeFile(mustEncodeIntent(t, rec.ImageRef)), wantFound: true, wantErr: ErrWrongKind},
		{name: "oversized", plant: func(t *testing.T, p string) {
			writeFile(good)(t, p)
			if err := os.Truncate(p, maxFileSize+1); err != nil {
				t.Fatal(err)
			}
		}, wantFound: true, wantErr: accessor.ErrTooLarge},
		{name: "symlink to a good file in the store", plant: func(t *testing.T, p string) {
			writeRaw(t, filepath.Join(filepath.Dir(p), "elsewhere"), good)
			if err := os.Symlink("elsewhere", p); err != nil {
				t.Fatal(err)
			}
		}, wantFound: true, wantErr: ErrNotRegular},
		{name: "symlink outside the store", plant: func(t *testing.T, p string) {
			outside, _ := plantOutside(t, rec)
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
		}, wantFound: true, wantErr: ErrNotRegular},
	}
	for _, kind := range nonRegularKinds {
		tests = append(tests, struct {
			name      string
			plant     func(t *testing.T, path string)
			wantFound bool
			wantErr   error
		}{name: kind, plant: func(t *testing.T, p string) { plantNonRegular(t, kind, p) }, wantFound: true, wantErr: ErrNotRegular})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kubeletDir := t.TempDir()
			openStore(t, kubeletDir, WithoutSync()).Close()
			tc.plant(t, filepath.Join(recordsPath(kubeletDir), FileName(rec.ImageRef)))
			unscanned := openStore(t, kubeletDir, WithReadOnly(), WithoutScan())
			scanned := openStore(t, kubeletDir, WithReadOnly())
			got, found, err := unscanned.GetImagePulledRecord(rec.ImageRef)
			if found != tc.wantFound {
				t.Errorf("found = %v, want %v", found, tc.wantFound)
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				if found && cmp.Diff(rec, got) != "" {
					t.Errorf("record (-want +got):\n%s", cmp.Diff(rec, got))
				}
			} else {
				var ce *accessor.CorruptRecordError
				if got != nil || !errors.As(err, &ce) || !errors.Is(err, tc.wantErr) {
					t.Fatalf("Get = %v, %v; want a CorruptRecordError matching %v", got, err, tc.wantErr)
				}
			}
			// The same answer as the store that scanned at open.
			sgot, sfound, serr := scanned.GetImagePulledRecord(rec.ImageRef)
			if sfound != found || (serr == nil) != (err == nil) || cmp.Diff(sgot, got) != "" {
				t.Errorf("scanned store: %v, %v, %v; unscanned: %v, %v, %v", sgot, sfound, serr, got, found, err)
			}
			if err != nil && serr.Error() != err.Error() {
				t.Errorf("errors differ: scanned %q, unscanned %q", serr, err)
			}
		})
	}
}

func writeFile(data []byte) func(t *testing.T, path string) {
	return func(t *testing.T, path string) { writeRaw(t, path, data) }
}

// Keys never reach a path: a key that looks like a path is hashed like any
// other, and the store's directories must still be real directories.
func TestWithoutScanKeysAndDirectories(t *testing.T) {
	kubeletDir := t.TempDir()
	openStore(t, kubeletDir, WithoutSync()).Close()
	secret := testRecord(1)
	writeRaw(t, filepath.Join(kubeletDir, "secret"), mustEncodeRecord(t, secret))
	var ops []string
	s := openStore(t, kubeletDir, WithReadOnly(), WithoutScan(), withOpLog(&ops))
	for _, key := range []string{"../../secret", "../secret", "/etc/passwd", "..", "sha256:a/../../b"} {
		if _, found, err := s.GetImagePulledRecord(key); found || err != nil {
			t.Errorf("Get(%q) = %v, %v; want not found", key, found, err)
		}
	}
	for _, op := range ops {
		if !strings.Contains(op, ": lstat "+namePrefix) || strings.Contains(op, "/") {
			t.Errorf("operation %q names something other than a record file", op)
		}
	}
	if _, _, err := s.GetImagePulledRecord(""); !errors.Is(err, accessor.ErrInvalidKey) {
		t.Errorf("Get(\"\") = %v, want ErrInvalidKey", err)
	}

	linked := t.TempDir()
	if err := os.MkdirAll(filepath.Join(linked, DirName, IntentsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(recordsPath(kubeletDir), filepath.Join(linked, DirName, RecordsDir)); err != nil {
		t.Fatal(err)
	}
	if s, err := New(testLogger(t), linked, WithReadOnly(), WithoutScan()); !errors.Is(err, ErrUnsafeDir) {
		if s != nil {
			s.Close()
		}
		t.Errorf("New(WithoutScan) over a symlinked %s/ = %v, want ErrUnsafeDir", RecordsDir, err)
	}
}

// Without the scan, counts and lists read the directory when asked and agree
// with a store that scanned.
func TestWithoutScanCountsAndLists(t *testing.T) {
	dir := mixedDir(t)
	unscanned := openStore(t, dir, WithReadOnly(), WithoutScan())
	scanned := openStore(t, dir, WithReadOnly())
	if a, b := unscanned.CountImagePulledRecords(), scanned.CountImagePulledRecords(); a != b {
		t.Errorf("record counts %d unscanned, %d scanned", a, b)
	}
	if a, b := unscanned.CountImagePullIntents(), scanned.CountImagePullIntents(); a != b {
		t.Errorf("intent counts %d unscanned, %d scanned", a, b)
	}
	a, b := listAll(t, unscanned, false), listAll(t, scanned, false)
	if diff := cmp.Diff(a.Records, b.Records); diff != "" {
		t.Errorf("lists differ (-unscanned +scanned):\n%s", diff)
	}
	if !slices.Equal(a.Errs, b.Errs) {
		t.Errorf("list errors differ:\n%q\n%q", a.Errs, b.Errs)
	}
	writeRaw(t, filepath.Join(recordsPath(dir), FileName("sha256:new")), mustEncodeRecord(t, testRecord(5000)))
	if got, want := unscanned.CountImagePulledRecords(), scanned.CountImagePulledRecords()+1; got != want {
		t.Errorf("count after a file was added: %d, want %d (what the directory holds now)", got, want)
	}
	unscanned.Close()
	if n := unscanned.CountImagePulledRecords(); n != 0 {
		t.Errorf("count of a closed unscanned store = %d, want 0", n)
	}
}
