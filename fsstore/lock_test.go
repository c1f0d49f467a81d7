package fsstore

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/filelock"
)

func lockPath(kubeletDir string) string { return filepath.Join(kubeletDir, DirName, LockFile) }

// A second writable open fails at once, naming the holder; read-only opens
// need no lock; Close releases it.
func TestSecondWriterIsRefused(t *testing.T) {
	kubeletDir := t.TempDir()
	first := openStore(t, kubeletDir, WithoutSync())

	// Were New to wait for the lock, the test would hang here: the first
	// store holds it until the test ends.
	s, err := New(testLogger(t), kubeletDir, WithoutSync())
	if err == nil {
		s.Close()
		t.Fatal("a second writable store opened while the first is open")
	}
	if !errors.Is(err, ErrLocked) {
		t.Errorf("New = %v, want ErrLocked", err)
	}
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("New = %v, want a *LockedError", err)
	}
	if le.PID != os.Getpid() || le.Path != lockPath(kubeletDir) {
		t.Errorf("LockedError = %+v, want PID %d, path %s", le, os.Getpid(), lockPath(kubeletDir))
	}
	if le.Started.IsZero() || le.Started.After(time.Now()) || time.Since(le.Started) > time.Hour {
		t.Errorf("LockedError.Started = %v, want this process's start", le.Started)
	}
	if msg := err.Error(); !strings.Contains(msg, "process "+strconv.Itoa(os.Getpid())) || !strings.Contains(msg, LockFile) {
		t.Errorf("error %q does not name the holder and the lock file", msg)
	}

	// Repair is a writer too.
	if _, err := Repair(testLogger(t), kubeletDir, nil); !errors.Is(err, ErrLocked) {
		t.Errorf("Repair while locked = %v, want ErrLocked", err)
	}

	// Readers need no lock.
	ro := openStore(t, kubeletDir, WithReadOnly())
	if _, err := ro.ListImagePulledRecords(); err != nil {
		t.Error(err)
	}
	ro.Close()

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := openStore(t, kubeletDir, WithoutSync())
	if err := second.WriteImagePullIntent(testLogger(t), "a"); err != nil {
		t.Error(err)
	}
}

// The open-time sweep runs only under the lock: a refused writer, and a
// reader, leave the holder's in-flight temporary files alone.
func TestSweepOnlyUnderTheLock(t *testing.T) {
	kubeletDir := t.TempDir()
	openStore(t, kubeletDir, WithoutSync())
	// Stand-ins for writes the holder has in flight.
	inflight := []string{
		filepath.Join(recordsPath(kubeletDir), "."+FileName("r")+".0123456789abcdef"+tempSuffix),
		filepath.Join(intentsPath(kubeletDir), "."+FileName("i")+".0123456789abcdef"+tempSuffix),
	}
	for _, p := range inflight {
		writeRaw(t, p, []byte("partial"))
	}
	if s, err := New(testLogger(t), kubeletDir, WithoutSync()); !errors.Is(err, ErrLocked) {
		if err == nil {
			s.Close()
		}
		t.Errorf("second writable New = %v, want ErrLocked", err)
	}
	openStore(t, kubeletDir, WithReadOnly()).Close()
	for _, p := range inflight {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("the holder's temporary file was removed: %v", err)
		}
	}
}

func TestLockFile(t *testing.T) {
	kubeletDir := t.TempDir()
	old := syscall.Umask(0)
	s := openStore(t, kubeletDir, WithoutSync())
	syscall.Umask(old)
	fi, err := os.Lstat(lockPath(kubeletDir))
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("lock file mode %v, want a regular file 0600", fi.Mode())
	}
	data, err := os.ReadFile(lockPath(kubeletDir))
	if err != nil {
		t.Fatal(err)
	}
	var h filelock.Holder
	if err := json.Unmarshal(data, &h); err != nil || h.PID != filelock.Self().PID || !h.Started.Equal(filelock.Self().Started) {
		t.Errorf("lock file holds %q (%v), want this process", data, err)
	}
	// The kubelet's directories hold nothing new, and the lock file is not
	// a record to anyone.
	if got := dirNames(t, filepath.Join(kubeletDir, DirName)); strings.Join(got, ",") != LockFile+","+RecordsDir+","+IntentsDir {
		t.Errorf("image_manager holds %v", got)
	}
	s.Close()
	// A stale lock file (its holder gone) is reused.
	openStore(t, kubeletDir, WithoutSync())
}

// The lock file is never opened through a symbolic link or a second hard
// link: writing the holder into it would change another file.
func TestLockFileIsNotFollowed(t *testing.T) {
	for _, kind := range []string{"symlink", "dangling symlink", "hard link", "directory", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			kubeletDir := t.TempDir()
			openStore(t, kubeletDir, WithoutSync()).Close()
			os.Remove(lockPath(kubeletDir))
			victim := filepath.Join(kubeletDir, "victim")
			writeRaw(t, victim, []byte("precious"))
			var err error
			switch kind {
			case "symlink":
				err = os.Symlink(victim, lockPath(kubeletDir))
			case "dangling symlink":
				err = os.Symlink(filepath.Join(kubeletDir, "created"), lockPath(kubeletDir))
			case "hard link":
				err = os.Link(victim, lockPath(kubeletDir))
			case "directory":
				err = os.Mkdir(lockPath(kubeletDir), 0o700)
			case "fifo":
				err = syscall.Mkfifo(lockPath(kubeletDir), 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			s, err := New(testLogger(t), kubeletDir, WithoutSync())
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, ErrUnsafeLockFile) {
				t.Errorf("New = %v, want ErrUnsafeLockFile", err)
			}
			if data, err := os.ReadFile(victim); err != nil || string(data) != "precious" {
				t.Errorf("victim changed: %q, %v", data, err)
			}
			if _, err := os.Lstat(filepath.Join(kubeletDir, "created")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a file was created through the link: %v", err)
			}
			// Read-only opens do not touch the lock file.
			openStore(t, kubeletDir, WithReadOnly())
		})
	}
}

const lockEnvDir = "FSSTORE_LOCK_HOLDER_DIR"

// TestLockHolderHelper is the child of TestLockAcrossProcesses: it opens
// the store, says so and waits to be killed. Run directly, it does nothing.
func TestLockHolderHelper(t *testing.T) {
	dir := os.Getenv(lockEnvDir)
	if dir == "" {
		t.Skip("helper process for TestLockAcrossProcesses")
	}
	s, err := New(klog.Background(), dir, WithoutSync())
	if err != nil {
		fmt.Fprintf(os.Stdout, "error %v\n", err)
		os.Exit(3)
	}
	if err := s.WriteImagePullIntent(klog.Background(), "from-child"); err != nil {
		fmt.Fprintf(os.Stdout, "error %v\n", err)
		os.Exit(3)
	}
	fmt.Fprintln(os.Stdout, "locked")
	select {} // until killed
}

func TestLockAcrossProcesses(t *testing.T) {
	kubeletDir := t.TempDir()
	before := time.Now()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolderHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockEnvDir+"="+kubeletDir)
	cmd.Stderr = io.Discard
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("child said %q, %v", line, err)
	}

	s, err := New(testLogger(t), kubeletDir, WithoutSync())
	if err == nil {
		s.Close()
		t.Fatal("opened the store while another process holds it")
	}
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("New = %v, want a *LockedError", err)
	}
	if le.PID != cmd.Process.Pid {
		t.Errorf("LockedError names PID %d, want the child's %d", le.PID, cmd.Process.Pid)
	}
	// /proc start times have a resolution of 10ms, the boot time of 1s.
	if le.Started.Before(before.Add(-2*time.Second)) || le.Started.After(time.Now().Add(2*time.Second)) {
		t.Errorf("LockedError.Started = %v, want about %v", le.Started, before)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("error %q does not name the child", err)
	}
	// A reader sees the child's writes without a lock.
	ro := openStore(t, kubeletDir, WithReadOnly())
	if ok, err := ro.ImagePullIntentExists("from-child"); !ok || err != nil {
		t.Errorf("reader: intent exists = %v, %v", ok, err)
	}

	// flock dies with the process: no clean-up needed after kill -9.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	s = openStore(t, kubeletDir, WithoutSync())
	if ok, err := s.ImagePullIntentExists("from-child"); !ok || err != nil {
		t.Errorf("after the child died: intent exists = %v, %v", ok, err)
	}
	if err := s.WriteImagePullIntent(testLogger(t), "from-parent"); err != nil {
		t.Error(err)
	}
	data, _ := os.ReadFile(lockPath(kubeletDir))
	var h filelock.Holder
	if err := json.Unmarshal(data, &h); err != nil || h.PID != filelock.Self().PID || !h.Started.Equal(filelock.Self().Started) {
		t.Errorf("lock file after takeover: %q, %v; want this process", data, err)
	}
}
