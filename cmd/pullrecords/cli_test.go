package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{fmt.Errorf("%w: 3 problems", errProblemsFound), 1},
		{usageErrorf("bad flag"), 2},
		{errors.New("permission denied"), 2},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestReportErrorIsOneLine(t *testing.T) {
	var b bytes.Buffer
	reportError(&b, errors.New("first\nsecond"))
	if got, want := b.String(), "pullrecords: first; second\n"; got != want {
		t.Errorf("reportError = %q, want %q", got, want)
	}
}

func TestParseAge(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "0s"},
		{in: "36h", want: 36 * time.Hour},
		{in: "7d", want: 7 * 24 * time.Hour},
		{in: "-1h", wantErr: true},
		{in: "-2d", wantErr: true},
		{in: "d", wantErr: true},
		{in: "soon", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseAge(tc.in)
			if tc.wantErr {
				if !errors.Is(err, errUsage) {
					t.Fatalf("parseAge(%q) error = %v, want a usage error", tc.in, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseAge(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestCleanDetail(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\nb\tc", "a b c"},
		{`Object 'Kind' is missing in '{"credentialHash":"secret"}` + "\n'", "Object 'Kind' is missing (content not shown)"},
		{strings.Repeat("x", 300), strings.Repeat("x", 200) + "…"},
	} {
		if got := cleanDetail(tc.in); got != tc.want {
			t.Errorf("cleanDetail(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n          int
		word, want string
	}{
		{0, "record", "0 records"},
		{1, "record", "1 record"},
		{2, "entry", "2 entries"},
		{1, "entry", "1 entry"},
	} {
		if got := plural(tc.n, tc.word); got != tc.want {
			t.Errorf("plural(%d, %q) = %q, want %q", tc.n, tc.word, got, tc.want)
		}
	}
}

// TestRunInProcess runs the command in-process, as main does.
func TestRunInProcess(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--kubelet-dir", t.TempDir(), "-o", "json", "ls"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"records": []`) {
		t.Errorf("stdout %q: want an empty record list", stdout.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"--bogus"}, &stdout, &stderr); code != 2 || stdout.Len() != 0 {
		t.Errorf("bad flag: exit %d, stdout %q; want 2 and nothing on stdout", code, stdout.String())
	}
}

// A negative --timeout is a usage error naming the flag, not a failure to
// reach the runtime.
func TestNegativeCRITimeout(t *testing.T) {
	for _, args := range [][]string{
		{"prune", "--dry-run", "--cri", "/nonexistent/cri.sock", "--timeout", "-1s"},
		{"cache", "run", "--once", "--cri", "/nonexistent/cri.sock", "--timeout", "-1s"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"--kubelet-dir", t.TempDir()}, args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "--timeout -1s") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and the flag named", args, code, stderr.String())
		}
	}
}

// kube-fledged's --image-cache-refresh-frequency=0s turns periodic refresh
// off; the controller's Config reads zero as its 15m default, so the flag
// must map to the Config's "disabled". A negative value is a usage error
// before any cluster is contacted.
func TestControllerRefreshFrequencyZeroDisables(t *testing.T) {
	got, err := refreshIntervalOf(0)
	if err != nil || got >= 0 {
		t.Errorf("refreshIntervalOf(0) = %v, %v; want a negative (disabled) interval", got, err)
	}
	if got, err := refreshIntervalOf(20 * time.Minute); err != nil || got != 20*time.Minute {
		t.Errorf("refreshIntervalOf(20m) = %v, %v; want 20m", got, err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"controller", "--noop-image", "x", "--kubeconfig", "/nonexistent/kubeconfig",
		"--image-cache-refresh-frequency", "-1s"}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--image-cache-refresh-frequency -1s") {
		t.Errorf("negative refresh frequency: exit %d, stderr %q; want 2 and the flag named", code, stderr.String())
	}
}
