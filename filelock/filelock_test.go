package filelock

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const lockName = "test.lock"

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func tryLock(t *testing.T, root *os.Root, name string) *Lock {
	t.Helper()
	l, err := TryLock(root, name)
	if err != nil {
		t.Fatalf("TryLock(%s): %v", name, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func record(t *testing.T, path string) Holder {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var h Holder
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatalf("lock file holds %q: %v", data, err)
	}
	return h
}

func probe(t *testing.T, root *os.Root, name string) (Holder, bool) {
	t.Helper()
	h, held, err := Probe(root, name)
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	return h, held
}

func TestSelf(t *testing.T) {
	h := Self()
	if h.PID != os.Getpid() {
		t.Errorf("Self().PID = %d, want %d", h.PID, os.Getpid())
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		want, ok := startTime("/proc/self/stat")
		if !ok || !h.Started.Equal(want) {
			t.Errorf("Self().Started = %v, want /proc's %v (%v)", h.Started, want, ok)
		}
	}
	if h.Started.IsZero() {
		t.Error("Self().Started is zero")
	}
}

func TestHolderString(t *testing.T) {
	started := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)
	tests := []struct {
		h    Holder
		want string
	}{
		{Holder{PID: 42, Started: started}, "process 42 (started 2026-11-30T22:00:00Z)"},
		{Holder{PID: 42}, "process 42"},
		{Holder{}, "another process"},
		{Holder{Started: started}, "another process"},
	}
	for _, tc := range tests {
		if got := tc.h.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.h, got, tc.want)
		}
	}
}

// The lock belongs to the open file: a second TryLock in the holder's own
// process is refused at once, naming this process; Close releases it.
func TestTryLockRefusesASecondHolder(t *testing.T) {
	dir := t.TempDir()
	root := openRoot(t, dir)
	first := tryLock(t, root, lockName)
	path := filepath.Join(dir, lockName)
	if first.Path() != path {
		t.Errorf("Path() = %q, want %q", first.Path(), path)
	}
	if err := first.RecordErr(); err != nil {
		t.Errorf("RecordErr() = %v", err)
	}

	second, err := TryLock(root, lockName)
	if err == nil {
		second.Close()
		t.Fatal("a second TryLock succeeded while the first lock is held")
	}
	if !errors.Is(err, ErrHeld) {
		t.Errorf("TryLock = %v, want ErrHeld", err)
	}
	var he *HeldError
	if !errors.As(err, &he) {
		t.Fatalf("TryLock = %v, want a *HeldError", err)
	}
	if diff := cmp.Diff(&HeldError{Path: path, Holder: Self()}, he); diff != "" {
		t.Errorf("HeldError (-want +got):\n%s", diff)
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, Self().String()) {
		t.Errorf("error %q does not name the lock file and the holder", msg)
	}
	if h, held := probe(t, root, lockName); !held || !cmp.Equal(h, Self()) {
		t.Errorf("Probe = %v, %v; want held by %v", h, held, Self())
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if h, held := probe(t, root, lockName); held {
		t.Errorf("Probe after Close = %v, held", h)
	}
	tryLock(t, root, lockName)
}

// A new lock file is 0600 whatever the umask, holds this process's record,
// and lies in a sub-directory when the name has several components.
func TestLockFileAndRecord(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, dir)
	old := syscall.Umask(0o077)
	l, err := TryLock(root, "sub/"+lockName)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	path := filepath.Join(dir, "sub", lockName)
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != Perm {
		t.Errorf("lock file mode %v, want a regular file %v", fi.Mode(), Perm)
	}
	if diff := cmp.Diff(Self(), record(t, path)); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
}

// A lock file left by an earlier holder, whatever its record, is reused and
// its record replaced; Probe does not report the record of a lock nobody
// holds.
func TestStaleLockFileIsReused(t *testing.T) {
	for _, stale := range []string{
		`{"pid":1,"started":"2001-01-01T00:00:00Z"}` + "\n" + strings.Repeat("x", 100),
		"",
		"not json",
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, lockName)
		if err := os.WriteFile(path, []byte(stale), 0o600); err != nil {
			t.Fatal(err)
		}
		root := openRoot(t, dir)
		if h, held := probe(t, root, lockName); held || h != (Holder{}) {
			t.Errorf("%q: Probe = %v, %v; want not held, no holder", stale, h, held)
		}
		l := tryLock(t, root, lockName)
		if diff := cmp.Diff(Self(), record(t, path)); diff != "" {
			t.Errorf("%q: record after takeover (-want +got):\n%s", stale, diff)
		}
		l.Close()
	}
}

// Probe of a missing lock file reports it free and creates nothing.
func TestProbeCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	root := openRoot(t, dir)
	if h, held := probe(t, root, lockName); held || h != (Holder{}) {
		t.Errorf("Probe = %v, %v; want not held", h, held)
	}
	if _, err := os.Lstat(filepath.Join(dir, lockName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Probe created the lock file: %v", err)
	}
}

// WaitLock waits for the holder: it is seen queued behind the holder, and
// takes the lock once the holder closes it.
func TestWaitLockWaitsForTheHolder(t *testing.T) {
	dir := t.TempDir()
	root := openRoot(t, dir)
	first := tryLock(t, root, lockName)
	type result struct {
		l   *Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := WaitLock(root, lockName)
		done <- result{l, err}
	}()
	awaitWaiter(t, filepath.Join(dir, lockName), done)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("WaitLock: %v", r.err)
	}
	defer r.l.Close()
	if _, err := TryLock(root, lockName); !errors.Is(err, ErrHeld) {
		t.Errorf("TryLock while WaitLock's lock is held = %v, want ErrHeld", err)
	}
}

// awaitWaiter returns once /proc/locks shows a process queued for the flock
// of the file at path (a line "N: -> FLOCK ... maj:min:inode ..."). It
// fails the test if done delivers first: the waiter returned without
// waiting.
func awaitWaiter[T any](t *testing.T, path string, done <-chan T) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	suffix := ":" + strconv.FormatUint(fi.Sys().(*syscall.Stat_t).Ino, 10)
	for {
		select {
		case r := <-done:
			t.Fatalf("returned while the lock was held: %+v", r)
		default:
		}
		data, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Fatalf("cannot see the lock's waiters: %v", err)
		}
		for line := range strings.Lines(string(data)) {
			f := strings.Fields(line)
			if len(f) > 6 && f[1] == "->" && f[2] == "FLOCK" && strings.HasSuffix(f[6], suffix) {
				return
			}
		}
		time.Sleep(time.Millisecond) // poll; not an assertion
	}
}

// The lock file is never opened through a symbolic link or a second hard
// link, nor when it is not a regular file: the record would reach another
// file, or the open could hang.
func TestUnsafeEntriesAreRefused(t *testing.T) {
	kinds := []string{"symlink", "dangling symlink", "hard link", "directory", "fifo"}
	ops := map[string]func(*os.Root, string) error{
		"TryLock":  func(r *os.Root, n string) error { l, err := TryLock(r, n); l.Close(); return err },
		"WaitLock": func(r *os.Root, n string) error { l, err := WaitLock(r, n); l.Close(); return err },
		"Probe":    func(r *os.Root, n string) error { _, _, err := Probe(r, n); return err },
	}
	for _, kind := range kinds {
		for op, do := range ops {
			t.Run(kind+"/"+op, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, lockName)
				victim := filepath.Join(dir, "victim")
				if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
					t.Fatal(err)
				}
				var err error
				switch kind {
				case "symlink":
					err = os.Symlink("victim", path)
				case "dangling symlink":
					err = os.Symlink("created", path)
				case "hard link":
					err = os.Link(victim, path)
				case "directory":
					err = os.Mkdir(path, 0o700)
				case "fifo":
					err = syscall.Mkfifo(path, 0o600)
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := do(openRoot(t, dir), lockName); !errors.Is(err, ErrUnsafe) {
					t.Errorf("%s = %v, want ErrUnsafe", op, err)
				}
				if data, err := os.ReadFile(victim); err != nil || string(data) != "precious" {
					t.Errorf("victim changed: %q, %v", data, err)
				}
				if _, err := os.Lstat(filepath.Join(dir, "created")); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("a file was created through the link: %v", err)
				}
			})
		}
	}
}
