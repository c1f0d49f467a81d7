package fsstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/accessor"
)

func TestFileName(t *testing.T) {
	// File names found in the kubelet's pkg/kubelet/images/pullmanager/testdata
	// (pulling/ and pulled/), recomputed here: cacheFilename in
	// fs_pullrecords.go is "sha256-" and the lowercase hex SHA-256 of the key.
	for key, prefix := range map[string]string{
		"docker.io/testing/test:latest": "sha256-aef2af22",
		"repo.repo/test/test:v1":        "sha256-ee81caca",
		"testimageref":                  "sha256-b3c0cc42",
	} {
		got := FileName(key)
		if !strings.HasPrefix(got, prefix) || len(got) != len("sha256-")+64 || strings.ToLower(got) != got {
			t.Errorf("FileName(%q) = %q, want a lowercase 64-hex name starting %q", key, got, prefix)
		}
	}
}

func TestNewCreatesLayout(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(map[bool]string{true: "sync", false: "nosync"}[sync], func(t *testing.T) {
			kubeletDir := filepath.Join(t.TempDir(), "missing", "kubelet")
			var opts []Option
			if !sync {
				opts = append(opts, WithoutSync())
			}
			s := openStore(t, kubeletDir, opts...)
			for _, d := range []string{filepath.Join(kubeletDir, DirName), intentsPath(kubeletDir), recordsPath(kubeletDir)} {
				fi, err := os.Lstat(d)
				if err != nil {
					t.Fatal(err)
				}
				if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
					t.Errorf("%s: mode %v, want a 0700 directory", d, fi.Mode())
				}
			}
			if n := s.CountImagePullIntents() + s.CountImagePulledRecords(); n != 0 {
				t.Errorf("counts of a new store = %d, want 0", n)
			}
		})
	}
}

// TestModesIgnoreUmask checks 0700 directories and 0600 files under umasks
// that would otherwise change them. It changes the process umask, so it
// must not run in parallel with other tests (none in this package do).
func TestModesIgnoreUmask(t *testing.T) {
	for _, umask := range []int{0, 0o022, 0o077, 0o277} {
		t.Run(fmt.Sprintf("umask=%03o", umask), func(t *testing.T) {
			old := syscall.Umask(umask)
			defer syscall.Umask(old)
			kubeletDir := filepath.Join(t.TempDir(), "kubelet")
			s := openStore(t, kubeletDir)
			if err := s.WriteImagePullIntent(testLogger(t), "nginx:latest"); err != nil {
				t.Fatal(err)
			}
			if err := s.WriteImagePulledRecord(testLogger(t), testRecord(1)); err != nil {
				t.Fatal(err)
			}
			// Overwrite too: the mode must not depend on the old file.
			if err := s.WriteImagePulledRecord(testLogger(t), testRecord(1)); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{filepath.Join(kubeletDir, DirName), intentsPath(kubeletDir), recordsPath(kubeletDir)} {
				fi, err := os.Stat(d)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != 0o700 {
					t.Errorf("umask %03o: %s mode %v, want 0700", umask, d, got)
				}
			}
			for _, p := range []string{
				filepath.Join(intentsPath(kubeletDir), FileName("nginx:latest")),
				filepath.Join(recordsPath(kubeletDir), FileName(testRecord(1).ImageRef)),
			} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != 0o600 {
					t.Errorf("umask %03o: %s mode %v, want 0600", umask, p, got)
				}
			}
		})
	}
}

func TestWriteProducesKubeletBytes(t *testing.T) {
	kubeletDir := t.TempDir()
	s := openStore(t, kubeletDir, WithoutSync())
	logger := testLogger(t)
	if err := s.WriteImagePullIntent(logger, "docker.io/testing/test:latest"); err != nil {
		t.Fatal(err)
	}
	rec := testRecord(3)
	rec.LastUpdatedTime = metav1.NewTime(testTime.Add(123456789)) // sub-second, local zone irrelevant
	if err := s.WriteImagePulledRecord(logger, rec); err != nil {
		t.Fatal(err)
	}
	gotIntent, err := os.ReadFile(filepath.Join(intentsPath(kubeletDir), FileName("docker.io/testing/test:latest")))
	if err != nil {
		t.Fatal(err)
	}
	wantIntent := "{\"kind\":\"ImagePullIntent\",\"apiVersion\":\"kubelet.config.k8s.io/v1beta1\",\"image\":\"docker.io/testing/test:latest\"}\n"
	if diff := cmp.Diff(wantIntent, string(gotIntent)); diff != "" {
		t.Errorf("intent file (-want +got):\n%s", diff)
	}
	gotRecord, err := os.ReadFile(filepath.Join(recordsPath(kubeletDir), FileName(rec.ImageRef)))
	if err != nil {
		t.Fatal(err)
	}
	wantRecord := mustEncodeRecord(t, rec.ForStorage())
	if diff := cmp.Diff(string(wantRecord), string(gotRecord)); diff != "" {
		t.Errorf("record file (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(gotRecord), `"lastUpdatedTime":"2025-03-14T15:09:26Z"`) {
		t.Errorf("record file %s does not hold the whole-second UTC time", gotRecord)
	}
	got, found, err := s.GetImagePulledRecord(rec.ImageRef)
	if err != nil || !found {
		t.Fatalf("Get = %v, %v, %v", got, found, err)
	}
	if diff := cmp.Diff(rec.ForStorage(), got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	if names := dirNames(t, recordsPath(kubeletDir)); len(names) != 1 {
		t.Errorf("records dir holds %v, want exactly the record file", names)
	}
}

func TestReads(t *testing.T) {
	rec := testRecord(7)
	other := testRecord(8)
	tests := []struct {
		name       string
		content    []byte // written at FileName(rec.ImageRef); nil = no file
		wantFound  bool
		wantRecord *accessor.ImagePulledRecord
		wantErr    error // matched with errors.Is
		sparseSize int64 // extend the file to this size with a hole
	}{
		{name: "missing", wantFound: false},
		{name: "good", content: mustEncodeRecord(t, rec), wantFound: true, wantRecord: rec},
		{name: "content names another key", content: mustEncodeRecord(t, other), wantFound: false},
		{name: "truncated", content: mustEncodeRecord(t, rec)[:40], wantFound: true, wantErr: accessor.ErrMalformed},
		{name: "empty", content: []byte{}, wantFound: true, wantErr: accessor.ErrCorrupt},
		{name: "wrong kind", content: mustEncodeIntent(t, rec.ImageRef), wantFound: true, wantErr: ErrWrongKind},
		{name: "too large", content: mustEncodeRecord(t, rec), sparseSize: maxFileSize + 1, wantFound: true, wantErr: accessor.ErrTooLarge},
		{name: "sparse 16 GiB", content: mustEncodeRecord(t, rec), sparseSize: 16 << 30, wantFound: true, wantErr: accessor.ErrTooLarge},
		{name: "exactly the limit", content: mustEncodeRecord(t, rec), sparseSize: maxFileSize, wantFound: true, wantErr: accessor.ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kubeletDir := t.TempDir()
			p := filepath.Join(recordsPath(kubeletDir), FileName(rec.ImageRef))
			if tc.content != nil {
				writeRaw(t, p, tc.content)
			}
			if tc.sparseSize > 0 {
				if err := os.Truncate(p, tc.sparseSize); err != nil {
					t.Fatal(err)
				}
			}
			s := openStore(t, kubeletDir, WithoutSync())
			got, found, err := s.GetImagePulledRecord(rec.ImageRef)
			if found != tc.wantFound {
				t.Errorf("found = %v, want %v", found, tc.wantFound)
			}
			if tc.wantErr == nil && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tc.wantErr != nil {
				var corrupt *accessor.CorruptRecordError
				if !errors.Is(err, tc.wantErr) || !errors.As(err, &corrupt) {
					t.Fatalf("error %v, want a CorruptRecordError matching %v", err, tc.wantErr)
				}
				if want := filepath.Join(recordsPath(kubeletDir), FileName(rec.ImageRef)); corrupt.Path != want {
					t.Errorf("error path %q, want %q", corrupt.Path, want)
				}
			}
			if diff := cmp.Diff(tc.wantRecord, got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIntentReads(t *testing.T) {
	const image = "registry.example.com/app:v1"
	tests := []struct {
		name    string
		content []byte
		want    bool
		wantErr error
	}{
		{name: "missing"},
		{name: "good", content: mustEncodeIntent(t, image), want: true},
		{name: "content names another image", content: mustEncodeIntent(t, image+"x")},
		{name: "garbage", content: []byte("{\"kind\":"), wantErr: accessor.ErrCorrupt},
		{name: "wrong kind", content: mustEncodeRecord(t, testRecord(1)), wantErr: ErrWrongKind},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kubeletDir := t.TempDir()
			if tc.content != nil {
				writeRaw(t, filepath.Join(intentsPath(kubeletDir), FileName(image)), tc.content)
			}
			s := openStore(t, kubeletDir, WithoutSync())
			got, err := s.ImagePullIntentExists(image)
			if got != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("ImagePullIntentExists = %v, %v; want %v, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestListsReportBadFilesAndKeepGoodOnes(t *testing.T) {
	kubeletDir := t.TempDir()
	good := []*accessor.ImagePulledRecord{testRecord(1), testRecord(2), testRecord(3)}
	for _, r := range good {
		writeRaw(t, filepath.Join(recordsPath(kubeletDir), FileName(r.ImageRef)), mustEncodeRecord(t, r))
	}
	pulled := recordsPath(kubeletDir)
	writeRaw(t, filepath.Join(pulled, FileName("broken")), []byte("{not json"))
	writeRaw(t, filepath.Join(pulled, FileName("intent-here")), mustEncodeIntent(t, "intent-here"))
	writeRaw(t, filepath.Join(pulled, FileName("mismatch")), mustEncodeRecord(t, testRecord(4)))
	// Ignored: foreign names, sub-directories, the kubelet's temp files.
	writeRaw(t, filepath.Join(pulled, "README"), []byte("hello"))
	writeRaw(t, filepath.Join(pulled, "subdir", FileName("x")), mustEncodeRecord(t, testRecord(5)))
	if err := os.Symlink(filepath.Join(pulled, FileName(good[0].ImageRef)), filepath.Join(pulled, FileName("link"))); err != nil {
		t.Fatal(err)
	}
	intentsDir := intentsPath(kubeletDir)
	writeRaw(t, filepath.Join(intentsDir, FileName("a")), mustEncodeIntent(t, "a"))
	writeRaw(t, filepath.Join(intentsDir, FileName("rec")), mustEncodeRecord(t, testRecord(6)))

	// Open read-only so the kubelet's ".tmp" leftover is not swept and the
	// list must skip it by name.
	writeRaw(t, filepath.Join(pulled, FileName(testRecord(9).ImageRef)+".tmp"), mustEncodeRecord(t, testRecord(9)))
	for _, ro := range []bool{true, false} {
		var opts []Option
		if ro {
			opts = append(opts, WithReadOnly())
		}
		s := openStore(t, kubeletDir, append(opts, WithoutSync())...)
		for round := range 2 { // the snapshot, then the disk
			recs, err := s.ListImagePulledRecords()
			if diff := cmp.Diff(byFileName(good), recs); diff != "" {
				t.Errorf("readOnly=%v round %d: records (-want +got):\n%s", ro, round, diff)
			}
			var le *accessor.ListError
			if !errors.As(err, &le) || len(le.Errs) != 4 {
				t.Fatalf("readOnly=%v round %d: error %v, want a ListError with 4 errors", ro, round, err)
			}
			for _, want := range []error{accessor.ErrMalformed, ErrWrongKind, ErrKeyMismatch, ErrNotRegular} {
				if !errors.Is(err, want) {
					t.Errorf("round %d: list error %v does not report %v", round, err, want)
				}
			}
			intents, err := s.ListImagePullIntents()
			if diff := cmp.Diff([]*accessor.ImagePullIntent{{Image: "a"}}, intents); diff != "" {
				t.Errorf("intents (-want +got):\n%s", diff)
			}
			if !errors.As(err, &le) || len(le.Errs) != 1 || !errors.Is(err, ErrWrongKind) {
				t.Errorf("intents error %v, want one wrong-kind error", err)
			}
		}
		// Counts are by name, readable or not, like the kubelet's gauge.
		if got := s.CountImagePulledRecords(); got != 7 {
			t.Errorf("CountImagePulledRecords = %d, want 7", got)
		}
		if got := s.CountImagePullIntents(); got != 2 {
			t.Errorf("CountImagePullIntents = %d, want 2", got)
		}
		s.Close()
		if ro && len(tempFiles(t, kubeletDir)) != 1 {
			t.Errorf("a read-only open removed the temp file")
		}
	}
	if tmps := tempFiles(t, kubeletDir); len(tmps) != 0 {
		t.Errorf("temp files after a read-write open: %v", tmps)
	}
}

func TestCountsFollowWritesAndDeletes(t *testing.T) {
	kubeletDir := t.TempDir()
	logger := testLogger(t)
	s := openStore(t, kubeletDir, WithoutSync())
	for i := range 5 {
		if err := s.WriteImagePulledRecord(logger, testRecord(i)); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteImagePulledRecord(logger, testRecord(i)); err != nil { // overwrite: no change
			t.Fatal(err)
		}
	}
	for _, img := range []string{"a", "b", "a"} {
		if err := s.WriteImagePullIntent(logger, img); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := [2]int{s.CountImagePullIntents(), s.CountImagePulledRecords()}, [2]int{2, 5}; got != want {
		t.Errorf("counts = %v, want %v", got, want)
	}
	for _, ref := range []string{testRecord(0).ImageRef, testRecord(0).ImageRef, "never-written"} {
		if err := s.DeleteImagePulledRecord(logger, ref); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteImagePullIntent(logger, "a"); err != nil {
		t.Fatal(err)
	}
	if got, want := [2]int{s.CountImagePullIntents(), s.CountImagePulledRecords()}, [2]int{1, 4}; got != want {
		t.Errorf("counts after deletes = %v, want %v", got, want)
	}
	s.Close()
	s = openStore(t, kubeletDir, WithoutSync())
	if got, want := [2]int{s.CountImagePullIntents(), s.CountImagePulledRecords()}, [2]int{1, 4}; got != want {
		t.Errorf("counts after reopen = %v, want %v", got, want)
	}
}

// countingFS counts the reads that reach the disk.
type countingFS struct {
	dirFS
	mu    sync.Mutex
	reads int
}

func (c *countingFS) ReadDir() ([]fs.DirEntry, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.dirFS.ReadDir()
}

func (c *countingFS) OpenRead(name string) (fsFile, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.dirFS.OpenRead(name)
}

func (c *countingFS) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

func TestFirstListUsesOpenSnapshot(t *testing.T) {
	kubeletDir := t.TempDir()
	var want []*accessor.ImagePulledRecord
	for i := range 20 {
		r := testRecord(i)
		writeRaw(t, filepath.Join(recordsPath(kubeletDir), FileName(r.ImageRef)), mustEncodeRecord(t, r))
		writeRaw(t, filepath.Join(intentsPath(kubeletDir), FileName(r.ImageRef)), mustEncodeIntent(t, r.ImageRef))
		want = append(want, r)
	}
	want = byFileName(want)
	counters := map[string]*countingFS{}
	s := openStore(t, kubeletDir, WithoutSync(), withFS(func(name string, d dirFS) dirFS {
		c := &countingFS{dirFS: d}
		counters[name] = c
		return c
	}))
	logger := testLogger(t)
	pulled, pulling := counters[RecordsDir], counters[IntentsDir]
	if pulled.count() != 21 {
		t.Fatalf("open made %d reads in pulled/, want 21 (one listing, 20 files)", pulled.count())
	}

	before := pulled.count()
	got, err := s.ListImagePulledRecords()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first list (-want +got):\n%s", diff)
	}
	if pulled.count() != before {
		t.Errorf("the first list after open read the disk %d times, want 0", pulled.count()-before)
	}
	// The caller owns what it got: changing it changes nothing stored.
	got[0].CredentialMapping = nil
	got2, err := s.ListImagePulledRecords()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got2); diff != "" {
		t.Errorf("second list (-want +got):\n%s", diff)
	}
	if pulled.count() != before+21 {
		t.Errorf("the second list made %d reads, want 21", pulled.count()-before)
	}

	// A write before the first list of its kind makes that list read the disk.
	before = pulling.count()
	if err := s.WriteImagePullIntent(logger, "new"); err != nil {
		t.Fatal(err)
	}
	intents, err := s.ListImagePullIntents()
	if err != nil {
		t.Fatal(err)
	}
	if len(intents) != 21 || pulling.count() == before {
		t.Errorf("list after a write returned %d intents with %d reads; want 21 intents read from disk", len(intents), pulling.count()-before)
	}
}

func TestReadOnly(t *testing.T) {
	kubeletDir := t.TempDir()
	if _, err := New(testLogger(t), kubeletDir, WithReadOnly()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only New on a missing directory: %v, want not exist", err)
	}
	if names := dirNames(t, kubeletDir); len(names) != 0 {
		t.Errorf("read-only New created %v", names)
	}
	rw := openStore(t, kubeletDir, WithoutSync())
	if err := rw.WriteImagePulledRecord(testLogger(t), testRecord(1)); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	s := openStore(t, kubeletDir, WithReadOnly())
	logger := testLogger(t)
	for name, err := range map[string]error{
		"write intent":  s.WriteImagePullIntent(logger, "a"),
		"write record":  s.WriteImagePulledRecord(logger, testRecord(2)),
		"delete intent": s.DeleteImagePullIntent(logger, "a"),
		"delete record": s.DeleteImagePulledRecord(logger, testRecord(1).ImageRef),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s: %v, want ErrReadOnly", name, err)
		}
	}
	if _, found, err := s.GetImagePulledRecord(testRecord(1).ImageRef); !found || err != nil {
		t.Errorf("read-only Get: %v, %v", found, err)
	}
}

func TestClosedStore(t *testing.T) {
	s := openStore(t, t.TempDir(), WithoutSync())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	logger := testLogger(t)
	_, err1 := s.ListImagePullIntents()
	_, err2 := s.ImagePullIntentExists("a")
	_, _, err3 := s.GetImagePulledRecord("a")
	for i, err := range []error{err1, err2, err3, s.WriteImagePullIntent(logger, "a"), s.DeleteImagePulledRecord(logger, "a")} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("call %d on a closed store: %v, want ErrClosed", i, err)
		}
	}
}

func TestInvalidKeysNeverTouchDisk(t *testing.T) {
	counters := map[string]*countingFS{}
	s := openStore(t, t.TempDir(), WithoutSync(), withFS(func(name string, d dirFS) dirFS {
		c := &countingFS{dirFS: d}
		counters[name] = c
		return c
	}))
	before := counters[RecordsDir].count() + counters[IntentsDir].count()
	logger := testLogger(t)
	for _, key := range []string{"", "\xff\xfe", "a\xc0b"} {
		rec := testRecord(1)
		rec.ImageRef = key
		_, err1 := s.ImagePullIntentExists(key)
		_, _, err2 := s.GetImagePulledRecord(key)
		for i, err := range []error{err1, err2, s.WriteImagePullIntent(logger, key), s.WriteImagePulledRecord(logger, rec),
			s.DeleteImagePullIntent(logger, key), s.DeleteImagePulledRecord(logger, key)} {
			if !errors.Is(err, accessor.ErrInvalidKey) {
				t.Errorf("key %q call %d: %v, want ErrInvalidKey", key, i, err)
			}
		}
	}
	if err := s.WriteImagePulledRecord(logger, nil); !errors.Is(err, accessor.ErrNilRecord) {
		t.Errorf("nil record: %v", err)
	}
	if after := counters[RecordsDir].count() + counters[IntentsDir].count(); after != before {
		t.Errorf("invalid keys caused %d reads", after-before)
	}
}

func TestTornRecordFiles(t *testing.T) {
	// Every truncation of a valid file, and a few sector-style damages, must
	// read as corrupt (or, when the damage leaves valid JSON naming the
	// same key, as that record): never a panic, never a silent different value.
	rec := testRecord(2)
	full := mustEncodeRecord(t, rec)
	kubeletDir := t.TempDir()
	s := openStore(t, kubeletDir, WithoutSync())
	path := filepath.Join(recordsPath(kubeletDir), FileName(rec.ImageRef))
	check := func(what string, data []byte) {
		t.Helper()
		writeRaw(t, path, data)
		got, found, err := s.GetImagePulledRecord(rec.ImageRef)
		switch {
		case err != nil:
			if !found || !errors.Is(err, accessor.ErrCorrupt) {
				t.Errorf("%s: found=%v err=%v, want found and corrupt", what, found, err)
			}
		case what == "flipped" || !found:
			t.Errorf("%s: found=%v err=nil, want a corrupt error; data %q", what, found, data)
		default:
			if diff := cmp.Diff(rec, got); diff != "" {
				t.Errorf("%s decoded to another value (-want +got):\n%s", what, diff)
			}
		}
	}
	for n := range len(full) {
		check("truncated", full[:n])
	}
	zeroed := append([]byte(nil), full...)
	for i := 20; i < len(zeroed) && i < 532; i++ {
		zeroed[i] = 0
	}
	check("zeroed middle", zeroed)
	check("all zeros", make([]byte, len(full)))
	// The kubelet's format has no checksum: flipping the case of a letter
	// inside a string (a value or a map key) gives another valid record that
	// no reader can detect, so letters are left out. Every other flip of bit
	// 0x20 (structure, digits, punctuation: all become invalid characters)
	// must be caught.
	valueLetter := func(i int) bool {
		c := full[i]
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	for i := range len(full) {
		if valueLetter(i) {
			continue
		}
		flipped := append([]byte(nil), full...)
		flipped[i] ^= 0x20
		check("flipped", flipped)
	}
}

func TestTimeOutOfRangeIsRejected(t *testing.T) {
	s := openStore(t, t.TempDir(), WithoutSync())
	for _, tm := range []time.Time{
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.FixedZone("W", -3600)), // year 10000 in UTC
		time.Date(10001, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(0, 1, 1, 0, 30, 0, 0, time.FixedZone("E", 3600)), // year -1 in UTC
	} {
		rec := testRecord(1)
		rec.LastUpdatedTime = metav1.NewTime(tm)
		if err := s.WriteImagePulledRecord(testLogger(t), rec); !errors.Is(err, accessor.ErrTimeOutOfRange) {
			t.Errorf("time %v: %v, want ErrTimeOutOfRange", tm, err)
		}
	}
	if n := s.CountImagePulledRecords(); n != 0 {
		t.Errorf("%d records written", n)
	}
	rec := testRecord(1)
	rec.LastUpdatedTime = metav1.NewTime(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))
	if err := s.WriteImagePulledRecord(testLogger(t), rec); err != nil {
		t.Errorf("the last second of 9999: %v", err)
	}
	if got, _, err := s.GetImagePulledRecord(rec.ImageRef); err != nil || !got.LastUpdatedTime.Equal(&rec.LastUpdatedTime) {
		t.Errorf("read back %v, %v", got, err)
	}
}

// The kubelet directory's existing parents may be symbolic links (the
// caller's configuration); its missing parents are created 0700; an existing
// parent that is not a directory is refused.
func TestNewCreatesKubeletDirParents(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "real")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	openStore(t, filepath.Join(base, "link", "a", "kubelet")).Close()
	for _, d := range []string{"a", "a/kubelet", "a/kubelet/" + DirName, "a/kubelet/" + DirName + "/" + RecordsDir} {
		fi, err := os.Lstat(filepath.Join(target, filepath.FromSlash(d)))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want a 0700 directory", d, fi, err)
		}
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kubeletDir := range []string{file, filepath.Join(file, "kubelet")} {
		if s, err := New(testLogger(t), kubeletDir); err == nil {
			s.Close()
			t.Errorf("New(%s) over a regular file succeeded", kubeletDir)
		}
	}
}

func TestNewSyncsCreatedDirectories(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			var synced []string
			dirSynced = func(dir string) { synced = append(synced, dir) }
			defer func() { dirSynced = nil }()
			base := t.TempDir()
			kubeletDir := filepath.Join(base, "a", "kubelet")
			var opts []Option
			if !sync {
				opts = append(opts, WithoutSync())
			}
			openStore(t, kubeletDir, opts...).Close()
			var want []string
			if sync {
				im := filepath.Join(kubeletDir, DirName)
				want = []string{base, filepath.Join(base, "a"), kubeletDir, im, im}
			}
			if diff := cmp.Diff(want, synced); diff != "" {
				t.Errorf("directories synced after a create (-want +got):\n%s", diff)
			}
			// Opening again creates nothing and syncs nothing.
			synced = nil
			openStore(t, kubeletDir, opts...).Close()
			if len(synced) != 0 {
				t.Errorf("second open synced %v", synced)
			}
		})
	}
}
