package fsstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pullrecords/pullrecords/accessor"
)

// treeState maps each path under root to its mode and content.
func treeState(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for p, typ := range walkAll(t, root) {
		full := filepath.Join(root, p)
		fi, err := os.Lstat(full)
		if err != nil {
			t.Fatal(err)
		}
		state := fi.Mode().String() + " " + fi.ModTime().String()
		if typ.IsRegular() {
			data, err := os.ReadFile(full)
			if err != nil {
				t.Fatal(err)
			}
			state += " " + string(data)
		}
		out[p] = state
	}
	return out
}

// problemTree builds a store directory with one entry per problem.
func problemTree(t *testing.T) (kubeletDir string, want []FileReport) {
	t.Helper()
	kubeletDir = t.TempDir()
	pulled, pulling := recordsPath(kubeletDir), intentsPath(kubeletDir)
	good := testRecord(1)
	writeRaw(t, filepath.Join(pulled, FileName(good.ImageRef)), mustEncodeRecord(t, good))
	writeRaw(t, filepath.Join(pulling, FileName("good")), mustEncodeIntent(t, "good"))

	alpha := bytes.Replace(mustEncodeIntent(t, "old"), []byte(betaVersion), []byte(alphaVersion), 1)
	writeRaw(t, filepath.Join(pulling, FileName("old")), alpha)
	writeRaw(t, filepath.Join(pulling, FileName("rec")), mustEncodeRecord(t, testRecord(2)))
	writeRaw(t, filepath.Join(pulling, "."+FileName("x")+".abcd.tmp"), []byte("partial"))
	writeRaw(t, filepath.Join(pulled, FileName("corrupt")), []byte("{"))
	writeRaw(t, filepath.Join(pulled, FileName("mismatch")), mustEncodeRecord(t, testRecord(3)))
	writeRaw(t, filepath.Join(pulled, FileName("y")+".tmp"), []byte("kubelet leftover"))
	writeRaw(t, filepath.Join(pulled, "notes.txt"), []byte("hello"))
	bad := testRecord(4)
	writeRaw(t, filepath.Join(pulled, FileName(bad.ImageRef)), mustEncodeRecord(t, bad))
	if err := os.Chmod(filepath.Join(pulled, FileName(bad.ImageRef)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(pulled, FileName("link"))); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(pulled, "subdir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(pulled, FileName("fifo")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pulling, 0o755); err != nil {
		t.Fatal(err)
	}
	want = []FileReport{
		{Dir: IntentsDir, Problem: ProblemBadMode},
		{Dir: IntentsDir, Name: "." + FileName("x") + ".abcd.tmp", Problem: ProblemTempFile},
		{Dir: IntentsDir, Name: FileName("old"), Kind: accessor.KindImagePullIntent, Version: accessor.VersionV1alpha1, Key: "old", Problem: ProblemOldVersion},
		{Dir: IntentsDir, Name: FileName("rec"), Kind: accessor.KindImagePulledRecord, Version: accessor.VersionV1beta1, Key: testRecord(2).ImageRef, Problem: ProblemWrongKind},
		{Dir: RecordsDir, Name: FileName("corrupt"), Problem: ProblemCorrupt},
		{Dir: RecordsDir, Name: FileName("fifo"), Problem: ProblemNotRegular},
		{Dir: RecordsDir, Name: FileName("link"), Problem: ProblemNotRegular},
		{Dir: RecordsDir, Name: FileName("mismatch"), Kind: accessor.KindImagePulledRecord, Version: accessor.VersionV1beta1, Key: testRecord(3).ImageRef, Problem: ProblemKeyMismatch},
		{Dir: RecordsDir, Name: FileName(bad.ImageRef), Kind: accessor.KindImagePulledRecord, Version: accessor.VersionV1beta1, Key: bad.ImageRef, Problem: ProblemBadMode},
		{Dir: RecordsDir, Name: FileName("y") + ".tmp", Problem: ProblemTempFile},
		{Dir: RecordsDir, Name: "notes.txt", Problem: ProblemForeignFile},
		{Dir: RecordsDir, Name: "subdir", Problem: ProblemNotRegular},
	}
	return kubeletDir, want
}

func sortReports(fr []FileReport) []FileReport {
	out := slices.Clone(fr)
	slices.SortFunc(out, func(a, b FileReport) int {
		if a.Dir != b.Dir {
			return cmpString(a.Dir, b.Dir)
		}
		return cmpString(a.Name, b.Name)
	})
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestInspect(t *testing.T) {
	kubeletDir, want := problemTree(t)
	before := treeState(t, filepath.Dir(kubeletDir))
	r, err := Inspect(kubeletDir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sortReports(want), sortReports(r.Files), cmpopts.IgnoreFields(FileReport{}, "Err")); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	for _, f := range r.Files {
		if f.Problem != ProblemOldVersion && f.Problem != ProblemTempFile && f.Problem != ProblemForeignFile && f.Err == nil {
			t.Errorf("%s/%s (%s) has no error", f.Dir, f.Name, f.Problem)
		}
	}
	// good + old (intents), good + bad-mode (records).
	if r.Intents != 2 || r.Records != 2 {
		t.Errorf("counts %d intents, %d records; want 2, 2", r.Intents, r.Records)
	}
	if diff := cmp.Diff(before, treeState(t, filepath.Dir(kubeletDir))); diff != "" {
		t.Errorf("Inspect changed the tree (-before +after):\n%s", diff)
	}
	if _, err := Inspect(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("Inspect of a missing directory succeeded")
	}
}

func TestRepair(t *testing.T) {
	kubeletDir, _ := problemTree(t)
	corruptData, err := os.ReadFile(filepath.Join(recordsPath(kubeletDir), FileName("corrupt")))
	if err != nil {
		t.Fatal(err)
	}
	// Something already in quarantine under the same name is kept.
	writeRaw(t, filepath.Join(kubeletDir, DirName, quarantineDir, RecordsDir, FileName("corrupt")), []byte("earlier"))
	r, err := Inspect(kubeletDir)
	if err != nil {
		t.Fatal(err)
	}
	moved, err := Repair(testLogger(t), kubeletDir, r)
	if err != nil {
		t.Fatal(err)
	}
	wantMoved := []string{
		IntentsDir + "/" + FileName("rec"),
		RecordsDir + "/" + FileName("corrupt"),
		RecordsDir + "/" + FileName("fifo"),
		RecordsDir + "/" + FileName("link"),
		RecordsDir + "/" + FileName("mismatch"),
		RecordsDir + "/notes.txt",
		RecordsDir + "/subdir",
	}
	if diff := cmp.Diff(wantMoved, moved, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("moved (-want +got):\n%s", diff)
	}
	q := filepath.Join(kubeletDir, DirName, quarantineDir, RecordsDir)
	if data, err := os.ReadFile(filepath.Join(q, FileName("corrupt")+".1")); err != nil || !bytes.Equal(data, corruptData) {
		t.Errorf("quarantined corrupt file: %q, %v", data, err)
	}
	if data, err := os.ReadFile(filepath.Join(q, FileName("corrupt"))); err != nil || string(data) != "earlier" {
		t.Errorf("earlier quarantined file: %q, %v", data, err)
	}
	if fi, err := os.Lstat(filepath.Join(q, FileName("link"))); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("quarantined link: %v, %v", fi, err)
	}
	for _, d := range []string{filepath.Join(kubeletDir, DirName, quarantineDir), q} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v", d, fi, err)
		}
	}
	// Nothing left to repair but the fail-safe placeholders, one for each
	// entry a check read as an error: they still read as corrupt, so a check
	// for those keys keeps answering "must pull".
	r2, err := Inspect(kubeletDir)
	if err != nil {
		t.Fatal(err)
	}
	wantLeft := []FileReport{
		{Dir: IntentsDir, Name: FileName("rec"), Problem: ProblemPlaceholder},
		{Dir: RecordsDir, Name: FileName("corrupt"), Problem: ProblemPlaceholder},
		{Dir: RecordsDir, Name: FileName("fifo"), Problem: ProblemPlaceholder},
		{Dir: RecordsDir, Name: FileName("link"), Problem: ProblemPlaceholder},
	}
	if diff := cmp.Diff(sortReports(wantLeft), sortReports(r2.Files)); diff != "" || r2.Intents != 2 || r2.Records != 2 {
		t.Errorf("after repair (-want +got):\n%s\n%+v", diff, r2)
	}
	for _, f := range wantLeft {
		p := filepath.Join(kubeletDir, DirName, f.Dir, f.Name)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != filePerm {
			t.Errorf("placeholder %s: %v, %v", p, fi, err)
		}
	}
	// A second repair changes nothing.
	moved2, err := Repair(testLogger(t), kubeletDir, nil)
	if err != nil || len(moved2) != 0 {
		t.Errorf("second Repair = %v, %v; want nothing moved", moved2, err)
	}
	s := openStore(t, kubeletDir, WithoutSync())
	for _, key := range []string{"corrupt", "fifo", "link"} {
		if _, _, err := s.GetImagePulledRecord(key); !errors.Is(err, accessor.ErrCorrupt) {
			t.Errorf("record %q after repair: %v, want a corrupt-record error", key, err)
		}
	}
	if _, err := s.ImagePullIntentExists("rec"); !errors.Is(err, accessor.ErrCorrupt) {
		t.Errorf("intent \"rec\" after repair: %v, want a corrupt-record error", err)
	}
	data, err := os.ReadFile(filepath.Join(intentsPath(kubeletDir), FileName("old")))
	if err != nil || string(data) != string(mustEncodeIntent(t, "old")) {
		t.Errorf("old intent after repair: %q, %v", data, err)
	}
}

func TestRepairSkipsEntriesFixedSinceInspect(t *testing.T) {
	kubeletDir := t.TempDir()
	p := filepath.Join(recordsPath(kubeletDir), FileName("x"))
	writeRaw(t, p, []byte("{"))
	openStore(t, kubeletDir, WithoutSync()).Close()
	r, err := Inspect(kubeletDir)
	if err != nil || len(r.Files) != 1 {
		t.Fatalf("Inspect: %+v, %v", r, err)
	}
	rec := testRecord(1)
	rec.ImageRef = "x"
	writeRaw(t, p, mustEncodeRecord(t, rec))
	moved, err := Repair(testLogger(t), kubeletDir, r)
	if err != nil || len(moved) != 0 {
		t.Errorf("Repair = %v, %v; want nothing moved", moved, err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("the fixed file was moved: %v", err)
	}
	if _, err := Repair(testLogger(t), kubeletDir, &Report{Files: []FileReport{{Dir: RecordsDir, Name: "../../x", Problem: ProblemCorrupt}}}); err == nil {
		t.Error("Repair accepted a report naming a path outside the directory")
	}
	if _, err := Repair(testLogger(t), kubeletDir, &Report{Files: []FileReport{{Dir: "etc", Name: "x", Problem: ProblemCorrupt}}}); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Errorf("Repair with an unknown directory: %v", err)
	}
}
