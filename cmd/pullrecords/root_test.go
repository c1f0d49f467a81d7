package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/pullrecords/pullrecords/cmd/pullrecords/internal/kubeletcheck"
)

// An environment variable set but empty means the default, never "no
// check": with the default /proc showing a kubelet, the writing commands
// still refuse. (Before, PULLRECORDS_PROC_ROOT= switched the process scan
// off and fsck --repair ran beside live kubelets.)
func TestEmptyEnvKeepsTheGuard(t *testing.T) {
	proc := fakeProcRoot(t, map[string]string{"1": "systemd\n", "4242": "kubelet\n"})
	saved := defaultProcRoot
	defaultProcRoot = proc
	t.Cleanup(func() { defaultProcRoot = saved })
	t.Setenv(envProcRoot, "")
	// The probe is skipped by the flag, so that the process scan alone
	// decides; an empty variable would not skip it.
	kubeletDir := t.TempDir()
	for _, args := range [][]string{
		{"fsck", "--repair"},
		{"migrate", "--apply"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			full := append([]string{"--kubelet-dir", kubeletDir, "--kubelet-healthz-url="}, args...)
			code := run(context.Background(), full, &stdout, &stderr)
			want := "pullrecords: " + strings.Join(args, " ") + `: refusing to write beside a running kubelet (process 4242 ("kubelet")): `
			if code != exitFailed || !strings.HasPrefix(stderr.String(), want) {
				t.Errorf("exit %d, stderr %q; want %d, %q...", code, stderr.String(), exitFailed, want)
			}
		})
	}
}

// An empty variable means the flag's default, not "no check"; a non-empty
// one sets the value, a flag overrides it, and the flag given empty keeps
// meaning "no probe" (the process scan still runs: TestEmptyEnvKeepsTheGuard).
func TestCheckDefaultsFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		procEnv, urlEnv        string
		args                   []string
		wantProc, wantURL      string
		wantProcFrom, wantFrom string
	}{
		{"empty variables", "", "", nil, "/proc", kubeletcheck.DefaultHealthzURL, "--proc-root", "--kubelet-healthz-url"},
		{"variables", "/host/proc", "http://10.0.0.1:10248/healthz", nil, "/host/proc", "http://10.0.0.1:10248/healthz", envProcRoot, envHealthzURL},
		{"flags win", "/host/proc", "http://10.0.0.1:10248/healthz", []string{"--proc-root", "/p", "--kubelet-healthz-url="}, "/p", "", "--proc-root", "--kubelet-healthz-url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envProcRoot, tc.procEnv)
			t.Setenv(envHealthzURL, tc.urlEnv)
			g := &globalOptions{}
			cmd := &cobra.Command{Use: "x"}
			cmd.Flags().StringVar(&g.procRoot, "proc-root", kubeletcheck.DefaultProcRoot, "")
			cmd.Flags().StringVar(&g.healthzURL, "kubelet-healthz-url", kubeletcheck.DefaultHealthzURL, "")
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			g.checkDefaultsFromEnv(cmd)
			got := []string{g.procRoot, g.healthzURL, g.procRootFrom, g.healthzURLFrom}
			want := []string{tc.wantProc, tc.wantURL, tc.wantProcFrom, tc.wantFrom}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("proc root, URL and their sources (-want +got):\n%s", diff)
			}
		})
	}
}
