package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pullrecords/pullrecords/imagecache"
)

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits until re matches what b holds and returns the match.
func waitFor(t *testing.T, b *lockedBuffer, what string, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := rx.FindStringSubmatch(b.String()); m != nil {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: no match for %q in:\n%s", what, re, b.String())
	return nil
}

// pullrecords runs the command (the test binary under the name testscript
// gives it) to its end and returns its output and exit status.
func pullrecords(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command("pullrecords", args...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("pullrecords %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// TestCacheRunPicksUpChanges runs "cache run" as its own process and checks
// it applies "cache apply" and "cache delete" made while it runs, without a
// restart; keeps a bad hand edit out; serves /metrics and /healthz; and lets
// no second run work the same state directory.
func TestCacheRunPicksUpChanges(t *testing.T) {
	requireOrSkip(t, !testing.Short(), "-short: the test waits for the one-second poll")
	dir := t.TempDir()
	kubelet := filepath.Join(dir, "kubelet")
	if err := os.Mkdir(kubelet, 0o700); err != nil {
		t.Fatal(err)
	}
	cri, endpoint := startFakeCRI(t)
	base := []string{"--kubelet-dir", kubelet, "cache"}

	if out, errOut, code := pullrecords(t, "- namespace: shared\n  name: public\n  images: [nginx:1.27]\n", append(base, "apply", "-f", "-")...); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}

	run := exec.Command("pullrecords", append(base, "run", "--cri", endpoint, "--metrics-addr", "127.0.0.1:0")...)
	var stdout, stderr lockedBuffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	t.Cleanup(func() {
		if run.ProcessState == nil {
			run.Process.Kill()
			<-done
		}
	})

	waitFor(t, &stdout, "the declared cache", `(?m)^succeeded\s+create\s+shared/public nginx:1.27 Pulled$`)
	addr := waitFor(t, &stderr, "metrics", `serving http://(127\.0\.0\.1:\d+)/metrics and http://127\.0\.0\.1:\d+/healthz`)[1]

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{
		`imagecache_results_total{status="succeeded",work_type="create"} 1`,
		`imagecache_pulls_total{result="succeeded"} 1`,
		`imagecache_pull_duration_seconds_count{result="succeeded"} 1`,
		`imagecache_queue_depth 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, metrics)
		}
	}

	// One run per state directory.
	_, errOut, code := pullrecords(t, "", append(base, "run", "--cri", endpoint, "--once")...)
	if code != 2 || !regexp.MustCompile(fmt.Sprintf(`^pullrecords: cache run: another cache run \(PID %d\) is working .*/pullrecords; one at a time\n$`, run.Process.Pid)).MatchString(errOut) {
		t.Errorf("second run: exit %d, stderr %q", code, errOut)
	}

	// apply while it runs: picked up within a second.
	out, errOut, code := pullrecords(t, "- namespace: ops\n  name: tools\n  images: [busybox:1.37]\n", append(base, "apply", "-f", "-")...)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("cache run (PID %d) pulls the images within a second", run.Process.Pid)) {
		t.Errorf("apply: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, &stdout, "apply picked up", `(?m)^picked up .*caches.json: applied ops/tools$`)
	waitFor(t, &stdout, "the applied cache", `(?m)^succeeded\s+create\s+ops/tools busybox:1.37 Pulled$`)

	// delete while it runs: the image goes.
	if out, errOut, code := pullrecords(t, "", append(base, "delete", "shared/public")...); code != 0 {
		t.Fatalf("delete: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, &stdout, "delete picked up", `(?m)^picked up .*caches.json: deleted shared/public$`)
	waitFor(t, &stdout, "the removal", `(?m)^succeeded\s+delete\s+shared/public nginx:1.27 Removed$`)
	if nginx, busybox := cri.Image("nginx:1.27") != nil, cri.Image("busybox:1.37") != nil; nginx || !busybox {
		t.Errorf("runtime after the delete: nginx %t, busybox %t; want only busybox", nginx, busybox)
	}
	out, _, _ = pullrecords(t, "", append(base, "status")...)
	if !regexp.MustCompile(`(?m)^ops/tools\s+1\s+-\s+-\s+applied\s+create: 1 succeeded$`).MatchString(out) ||
		!strings.Contains(out, fmt.Sprintf("1 cache\ncache run (PID %d) is working them\n", run.Process.Pid)) {
		t.Errorf("status:\n%s", out)
	}

	// A hand edit that declares a private cache is refused and ignored;
	// what is applied stays.
	declaredPath := filepath.Join(kubelet, "pullrecords", declaredFile)
	private := `{"version":1,"caches":[{"namespace":"team-a","name":"private","images":["registry.example.com/private/app:1"],` +
		`"pullSecret":{"namespace":"team-a","name":"regcred","uid":"u1","username":"robot","password":"s3cret"}}]}`
	if err := os.WriteFile(declaredPath+".new", []byte(private), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(declaredPath+".new", declaredPath); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &stdout, "the refusal", `(?m)^cache run: ignoring the changed .*caches.json: refusing cache team-a/private: it has a pullSecret`)
	if strings.Contains(stdout.String(), "s3cret") {
		t.Errorf("a credential reached the output")
	}

	// SIGTERM: a clean stop, status 0.
	if err := run.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("cache run after SIGTERM: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cache run did not stop on SIGTERM")
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Errorf("/healthz still answers after the run stopped")
	}
	if regexp.MustCompile(`(?m)^(succeeded|failed|unknown|alreadypulled)\s+\S+\s+team-a/private`).MatchString(stdout.String()) {
		t.Errorf("the private cache was worked:\n%s", stdout.String())
	}
}

func TestCRIEndpointDefault(t *testing.T) {
	t.Setenv(envCRIEndpoint, "")
	if got := (&cacheRunOptions{}).criEndpoint(); got != "unix:///run/containerd/containerd.sock" {
		t.Errorf("default endpoint %q", got)
	}
	t.Setenv(envCRIEndpoint, "unix:///run/crio/crio.sock")
	if got := (&cacheRunOptions{}).criEndpoint(); got != "unix:///run/crio/crio.sock" {
		t.Errorf("endpoint from the environment %q", got)
	}
	if got := (&cacheRunOptions{endpoint: "/x.sock"}).criEndpoint(); got != "/x.sock" {
		t.Errorf("--cri %q", got)
	}
}

// TestRunPrinterTerminal checks the terminal layout: every result is a line
// of its own above the progress line, which is drawn again after each.
func TestRunPrinterTerminal(t *testing.T) {
	ok := imagecache.ImageWorkResult{
		Request: imagecache.ImageWorkRequest{Image: "nginx:1.27", WorkType: imagecache.WorkTypeCreate,
			ImageCache: imagecache.CacheRef{Namespace: "shared", Name: "public"}},
		Status: imagecache.StatusSucceeded, Reason: imagecache.ReasonPulled,
	}
	failed := ok
	failed.Request.Image = "registry.example.com/missing/gone:1"
	failed.Status, failed.Reason, failed.Message = imagecache.StatusFailed, imagecache.ReasonPullFailed, "not found"
	superseded := ok
	superseded.Status, superseded.Reason = imagecache.StatusUnknown, imagecache.ReasonSuperseded

	var b bytes.Buffer
	p := &runPrinter{w: &b, terminal: true, counts: map[imagecache.ImageWorkStatus]int{}, width: func() int { return 60 }}
	p.pending = func() int { return 3 }
	p.result(failed)
	p.result(ok)
	p.result(superseded)
	p.pending = func() int { return 0 }
	p.setIdle("watching;")
	p.close()
	screen := renderScreen(b.String())
	want := []string{
		"failed        create   shared/public registry.example.com/missing/gone:1 PullFailed: not found",
		"succeeded     create   shared/public nginx:1.27 Pulled",
		"unknown       create   shared/public nginx:1.27 Superseded",
	}
	if strings.Join(screen, "\n") != strings.Join(want, "\n") {
		t.Errorf("screen:\n%s\nwant:\n%s", strings.Join(screen, "\n"), strings.Join(want, "\n"))
	}
	if p.failures() != 1 {
		t.Errorf("failures = %d, want 1 (superseded work did not fail)", p.failures())
	}
	if !strings.Contains(b.String(), "\r\x1b[Kworking: 3 requests pending [0 succeeded, 0 already present") {
		t.Errorf("no progress line in %q", b.String())
	}
	for _, line := range strings.Split(b.String(), "\r") {
		if n := len([]rune(strings.TrimPrefix(line, "\x1b[K"))); !strings.Contains(line, "\n") && n > 59 {
			t.Errorf("progress line wider than the terminal: %q", line)
		}
	}
}

// renderScreen plays output on a blank terminal of unbounded size: \r goes
// to the start of the line, \n to the next line, ESC [ K clears to the end
// of the line, anything else is written at the cursor. It returns the
// lines, trailing blank ones dropped.
func renderScreen(out string) []string {
	lines := [][]rune{{}}
	row, col := 0, 0
	rs := []rune(out)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\r':
			col = 0
		case r == '\n':
			row++
			col = 0
			if row == len(lines) {
				lines = append(lines, []rune{})
			}
		case r == 0x1b && i+2 < len(rs) && rs[i+1] == '[' && rs[i+2] == 'K':
			lines[row] = lines[row][:min(col, len(lines[row]))]
			i += 2
		default:
			for len(lines[row]) < col {
				lines[row] = append(lines[row], ' ')
			}
			if col < len(lines[row]) {
				lines[row][col] = r
			} else {
				lines[row] = append(lines[row], r)
			}
			col++
		}
	}
	var screen []string
	for _, l := range lines {
		screen = append(screen, strings.TrimRight(string(l), " "))
	}
	for len(screen) > 0 && screen[len(screen)-1] == "" {
		screen = screen[:len(screen)-1]
	}
	return screen
}
