package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestCacheRunTerminalTranscript runs "cache run --once" on a
// pseudo-terminal with one image that cannot be pulled, plays what it wrote
// on a blank screen, and checks that the failure is still on the screen at
// the end, with every other result, and that no progress line is left.
func TestCacheRunTerminalTranscript(t *testing.T) {
	dir := t.TempDir()
	kubelet := filepath.Join(dir, "kubelet")
	if err := os.Mkdir(kubelet, 0o700); err != nil {
		t.Fatal(err)
	}
	_, endpoint := startFakeCRI(t, "registry.k8s.io/pause:3.10")
	caches := `- namespace: shared
  name: public
  images: [nginx:1.27, registry.example.com/missing/gone:1, registry.k8s.io/pause:3.10]
- namespace: ops
  name: tools
  images: [busybox:1.37]
`
	if out, errOut, code := pullrecords(t, caches, "--kubelet-dir", kubelet, "cache", "apply", "-f", "-"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}

	ptmx, tty, err := pty.Open()
	requireOrSkip(t, err == nil, fmt.Sprintf("no pseudo-terminal: %v", err))
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("pullrecords", "--kubelet-dir", kubelet, "cache", "run", "--cri", endpoint, "--once", "--workers", "1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds it now; EOF (EIO) comes when it exits

	output := make(chan []byte, 1)
	go func() {
		data, err := io.ReadAll(ptmx)
		if err != nil && !errors.Is(err, syscall.EIO) {
			t.Errorf("reading the terminal: %v", err)
		}
		output <- data
	}()
	var raw []byte
	select {
	case raw = <-output:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("cache run did not finish")
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("exit: %v, want status 1 (one request failed)", err)
	}

	screen := renderScreen(string(raw))
	transcript := strings.Join(screen, "\n")
	t.Logf("final screen:\n%s", transcript)
	if !strings.Contains(string(raw), "\r\x1b[K") || !strings.Contains(string(raw), "[") {
		t.Errorf("no progress line was drawn: %q", raw)
	}
	for _, want := range []string{
		"failed        create   shared/public registry.example.com/missing/gone:1 PullFailed: ",
		"succeeded     create   shared/public nginx:1.27 Pulled",
		"alreadypulled create   shared/public registry.k8s.io/pause:3.10 AlreadyPresent",
		"succeeded     create   ops/tools busybox:1.37 Pulled",
		"shared/public create batch ",
		"cache run stopped: 1 request failed",
		"pullrecords: problems found: 1 request failed",
	} {
		if !containsLinePrefix(screen, want) {
			t.Errorf("the final screen lacks a line starting %q", want)
		}
	}
	for _, line := range screen {
		if strings.HasPrefix(line, "working:") || strings.HasPrefix(line, "finishing") {
			t.Errorf("a progress line is left on the screen: %q", line)
		}
	}
}

func containsLinePrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
