package filelock

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// holdEnv, set to a directory, makes the test binary a lock holder instead
// of running tests: it takes the lock on lockName there, prints "locked",
// and holds it until its standard input ends or it is killed.
const holdEnv = "FILELOCK_TEST_HOLD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdEnv); dir != "" {
		os.Exit(hold(dir))
	}
	os.Exit(m.Run())
}

func hold(dir string) int {
	root, err := os.OpenRoot(dir)
	if err != nil {
		fmt.Println("error", err)
		return 3
	}
	l, err := TryLock(root, lockName)
	root.Close()
	if err != nil {
		fmt.Println("error", err)
		return 3
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	l.Close()
	return 0
}

// startHolder starts a process holding the lock on lockName in dir and
// returns once it holds it. The process is killed when the test ends.
func startHolder(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holdEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("holder said %q, %v", line, err)
	}
	return cmd
}

// Another process's lock refuses TryLock with its record (PID and start
// time), shows in Probe, holds WaitLock back, and dies with the process:
// after kill -9 the waiting WaitLock takes it with no clean-up.
func TestLockAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, lockName)
	child := startHolder(t, dir)
	want := Holder{PID: child.Process.Pid}
	if started, ok := startTime("/proc/" + strconv.Itoa(want.PID) + "/stat"); ok {
		want.Started = started
	} else {
		t.Fatal("cannot read the holder's start time from /proc")
	}
	root := openRoot(t, dir)

	l, err := TryLock(root, lockName)
	if err == nil {
		l.Close()
		t.Fatal("TryLock succeeded while another process holds the lock")
	}
	var he *HeldError
	if !errors.As(err, &he) || !errors.Is(err, ErrHeld) {
		t.Fatalf("TryLock = %v, want a *HeldError", err)
	}
	if diff := cmp.Diff(&HeldError{Path: path, Holder: want}, he); diff != "" {
		t.Errorf("HeldError (-want +got):\n%s", diff)
	}
	if h, held := probe(t, root, lockName); !held || !cmp.Equal(h, want) {
		t.Errorf("Probe = %v, %v; want held by %v", h, held, want)
	}

	type result struct {
		l   *Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := WaitLock(root, lockName)
		done <- result{l, err}
	}()
	awaitWaiter(t, path, done)

	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("WaitLock after the holder was killed: %v", r.err)
	}
	defer r.l.Close()
	if diff := cmp.Diff(Self(), record(t, path)); diff != "" {
		t.Errorf("record after takeover (-want +got):\n%s", diff)
	}
	if h, held := probe(t, root, lockName); !held || !cmp.Equal(h, Self()) {
		t.Errorf("Probe after takeover = %v, %v; want held by this process", h, held)
	}
}

// A lock this process holds refuses another process.
func TestOtherProcessIsRefused(t *testing.T) {
	dir := t.TempDir()
	tryLock(t, openRoot(t, dir), lockName)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holdEnv+"="+dir)
	cmd.Stdin = nil // the holder would return at once on EOF
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("child: %v, output %q; want exit status 3", err, out)
	}
	want := fmt.Sprintf("error %s\n", &HeldError{Path: filepath.Join(dir, lockName), Holder: Self()})
	if string(out) != want {
		t.Errorf("child said %q, want %q", out, want)
	}
}
