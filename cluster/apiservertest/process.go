package apiservertest

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

// PIDFileEnv names the environment variable that, when set, names a file to
// which every started process's PID is appended (one per line), so that a
// calling script can kill leftovers from a trap.
const PIDFileEnv = "PULLRECORDS_TEST_PIDFILE"

// Grace periods of stop: SIGTERM, then SIGKILL after termGrace.
const (
	termGrace = 5 * time.Second
	killGrace = 5 * time.Second
)

// process is one started child (etcd or kube-apiserver) in its own process group.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{} // closed once the child has been reaped
	err     error         // Wait's result, valid after done
}

var pidFileMu sync.Mutex

// startProcess starts bin with args, its output going to logPath and to extra
// (if not nil). The child gets its own process group and, as a safety net for
// test binaries that die without running Stop (a panicking test, a timeout),
// SIGKILL when the OS thread that started it ends: the start runs on a locked
// thread that stays alive until the child has been reaped.
func startProcess(name, bin string, args []string, logPath string, extra io.Writer) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, logFile: f, done: make(chan struct{})}
	cmd := exec.Command(bin, args...)
	cmd.Stdin = nil
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
	if err := recordPID(cmd.Process.Pid); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

func recordPID(pid int) error {
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

func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the child has ended (and been reaped).
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the child's process group, SIGKILL after termGrace,
// and waits for the child to be reaped. A nil error means it is gone.
func (p *process) stop() error {
	if p.exited() {
		return nil
	}
	pgid := p.pid() // Setpgid: the group id is the child's pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGTERM %s (pgid %d): %w", p.name, pgid, err)
	}
	select {
	case <-p.done:
		// Kill anything the child left behind in its group.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return nil
	case <-time.After(termGrace):
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGKILL %s (pgid %d): %w", p.name, pgid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(killGrace):
		return fmt.Errorf("%s (pid %d) still running %s after SIGKILL", p.name, pgid, killGrace)
	}
}

// logTail returns the last n lines of the process's log file.
func (p *process) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(log unreadable: " + err.Error() + ")"
	}
	return tail(b, n)
}

// failure describes a process that failed to come up, with its log's tail.
func (p *process) failure(what error) error {
	state := "running"
	if p.exited() {
		state = "exited"
		if p.err != nil {
			state = "exited: " + p.err.Error()
		}
	}
	var b strings.Builder
	b.WriteString(p.name + " (pid " + strconv.Itoa(p.pid()) + ", " + state + "); last lines of " + p.logPath + ":\n")
	b.WriteString(p.logTail(30))
	return fmt.Errorf("%w\n%s", what, b.String())
}
