//go:build linux

package main

import (
	"bytes"
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
	"unsafe"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
)

// openTerminal opens a pseudo-terminal pair 100 columns wide: the program
// writes to tty, the test reads what it wrote from ptmx.
func openTerminal(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	requireOrSkip(t, err == nil, fmt.Sprintf("no pseudo-terminal: %v", err))
	ioctl := func(req uintptr, arg unsafe.Pointer) error {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), req, uintptr(arg)); errno != 0 {
			return errno
		}
		return nil
	}
	var unlock int32
	var n uint32
	if err := ioctl(syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		ptmx.Close()
		requireOrSkip(t, false, fmt.Sprintf("unlocking the pseudo-terminal: %v", err))
	}
	if err := ioctl(syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		ptmx.Close()
		requireOrSkip(t, false, fmt.Sprintf("naming the pseudo-terminal: %v", err))
	}
	ws := struct{ Row, Col, X, Y uint16 }{Row: 24, Col: 100}
	if err := ioctl(syscall.TIOCSWINSZ, unsafe.Pointer(&ws)); err != nil {
		ptmx.Close()
		t.Fatalf("sizing the pseudo-terminal: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ptmx.Close()
		requireOrSkip(t, false, fmt.Sprintf("opening the pseudo-terminal: %v", err))
	}
	t.Cleanup(func() { ptmx.Close() })
	return ptmx, tty
}

// runOnTerminal runs pullrecords with stderr on a pseudo-terminal, and
// stdout on it too or, with stdout non-nil, in stdout. It returns all the
// terminal received and the exit status.
func runOnTerminal(t *testing.T, stdout io.Writer, args ...string) (terminal string, code int) {
	t.Helper()
	ptmx, tty := openTerminal(t)
	cmd := exec.Command("pullrecords", args...)
	cmd.Env = append(os.Environ(), envProgressDelay+"=0", "TERM=xterm",
		envProcRoot+"="+filepath.Join(t.TempDir(), "no-proc"), envHealthzURL+"=")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, tty, tty
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child has it; reading ends (EIO) when it exits
	read := make(chan []byte, 1)
	go func() {
		data, err := io.ReadAll(ptmx)
		if err != nil && !errors.Is(err, syscall.EIO) {
			t.Errorf("reading the terminal: %v", err)
		}
		read <- data
	}()
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	select {
	case data := <-read:
		return string(data), code
	case <-time.After(30 * time.Second):
		t.Fatal("the terminal did not close")
	}
	return "", 0
}

// screen plays what a terminal received on a blank screen (carriage
// return, newline, erase to end of line; other escape sequences ignored) and
// returns its lines.
func screen(s string) []string {
	lines := []string{""}
	col := 0
	for i := 0; i < len(s); i++ {
		cur := []rune(lines[len(lines)-1])
		switch c := s[i]; {
		case c == '\r':
			col = 0
		case c == '\n':
			lines = append(lines, "")
			col = 0
		case c == 0x1b && strings.HasPrefix(s[i:], "\x1b[K"):
			lines[len(lines)-1] = string(cur[:min(col, len(cur))])
			i += 2
		case c == 0x1b && i+1 < len(s) && s[i+1] == '[':
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
		default:
			r := []rune(s[i:])[0]
			i += len(string(r)) - 1
			for len(cur) < col {
				cur = append(cur, ' ')
			}
			if col < len(cur) {
				cur[col] = r
			} else {
				cur = append(cur, r)
			}
			col++
			lines[len(lines)-1] = string(cur)
		}
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// makeRecords writes n pulled records and one intent under kubeletDir.
func makeRecords(t *testing.T, kubeletDir string, n int, at time.Time) []string {
	t.Helper()
	s, err := fsstore.New(logr.Discard(), kubeletDir, fsstore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var refs []string
	for i := range n {
		ref := fmt.Sprintf("sha256:%064x", i+1)
		refs = append(refs, ref)
		r := &accessor.ImagePulledRecord{LastUpdatedTime: metav1.NewTime(at), ImageRef: ref,
			CredentialMapping: map[string]accessor.ImagePullCredentials{
				fmt.Sprintf("registry.example.com/team/app-%d", i): {NodePodsAccessible: true}}}
		if err := s.WriteImagePulledRecord(logr.Discard(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WriteImagePullIntent(logr.Discard(), "registry.example.com/team/pulling:1"); err != nil {
		t.Fatal(err)
	}
	return refs
}

func assertProgress(t *testing.T, term, progress string, results ...string) {
	t.Helper()
	if !strings.Contains(term, progress) || !strings.Contains(term, "\r\x1b[K") {
		t.Errorf("no progress line %q on the terminal:\n%q", progress, term)
	}
	shown := screen(term)
	got := strings.Join(shown, "\n")
	if strings.Contains(got, progress) {
		t.Errorf("the progress line is left on the screen:\n%s", got)
	}
	for _, r := range results {
		if !strings.Contains(got, r) {
			t.Errorf("%q is not on the screen at the end:\n%s", r, got)
		}
	}
}

func TestProgressOnTerminal(t *testing.T) {
	kubelet := t.TempDir()
	makeRecords(t, kubelet, 200, time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))

	t.Run("fsck", func(t *testing.T) {
		term, code := runOnTerminal(t, nil, "--kubelet-dir", kubelet, "fsck")
		if code != 0 {
			t.Fatalf("exit status %d:\n%s", code, term)
		}
		assertProgress(t, term, "fsck: checking 201 entries in image_manager/",
			"1 intent, 200 records readable; 0 problems found")
	})
	t.Run("migrate", func(t *testing.T) {
		term, code := runOnTerminal(t, nil, "--kubelet-dir", kubelet, "migrate")
		if code != 0 {
			t.Fatalf("exit status %d:\n%s", code, term)
		}
		assertProgress(t, term, "migrate: looking for v1alpha1 files among 201 entries",
			"nothing to migrate: every readable file is v1beta1")
	})
	t.Run("prune", func(t *testing.T) {
		_, sock := startFakeCRI(t)
		term, code := runOnTerminal(t, nil, "--kubelet-dir", kubelet, "--kubelet-stopped",
			"prune", "--cri", sock, "--dry-run")
		if code != 0 {
			t.Fatalf("exit status %d:\n%s", code, term)
		}
		assertProgress(t, term, "prune: ", "would prune (dry run) 200 records of images not among the runtime's 0 images")
	})
	t.Run("stdout elsewhere", func(t *testing.T) {
		// Only stderr is a terminal: the progress goes there, and stdout
		// gets the result alone.
		var out bytes.Buffer
		term, code := runOnTerminal(t, &out, "--kubelet-dir", kubelet, "fsck")
		if code != 0 {
			t.Fatalf("exit status %d:\n%s", code, term)
		}
		assertProgress(t, term, "fsck: checking")
		if want := "1 intent, 200 records readable; 0 problems found\n"; out.String() != want {
			t.Errorf("stdout = %q, want %q", out.String(), want)
		}
	})
}

// TestNoProgressOffTerminal: with stderr not a terminal, nothing but the
// result is printed, even for slow work.
func TestNoProgressOffTerminal(t *testing.T) {
	kubelet := t.TempDir()
	makeRecords(t, kubelet, 20, time.Now())
	var out, errOut bytes.Buffer
	cmd := exec.Command("pullrecords", "--kubelet-dir", kubelet, "fsck")
	cmd.Env = append(os.Environ(), envProgressDelay+"=0")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr = %q, want nothing", errOut.String())
	}
	if strings.ContainsAny(out.String(), "\r\x1b") {
		t.Errorf("stdout has terminal controls: %q", out.String())
	}
}

func TestScreen(t *testing.T) {
	got := screen("\r\x1b[K| fsck: checking (0s)\r\x1b[Kresult one\r\nresult two\r\n")
	want := []string{"result one", "result two"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("screen = %q, want %q", got, want)
	}
}
