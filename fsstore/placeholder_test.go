package fsstore

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/pullrecords/pullrecords/accessor"
)

// TestRepairWithoutExchange takes the path for file systems without
// renameat2's RENAME_EXCHANGE: a hard link keeps the entry while the
// placeholder is renamed over its name, so the name is never absent; a
// directory cannot be linked and is kept as it is, still failing safe.
func TestRepairWithoutExchange(t *testing.T) {
	exchangeNames = func(*os.File, string, string) error { return errExchangeUnsupported }
	t.Cleanup(func() { exchangeNames = exchange })

	kubeletDir := t.TempDir()
	records := recordsPath(kubeletDir)
	writeRaw(t, filepath.Join(records, FileName("truncated")), []byte(`{"kind":"ImagePulledRecord","api`))
	if err := syscall.Mkfifo(filepath.Join(records, FileName("fifo")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(records, FileName("dir"), "inner"), 0o700); err != nil {
		t.Fatal(err)
	}
	openStore(t, kubeletDir, WithoutSync()).Close()

	moved, err := Repair(testLogger(t), kubeletDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(moved) != 2 {
		t.Errorf("moved %v, want the truncated file and the FIFO", moved)
	}
	r, err := Inspect(kubeletDir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Problem{}
	for _, f := range r.Files {
		got[f.Name] = f.Problem
	}
	want := map[string]Problem{FileName("truncated"): ProblemPlaceholder, FileName("fifo"): ProblemPlaceholder, FileName("dir"): ProblemNotRegular}
	for name, p := range want {
		if got[name] != p {
			t.Errorf("%s: %q after repair, want %q (report %v)", name, got[name], p, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("entries left: %v, want %v (no held copy may stay behind)", got, want)
	}
	s := openStore(t, kubeletDir, WithoutSync())
	for _, key := range []string{"truncated", "fifo", "dir"} {
		if _, _, err := s.GetImagePulledRecord(key); !errors.Is(err, accessor.ErrCorrupt) {
			t.Errorf("%s after repair: %v, want a corrupt-record error", key, err)
		}
	}
	q := filepath.Join(kubeletDir, DirName, quarantineDir, RecordsDir)
	if fi, err := os.Lstat(filepath.Join(q, FileName("fifo"))); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("quarantined FIFO: %v, %v", fi, err)
	}
}

// TestPlaceholderIsReplacedByTheNextPull: the kubelet's next write of the
// key replaces the placeholder like any other file.
func TestPlaceholderIsReplacedByTheNextPull(t *testing.T) {
	kubeletDir := t.TempDir()
	writeRaw(t, filepath.Join(recordsPath(kubeletDir), FileName("x")), []byte("{"))
	openStore(t, kubeletDir, WithoutSync()).Close()
	if _, err := Repair(testLogger(t), kubeletDir, nil); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, kubeletDir, WithoutSync())
	rec := testRecord(1)
	rec.ImageRef = "x"
	if err := s.WriteImagePulledRecord(testLogger(t), rec); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.GetImagePulledRecord("x"); err != nil || !found {
		t.Fatalf("after the write: found %v, %v", found, err)
	}
	s.Close()
	if r, err := Inspect(kubeletDir); err != nil || len(r.Files) != 0 {
		t.Errorf("Inspect after the write: %+v, %v", r, err)
	}
}
