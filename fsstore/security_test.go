package fsstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
)

func TestHostileKeys(t *testing.T) {
	keys := []string{
		"../../etc/passwd",
		"/etc/passwd",
		"a\x00b",
		"\x00",
		strings.Repeat("x", 1<<20),
		"",
		"\xff\xfe/../x",
		"sha256-abc",
		".tmp",
		"..",
		".",
		"a/../../x",
		`a\b`,
		FileName("a") + tempSuffix,
		"." + FileName("a") + ".0123456789abcdef" + tempSuffix,
		"registry:5000/ns/app:v1@sha256:" + strings.Repeat("0", 64),
	}
	parent := t.TempDir()
	kubeletDir := filepath.Join(parent, "kubelet")
	s := openStore(t, kubeletDir, WithoutSync())
	before := walkAll(t, parent)
	logger := testLogger(t)
	accepted := 0
	for _, key := range keys {
		rec := testRecord(5)
		rec.ImageRef = key
		errW := s.WriteImagePulledRecord(logger, rec)
		errI := s.WriteImagePullIntent(logger, key)
		if accessor.ValidateKey(key) != nil {
			if !errors.Is(errW, accessor.ErrInvalidKey) || !errors.Is(errI, accessor.ErrInvalidKey) {
				t.Errorf("key %.40q: writes returned %v, %v; want ErrInvalidKey", key, errW, errI)
			}
			continue
		}
		if errW != nil || errI != nil {
			t.Fatalf("key %.40q: %v, %v", key, errW, errI)
		}
		accepted++
		got, found, err := s.GetImagePulledRecord(key)
		if err != nil || !found {
			t.Fatalf("key %.40q: Get = %v, %v", key, found, err)
		}
		if diff := cmp.Diff(rec, got); diff != "" {
			t.Errorf("key %.40q read back (-want +got):\n%s", key, diff)
		}
		if ok, err := s.ImagePullIntentExists(key); !ok || err != nil {
			t.Errorf("key %.40q: intent exists = %v, %v", key, ok, err)
		}
	}
	// Nothing but the two record files per accepted key appeared anywhere
	// under the kubelet directory's parent.
	after := walkAll(t, parent)
	var added []string
	for p, typ := range after {
		if _, ok := before[p]; ok {
			continue
		}
		dir, name := filepath.Split(p)
		if typ.IsRegular() && strings.HasPrefix(name, namePrefix) && !strings.HasSuffix(name, tempSuffix) &&
			(filepath.Clean(dir) == filepath.Join("kubelet", DirName, IntentsDir) || filepath.Clean(dir) == filepath.Join("kubelet", DirName, RecordsDir)) {
			added = append(added, p)
			continue
		}
		t.Errorf("unexpected new path %s (%v)", p, typ)
	}
	if len(added) != 2*accepted {
		t.Errorf("%d new record files for %d accepted keys, want %d", len(added), accepted, 2*accepted)
	}
	// The keys survive a reopen too.
	s.Close()
	s = openStore(t, kubeletDir, WithoutSync())
	recs, err := s.ListImagePulledRecords()
	if err != nil || len(recs) != accepted {
		t.Errorf("after reopen: %d records, %v; want %d", len(recs), err, accepted)
	}
}

// plantOutside writes a valid record for rec outside the store and returns
// its path and content.
func plantOutside(t *testing.T, rec *accessor.ImagePulledRecord) (string, []byte) {
	t.Helper()
	outside := filepath.Join(t.TempDir(), "outside-secret")
	data := mustEncodeRecord(t, rec)
	writeRaw(t, outside, data)
	return outside, data
}

func TestSymlinkedRecordIsNeverReadThrough(t *testing.T) {
	rec := testRecord(1)
	kubeletDir := t.TempDir()
	openStore(t, kubeletDir, WithoutSync()).Close()
	outside, outsideData := plantOutside(t, rec)
	link := filepath.Join(recordsPath(kubeletDir), FileName(rec.ImageRef))
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	// An in-directory link to a valid sibling is not read through either.
	sibling := testRecord(2)
	writeRaw(t, filepath.Join(recordsPath(kubeletDir), "sibling"), mustEncodeRecord(t, sibling))
	if err := os.Symlink("sibling", filepath.Join(recordsPath(kubeletDir), FileName(sibling.ImageRef))); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, kubeletDir, WithoutSync())
	for _, ref := range []string{rec.ImageRef, sibling.ImageRef} {
		// Documented: a symbolic link reads as a corrupt record, so the
		// manager fails safe.
		got, found, err := s.GetImagePulledRecord(ref)
		if got != nil || !found || !errors.Is(err, ErrNotRegular) || !errors.Is(err, accessor.ErrCorrupt) {
			t.Errorf("Get through a symlink = %v, %v, %v; want (nil, true, corrupt/not regular)", got, found, err)
		}
	}
	for round := range 2 { // the open-time snapshot, then the disk
		if _, err := s.ListImagePulledRecords(); !errors.Is(err, ErrNotRegular) {
			t.Errorf("list %d with symlinks: %v, want ErrNotRegular reported", round, err)
		}
	}

	// Write replaces the link, leaving the target alone.
	newRec := testRecord(1)
	newRec.CredentialMapping = nil
	if err := s.WriteImagePulledRecord(testLogger(t), newRec); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("after write, %s is %v (%v), want a regular file", link, fi, err)
	}
	if data, err := os.ReadFile(outside); err != nil || !bytes.Equal(data, outsideData) {
		t.Errorf("the link's target changed: %q, %v", data, err)
	}
	if got, _, err := s.GetImagePulledRecord(rec.ImageRef); err != nil || cmp.Diff(newRec, got) != "" {
		t.Errorf("after write: %v, %v", got, err)
	}

	// Delete removes the link only.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteImagePulledRecord(testLogger(t), rec.ImageRef); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("link still there after delete: %v", err)
	}
	if data, err := os.ReadFile(outside); err != nil || !bytes.Equal(data, outsideData) {
		t.Errorf("delete touched the link's target: %q, %v", data, err)
	}
}

// plantNonRegular makes path a non-regular entry of the given kind.
func plantNonRegular(t *testing.T, kind, path string) {
	t.Helper()
	var err error
	switch kind {
	case "directory":
		err = os.Mkdir(path, 0o700)
	case "non-empty directory":
		if err = os.Mkdir(path, 0o700); err == nil {
			err = os.WriteFile(filepath.Join(path, "x"), []byte("x"), 0o600)
		}
	case "fifo":
		err = syscall.Mkfifo(path, 0o600)
	case "socket":
		err = syscall.Mknod(path, syscall.S_IFSOCK|0o600, 0)
	case "symlink to a directory":
		err = os.Symlink(".", path)
	case "dangling symlink":
		err = os.Symlink("nowhere", path)
	default:
		t.Fatalf("unknown kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
}

var nonRegularKinds = []string{"directory", "non-empty directory", "fifo", "socket", "symlink to a directory", "dangling symlink"}

// Any entry under a record name that is not a regular file is corrupt on
// every read path: point reads, the open-time snapshot and later lists, of
// records and of intents, whether the store is writable or read-only.
func TestNonRegularEntriesAreCorruptEverywhere(t *testing.T) {
	for _, kind := range nonRegularKinds {
		for _, ro := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/readOnly=%v", kind, ro), func(t *testing.T) {
				kubeletDir := t.TempDir()
				openStore(t, kubeletDir, WithoutSync()).Close()
				const ref, image = "sha256:bad", "registry.example.com/app:bad"
				plantNonRegular(t, kind, filepath.Join(recordsPath(kubeletDir), FileName(ref)))
				plantNonRegular(t, kind, filepath.Join(intentsPath(kubeletDir), FileName(image)))
				good := testRecord(1)
				writeRaw(t, filepath.Join(recordsPath(kubeletDir), FileName(good.ImageRef)), mustEncodeRecord(t, good))
				writeRaw(t, filepath.Join(intentsPath(kubeletDir), FileName("good")), mustEncodeIntent(t, "good"))
				opts := []Option{WithoutSync()}
				if ro {
					opts = append(opts, WithReadOnly())
				}
				s := openStore(t, kubeletDir, opts...)

				if _, found, err := s.GetImagePulledRecord(ref); !found || !errors.Is(err, ErrNotRegular) || !isCorrupt(err) {
					t.Errorf("Get = %v, %v; want found and a CorruptRecordError with ErrNotRegular", found, err)
				}
				if ok, err := s.ImagePullIntentExists(image); ok || !errors.Is(err, ErrNotRegular) || !isCorrupt(err) {
					t.Errorf("ImagePullIntentExists = %v, %v; want a CorruptRecordError with ErrNotRegular", ok, err)
				}
				for round := range 2 { // the open-time snapshot, then the disk
					recs, err := s.ListImagePulledRecords()
					if len(recs) != 1 || !isListOfOne(err, FileName(ref)) {
						t.Errorf("records list %d: %d records, %v; want the good one and a ListError naming %s", round, len(recs), err, FileName(ref))
					}
					intents, err := s.ListImagePullIntents()
					if len(intents) != 1 || !isListOfOne(err, FileName(image)) {
						t.Errorf("intents list %d: %d intents, %v; want the good one and a ListError naming %s", round, len(intents), err, FileName(image))
					}
				}
				// Counted, like every entry under a record name.
				if s.CountImagePulledRecords() != 2 || s.CountImagePullIntents() != 2 {
					t.Errorf("counts %d, %d; want 2, 2", s.CountImagePulledRecords(), s.CountImagePullIntents())
				}
			})
		}
	}
}

func isCorrupt(err error) bool {
	var ce *accessor.CorruptRecordError
	return errors.As(err, &ce)
}

// isListOfOne says whether err is a ListError with exactly one error, a
// not-regular CorruptRecordError for name.
func isListOfOne(err error, name string) bool {
	var le *accessor.ListError
	if !errors.As(err, &le) || len(le.Errs) != 1 {
		return false
	}
	var ce *accessor.CorruptRecordError
	return errors.As(le.Errs[0], &ce) && filepath.Base(ce.Path) == name && errors.Is(ce, ErrNotRegular)
}

// A sub-directory under a temporary name is not a record, and the sweep at
// open leaves it alone.
func TestTempNamedDirectoryIsIgnored(t *testing.T) {
	kubeletDir := t.TempDir()
	openStore(t, kubeletDir, WithoutSync()).Close()
	p := filepath.Join(recordsPath(kubeletDir), FileName("x")+tempSuffix)
	plantNonRegular(t, "non-empty directory", p)
	s := openStore(t, kubeletDir, WithoutSync())
	if _, err := s.ListImagePulledRecords(); err != nil {
		t.Errorf("list = %v", err)
	}
	if _, err := os.Lstat(p); err != nil {
		t.Errorf("the sweep touched the directory: %v", err)
	}
}

func TestSymlinkedDirectoriesAreRefused(t *testing.T) {
	for _, sub := range []string{DirName, filepath.Join(DirName, IntentsDir), filepath.Join(DirName, RecordsDir)} {
		t.Run(sub, func(t *testing.T) {
			kubeletDir := t.TempDir()
			outside := t.TempDir()
			for _, d := range []string{IntentsDir, RecordsDir} {
				if err := os.MkdirAll(filepath.Join(outside, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(kubeletDir, sub)), 0o700); err != nil {
				t.Fatal(err)
			}
			target := outside
			if sub != DirName {
				target = filepath.Join(outside, filepath.Base(sub))
			}
			if err := os.Symlink(target, filepath.Join(kubeletDir, sub)); err != nil {
				t.Fatal(err)
			}
			for _, ro := range []bool{false, true} {
				var opts []Option
				if ro {
					opts = append(opts, WithReadOnly())
				}
				_, err := New(testLogger(t), kubeletDir, opts...)
				if !errors.Is(err, ErrUnsafeDir) {
					t.Errorf("readOnly=%v: New = %v, want ErrUnsafeDir", ro, err)
				}
			}
			if _, err := Inspect(kubeletDir); !errors.Is(err, ErrUnsafeDir) {
				t.Errorf("Inspect = %v, want ErrUnsafeDir", err)
			}
			if got := walkAll(t, outside); len(got) != 3 {
				t.Errorf("something was created outside: %v", got)
			}
		})
	}
}

func TestSymlinkedKubeletDirIsAllowed(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "kubelet")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, link, WithoutSync())
	if err := s.WriteImagePullIntent(testLogger(t), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(intentsPath(real), FileName("a"))); err != nil {
		t.Errorf("intent not under the link's target: %v", err)
	}
}
