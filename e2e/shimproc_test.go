//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// shimStartTimeout bounds the wait for a shim's /healthz.
const shimStartTimeout = 30 * time.Second

var (
	shimBinOnce sync.Once
	shimBin     string
	shimBinErr  error
)

// pullrecordsBinary builds cmd/pullrecords once per test binary, with the
// repository's go.work, into a temporary directory.
func pullrecordsBinary(ctx context.Context) (string, error) {
	shimBinOnce.Do(func() {
		repo, err := filepath.Abs("..")
		if err != nil {
			shimBinErr = err
			return
		}
		dir, err := os.MkdirTemp("", "pullrecords-bin-")
		if err != nil {
			shimBinErr = err
			return
		}
		sceneStop = append(sceneStop, func() { _ = os.RemoveAll(dir) })
		out := filepath.Join(dir, "pullrecords")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
		cmd.Dir = filepath.Join(repo, "cmd", "pullrecords")
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(repo, "go.work"))
		if outp, err := cmd.CombinedOutput(); err != nil {
			shimBinErr = fmt.Errorf("go build cmd/pullrecords: %v\n%s", err, outp)
			return
		}
		shimBin = out
	})
	return shimBin, shimBinErr
}

// shimProc is one running "pullrecords shim" in front of a containerd.
type shimProc struct {
	t          *testing.T
	name       string
	dir        string // holds shim.sock, state/ and shim.log
	endpoint   string // unix://dir/shim.sock
	containerd string
	insecure   []string
	metrics    string // 127.0.0.1:PORT

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when the current process has been reaped.
	exited chan struct{}
}

func (p *shimProc) stateDir() string { return filepath.Join(p.dir, "state") }
func (p *shimProc) logPath() string  { return filepath.Join(p.dir, "shim.log") }

// startShim builds the binary if needed, starts the shim for the node and
// waits for its /healthz; it is stopped in t.Cleanup.
func startShim(t *testing.T, ctx context.Context, name, containerd string, insecure []string) (*shimProc, error) {
	// A short directory: the socket path must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "shim-")
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := &shimProc{t: t, name: name, dir: dir, endpoint: "unix://" + filepath.Join(dir, "shim.sock"), containerd: containerd, insecure: insecure}
	t.Cleanup(p.stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of shim %s's log:\n%s", name, lastLines(p.logPath(), 40))
		}
	})
	return p, p.start(ctx)
}

// start starts the shim process (again, after kill, on the same socket
// path and state directory) and waits until /healthz answers 200.
func (p *shimProc) start(ctx context.Context) error {
	bin, err := pullrecordsBinary(ctx)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	p.metrics = l.Addr().String()
	l.Close()
	args := []string{"shim",
		"--listen", p.endpoint,
		"--runtime-endpoint", p.containerd,
		"--state-dir", p.stateDir(),
		"--metrics-addr", p.metrics,
	}
	for _, h := range p.insecure {
		args = append(args, "--insecure-registry", h)
	}
	logf, err := os.OpenFile(p.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, shimStartTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metrics+"/healthz", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("shim %s exited at start (%v):\n%s", p.name, cmd.ProcessState, lastLines(p.logPath(), 30))
		case <-ctx.Done():
			p.kill()
			return fmt.Errorf("shim %s: /healthz not ok: %v\n%s", p.name, ctx.Err(), lastLines(p.logPath(), 30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *shimProc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// stop sends SIGTERM, SIGKILL after 10 s, and waits until it is reaped.
func (p *shimProc) stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// fsck runs "pullrecords fsck" on the shim's state directory (the
// command's --kubelet-dir: records in DIR/image_manager) and returns its
// exit status and output.
func (p *shimProc) fsck(ctx context.Context) (int, string, error) {
	bin, err := pullrecordsBinary(ctx)
	if err != nil {
		return 0, "", err
	}
	cmd := exec.CommandContext(ctx, bin, "fsck", "--kubelet-dir", p.stateDir())
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out), nil
	}
	return 0, strings.TrimSpace(string(out)), err
}
