package fsstore

import (
	"os"
	"path/filepath"
	"testing"
)

// problemOf returns the problem Inspect reports for dir/name, "" if none.
func problemOf(r *Report, dir, name string) Problem {
	for _, f := range r.Files {
		if f.Dir == dir && f.Name == name {
			return f.Problem
		}
	}
	return ""
}

func TestInspectStoreDirMode(t *testing.T) {
	kubeletDir := t.TempDir()
	s := openStore(t, kubeletDir)
	if err := s.WriteImagePulledRecord(testLogger(t), testRecord(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(kubeletDir, DirName), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Inspect(kubeletDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := problemOf(r, StoreDir, ""); got != ProblemBadMode {
		t.Fatalf("image_manager/ at 0755: problem %q, want %q (report %+v)", got, ProblemBadMode, r.Files)
	}
	if _, err := Repair(testLogger(t), kubeletDir, r); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(kubeletDir, DirName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != dirPerm {
		t.Errorf("after repair: mode %v, want %v", fi.Mode().Perm(), dirPerm)
	}
	if r, err = Inspect(kubeletDir); err != nil || len(r.Files) != 0 {
		t.Errorf("after repair: %+v, %v; want a clean report", r, err)
	}
}

// TestInspectOwners: an entry owned by another user than image_manager/'s
// owner is reported, and Repair changes nothing about it (it may have been
// planted; an administrator decides).
func TestInspectOwners(t *testing.T) {
	requireOrSkip(t, os.Geteuid() == 0, "changing owners needs root")
	kubeletDir := t.TempDir()
	s := openStore(t, kubeletDir)
	rec := testRecord(1)
	if err := s.WriteImagePulledRecord(testLogger(t), rec); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteImagePullIntent(testLogger(t), "registry.example/a:1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	recordName := FileName(rec.ImageRef)
	planted := filepath.Join(recordsPath(kubeletDir), recordName)
	if err := os.Lchown(planted, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(intentsPath(kubeletDir), 4243, 4243); err != nil {
		t.Fatal(err)
	}
	r, err := Inspect(kubeletDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := problemOf(r, RecordsDir, recordName); got != ProblemBadOwner {
		t.Errorf("record owned by uid 4242: problem %q, want %q (report %+v)", got, ProblemBadOwner, r.Files)
	}
	if got := problemOf(r, IntentsDir, ""); got != ProblemBadOwner {
		t.Errorf("pulling/ owned by uid 4243: problem %q, want %q", got, ProblemBadOwner)
	}
	if _, err := Repair(testLogger(t), kubeletDir, r); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(planted)
	if err != nil {
		t.Fatalf("the record was moved or removed: %v", err)
	}
	if uid, _ := fileOwner(fi); uid != 4242 {
		t.Errorf("repair changed the owner to %d", uid)
	}
	if r, err = Inspect(kubeletDir); err != nil || problemOf(r, RecordsDir, recordName) != ProblemBadOwner {
		t.Errorf("after repair the owner problem must still be reported: %+v, %v", r, err)
	}

	// image_manager/ itself owned by another user than root or the caller.
	if err := os.Lchown(filepath.Join(kubeletDir, DirName), 4244, 4244); err != nil {
		t.Fatal(err)
	}
	if r, err = Inspect(kubeletDir); err != nil || problemOf(r, StoreDir, "") != ProblemBadOwner {
		t.Errorf("image_manager/ owned by uid 4244: %+v, %v; want %q", r, err, ProblemBadOwner)
	}
}
