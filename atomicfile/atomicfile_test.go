package atomicfile

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
)

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// fixedRand makes TempName return the given suffixes in turn (16 hex
// digits each), then random ones. It restores randRead when the test ends.
func fixedRand(t *testing.T, suffixes ...string) {
	t.Helper()
	var mu sync.Mutex
	old := randRead
	randRead = func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		if len(suffixes) == 0 {
			old(b)
			return
		}
		var v []byte
		if _, err := fmt.Sscanf(suffixes[0], "%x", &v); err != nil || len(v) != len(b) {
			panic("bad suffix " + suffixes[0])
		}
		copy(b, v)
		suffixes = suffixes[1:]
	}
	t.Cleanup(func() { randRead = old })
}

func TestWriteFileCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFile(dir, "state.json", []byte("one\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dir, "state.json", []byte("two\n"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "state.json")); got != "two\n" {
		t.Errorf("content %q, want %q", got, "two\n")
	}
	fi, err := os.Lstat(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != defaultPerm {
		t.Errorf("mode %v, want %v", fi.Mode(), defaultPerm)
	}
	if diff := entries(t, dir); !slices.Equal(diff, []string{"state.json"}) {
		t.Errorf("directory holds %v, want only state.json", diff)
	}
}

func TestPermIgnoresUmask(t *testing.T) {
	dir := t.TempDir()
	// 0o666 under the usual umask (022 or 077) would come out narrower
	// without the fchmod.
	if err := WriteFile(dir, "f", []byte("x"), 0o666); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o666 {
		t.Errorf("mode %v, want 0666", fi.Mode().Perm())
	}
}

func TestSymlinkAtTargetIsReplacedNotFollowed(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{outside, filepath.Join(t.TempDir(), "missing")} {
		link := filepath.Join(dir, "status.json")
		os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		if err := WriteFile(dir, "status.json", []byte("new"), 0o600); err != nil {
			t.Fatalf("link to %s: %v", target, err)
		}
		fi, err := os.Lstat(link)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			t.Errorf("link to %s: target path is %v, want a regular file", target, fi.Mode().Type())
		}
		if got := readFile(t, link); got != "new" {
			t.Errorf("content %q", got)
		}
		if _, err := os.Lstat(filepath.Join(filepath.Dir(target), "missing")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a file appeared at the dangling link's target: %v", err)
		}
	}
	if got := readFile(t, outside); got != "precious" {
		t.Errorf("the link's target was written: %q", got)
	}
}

func TestSymlinkAtTempNameIsNeverOpened(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(t.TempDir(), "created-through-link")
	const first, second = "0000000000000001", "0000000000000002"
	// The first two temporary names the write will try are links planted
	// in advance: one to an existing file, one dangling.
	planted := map[string]string{
		"." + "f" + "." + first + tempSuffix:  outside,
		"." + "f" + "." + second + tempSuffix: dangling,
	}
	for name, target := range planted {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	fixedRand(t, first, second)
	if err := WriteFile(dir, "f", []byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "f")); got != "data" {
		t.Errorf("content %q", got)
	}
	if got := readFile(t, outside); got != "precious" {
		t.Errorf("written through the planted link: %q", got)
	}
	if _, err := os.Lstat(dangling); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file was created through the dangling link: %v", err)
	}
	for name, target := range planted {
		got, err := os.Readlink(filepath.Join(dir, name))
		if err != nil || got != target {
			t.Errorf("planted link %s changed: %q, %v", name, got, err)
		}
	}
	want := []string{"." + "f" + "." + first + tempSuffix, "." + "f" + "." + second + tempSuffix, "f"}
	if got := entries(t, dir); !slices.Equal(got, want) {
		t.Errorf("directory holds %v, want %v", got, want)
	}
}

func TestEveryTempNameTaken(t *testing.T) {
	dir := t.TempDir()
	var suffixes []string
	for i := range tempAttempts {
		s := fmt.Sprintf("%016x", i+1)
		suffixes = append(suffixes, s)
		if err := os.Symlink("/nonexistent", filepath.Join(dir, ".f."+s+tempSuffix)); err != nil {
			t.Fatal(err)
		}
	}
	fixedRand(t, suffixes...)
	err := WriteFile(dir, "f", []byte("x"), 0)
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("WriteFile = %v, want fs.ErrExist", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "f")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("target written: %v", err)
	}
}

func TestDirectoryAtTarget(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "f"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f", "inside"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dir, "f", []byte("x"), 0); err == nil {
		t.Fatal("WriteFile onto a non-empty directory succeeded")
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"f"}) {
		t.Errorf("directory holds %v, want the untouched sub-directory only", got)
	}
	if got := entries(t, filepath.Join(dir, "f")); !slices.Equal(got, []string{"inside"}) {
		t.Errorf("sub-directory holds %v", got)
	}
}

func TestInvalidNames(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"", ".", "..", "a/b", "../escape", "/abs", "a\x00b"} {
		if err := WriteFile(dir, name, []byte("x"), 0); !errors.Is(err, ErrInvalidName) {
			t.Errorf("WriteFile(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Errorf("directory holds %v", got)
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(dir), "escape")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("escaped the directory: %v", err)
	}
}

func TestDirectoryPathMayBeASymlink(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "state")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, "f", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(real, "f")); got != "x" {
		t.Errorf("content %q", got)
	}
}

func TestTempNames(t *testing.T) {
	a, b := TempName("sha256-ab"), TempName("sha256-ab")
	if a == b {
		t.Errorf("two temporary names are equal: %s", a)
	}
	for _, n := range []string{a, b} {
		if !strings.HasPrefix(n, ".sha256-ab.") || !strings.HasSuffix(n, tempSuffix) || !isTempOf(n, "sha256-ab") {
			t.Errorf("TempName = %q", n)
		}
		if isTempOf(n, "sha256-a") || isTempOf(n, "sha256-abc") {
			t.Errorf("isTempOf(%q) accepts another name", n)
		}
	}
	for _, n := range []string{"sha256-ab.tmp", ".sha256-ab.tmp", ".sha256-ab.zzzzzzzzzzzzzzzz.tmp", ".sha256-ab.0123.tmp", "sha256-ab"} {
		if isTempOf(n, "sha256-ab") {
			t.Errorf("isTempOf(%q) = true", n)
		}
	}
}

func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"state.json", TempName("state.json"), TempName("state.json"), TempName("other"), "state.json.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n, err := r.RemoveTemps("state.json")
	if err != nil || n != 2 {
		t.Errorf("RemoveTemps = %d, %v; want 2, nil", n, err)
	}
	if got := len(entries(t, dir)); got != 3 {
		t.Errorf("%d entries left, want 3: %v", got, entries(t, dir))
	}
}

// fakeDir records the operations Replace makes and fails the one named.
type fakeDir struct {
	Dir
	failOp string
	ops    []string
}

var errInjected = errors.New("injected")

func (f *fakeDir) op(name string) error {
	f.ops = append(f.ops, name)
	if name == f.failOp {
		return errInjected
	}
	return nil
}

func (f *fakeDir) CreateExcl(name string, perm fs.FileMode) (File, error) {
	if err := f.op("create"); err != nil {
		return nil, err
	}
	file, err := f.Dir.CreateExcl(name, perm)
	if err != nil {
		return nil, err
	}
	return &fakeFile{File: file, d: f}, nil
}

func (f *fakeDir) Rename(o, n string) error {
	if err := f.op("rename"); err != nil {
		return err
	}
	return f.Dir.Rename(o, n)
}

func (f *fakeDir) Remove(n string) error {
	f.ops = append(f.ops, "remove")
	return f.Dir.Remove(n)
}

func (f *fakeDir) SyncDir() error {
	if err := f.op("syncdir"); err != nil {
		return err
	}
	return f.Dir.SyncDir()
}

type fakeFile struct {
	File
	d *fakeDir
}

func (f *fakeFile) Chmod(m fs.FileMode) error {
	if err := f.d.op("chmod"); err != nil {
		return err
	}
	return f.File.Chmod(m)
}

func (f *fakeFile) Write(p []byte) (int, error) {
	if err := f.d.op("write"); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *fakeFile) Sync() error {
	if err := f.d.op("sync"); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *fakeFile) Close() error {
	err := f.d.op("close")
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}

func TestReplaceFailures(t *testing.T) {
	for _, tc := range []struct {
		failOp      string
		wantContent string // after the failed write
		wantErr     error
	}{
		{failOp: "create", wantContent: "old"},
		{failOp: "chmod", wantContent: "old"},
		{failOp: "write", wantContent: "old"},
		{failOp: "sync", wantContent: "old"},
		{failOp: "close", wantContent: "old"},
		{failOp: "rename", wantContent: "old"},
		{failOp: "syncdir", wantContent: "new", wantErr: ErrNotDurable},
		{failOp: "", wantContent: "new"},
	} {
		t.Run(tc.failOp, func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteFile(dir, "f", []byte("old"), 0); err != nil {
				t.Fatal(err)
			}
			r, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			fd := &fakeDir{Dir: r, failOp: tc.failOp}
			err = Replace(fd, "f", []byte("new"), Options{})
			switch {
			case tc.failOp == "":
				if err != nil {
					t.Fatal(err)
				}
			case !errors.Is(err, errInjected):
				t.Fatalf("Replace = %v, want the injected error", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("Replace = %v, want %v", err, tc.wantErr)
			case tc.wantErr == nil && errors.Is(err, ErrNotDurable):
				t.Fatalf("Replace = %v, must not be ErrNotDurable", err)
			}
			if got := readFile(t, filepath.Join(dir, "f")); got != tc.wantContent {
				t.Errorf("content %q, want %q", got, tc.wantContent)
			}
			if got := entries(t, dir); !slices.Equal(got, []string{"f"}) {
				t.Errorf("directory holds %v: the temporary file was left behind", got)
			}
		})
	}
}

func TestNoSync(t *testing.T) {
	dir := t.TempDir()
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fd := &fakeDir{Dir: r}
	if err := Replace(fd, "f", []byte("x"), Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	want := []string{"create", "chmod", "write", "close", "rename"}
	if !slices.Equal(fd.ops, want) {
		t.Errorf("operations %v, want %v", fd.ops, want)
	}
	fd.ops = nil
	if err := Replace(fd, "f", []byte("y"), Options{}); err != nil {
		t.Fatal(err)
	}
	want = []string{"create", "chmod", "write", "sync", "close", "rename", "syncdir"}
	if !slices.Equal(fd.ops, want) {
		t.Errorf("operations %v, want %v", fd.ops, want)
	}
	if !bytes.Equal([]byte(readFile(t, filepath.Join(dir, "f"))), []byte("y")) {
		t.Error("content not replaced")
	}
}
