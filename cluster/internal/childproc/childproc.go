// Package childproc starts and stops the programs the cluster test
// harnesses run (etcd, kube-apiserver, containerd, kubelet, registry).
//
// Guarantees: each child runs in its own process group, logs to a file
// (and optionally a second writer), and gets SIGKILL from the kernel if the
// test process dies without stopping it (Pdeathsig, set from an OS thread
// kept alive until the child is reaped). If $PULLRECORDS_TEST_PIDFILE is
// set, every child's PID (its process group id) is appended to that file.
// Stop sends SIGTERM, then SIGKILL to the whole group after a grace period,
// and returns once the child is reaped. Non-guarantees: grandchildren that
// leave the group (containerd's shims) are the caller's to clean up.
package childproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// PIDFileEnv names the file every started child's PID is appended to.
const PIDFileEnv = "PULLRECORDS_TEST_PIDFILE"

// killGrace is how long Stop waits for a child after SIGKILL.
const killGrace = 5 * time.Second

// Process is one started child.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the child has been reaped
	err     error         // Wait's result, valid after done
}

var pidFileMu sync.Mutex

// Start starts bin with args (env, if not nil, is added to this process's
// environment), its output appended to logPath and copied to extra when
// extra is not nil.
func Start(name, bin string, args, env []string, logPath string, extra io.Writer) (*Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	fmt.Fprintf(f, "==== %s: %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	p := &Process{Name: name, LogPath: logPath, done: make(chan struct{})}
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if extra != nil {
		w := io.MultiWriter(f, extra)
		cmd.Stdout, cmd.Stderr = w, w
		cmd.WaitDelay = time.Second
	} else {
		cmd.Stdout, cmd.Stderr = f, f
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p.cmd = cmd

	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked ends, not the process:
		// keep this goroutine (and so its thread) alive until the child is reaped.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	if err := <-started; err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := RecordPID(cmd.Process.Pid); err != nil {
		_ = p.Stop(time.Second)
		return nil, err
	}
	return p, nil
}

// RecordPID appends pid to $PULLRECORDS_TEST_PIDFILE when it is set.
func RecordPID(pid int) error {
	path := os.Getenv(PIDFileEnv)
	if path == "" {
		return nil
	}
	pidFileMu.Lock()
	defer pidFileMu.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", PIDFileEnv, err)
	}
	_, err = fmt.Fprintln(f, pid)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", PIDFileEnv, path, err)
	}
	return nil
}

// PID is the child's pid, which is also its process group id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the child has ended and been reaped.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed once the child has ended and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the child's exit error; meaningful once Exited.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Stop sends SIGTERM to the child, SIGKILL to its process group after
// grace, and waits for the child to be reaped; a nil error means it is
// gone. Whatever else is left in its group is killed too. Stop of a nil or
// exited Process does nothing.
func (p *Process) Stop(grace time.Duration) error {
	if p == nil || p.Exited() {
		return nil
	}
	pgid := p.PID()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGTERM %s (pid %d): %w", p.Name, pgid, err)
	}
	select {
	case <-p.done:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return nil
	case <-time.After(grace):
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGKILL %s (pgid %d): %w", p.Name, pgid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(killGrace):
		return fmt.Errorf("%s (pid %d) still running %s after SIGKILL", p.Name, pgid, killGrace)
	}
}

// LogTail returns the last n lines of the file at path, for error messages.
func LogTail(path string, n int) string {
	lines, err := lastLines(path, n)
	if err != nil {
		return fmt.Sprintf("(no log %s: %v)", path, err)
	}
	return fmt.Sprintf("---- last %d lines of %s:\n%s", len(lines), path, strings.Join(lines, "\n"))
}

func lastLines(path string, n int) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines, nil
}

// Failure wraps what with the child's state and the last lines of its log.
func (p *Process) Failure(what error) error {
	state := "running"
	if p.Exited() {
		state = "exited"
		if p.err != nil {
			state = "exited: " + p.err.Error()
		}
	}
	lines, err := lastLines(p.LogPath, 30)
	if err != nil {
		lines = []string{"(log unreadable: " + err.Error() + ")"}
	}
	return fmt.Errorf("%w\n%s (pid %s, %s); last lines of %s:\n%s", what, p.Name, strconv.Itoa(p.PID()), state, p.LogPath, strings.Join(lines, "\n"))
}
