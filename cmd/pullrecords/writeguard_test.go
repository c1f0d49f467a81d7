package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pullrecords/pullrecords/fsstore"
)

func TestLockRefusal(t *testing.T) {
	started := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		le   *fsstore.LockedError
		want string
	}{
		{"holder known", &fsstore.LockedError{Path: "/k/image_manager/.pullrecords.lock", PID: 42, Started: started},
			"prune: refusing to write: the pull records are locked by process 42 (started 2026-11-30T22:00:00Z) through /k/image_manager/.pullrecords.lock; only one writer may open them (stop it first); read-only commands still work"},
		{"start unknown", &fsstore.LockedError{Path: "/l", PID: 7},
			"prune: refusing to write: the pull records are locked by process 7 through /l; only one writer may open them (stop it first); read-only commands still work"},
		{"holder unknown", &fsstore.LockedError{Path: "/l"},
			"prune: refusing to write: the pull records are locked by another process through /l; only one writer may open them (stop it first); read-only commands still work"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := lockRefusal("prune", fmt.Errorf("opening pull records in /k: %w", tc.le))
			if err.Error() != tc.want {
				t.Errorf("message:\n%s\nwant\n%s", err, tc.want)
			}
			if !errors.Is(err, errRefused) || exitCode(err) != exitFailed {
				t.Errorf("errors.Is(errRefused) = %t, exit %d; want true, %d", errors.Is(err, errRefused), exitCode(err), exitFailed)
			}
		})
	}
	other := errors.New("permission denied")
	if got := lockRefusal("prune", other); got != other {
		t.Errorf("lockRefusal(other) = %v, want it unchanged", got)
	}
}

func TestGuardWrite(t *testing.T) {
	proc := fakeProcRoot(t, map[string]string{"1": "init\n", "31": "kubelet\n"})
	ctx := context.Background()

	g := &globalOptions{procRoot: proc}
	err := g.guardWrite(ctx, "migrate --apply")
	want := `migrate --apply: refusing to write beside a running kubelet (process 31 ("kubelet")): a stock kubelet reads the pull records only when it starts and would act on stale ones; stop the kubelet, then pass --kubelet-stopped`
	if err == nil || err.Error() != want || !errors.Is(err, errRefused) {
		t.Errorf("guardWrite = %v\nwant %s", err, want)
	}
	g.kubeletStopped = true
	if err := g.guardWrite(ctx, "migrate --apply"); err != nil {
		t.Errorf("guardWrite with --kubelet-stopped = %v", err)
	}
	g = &globalOptions{procRoot: fakeProcRoot(t, map[string]string{"1": "init\n"})}
	if err := g.guardWrite(ctx, "prune"); err != nil {
		t.Errorf("guardWrite without a kubelet = %v", err)
	}
}

// A check that cannot run refuses, naming the setting, the path and why;
// only --kubelet-stopped skips it.
func TestGuardWriteUnusableCheck(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nonexistent")
	empty := t.TempDir()
	ok := fakeProcRoot(t, map[string]string{"1": "init\n"})
	const advice = "; point --proc-root (or PULLRECORDS_PROC_ROOT) at the host's /proc and --kubelet-healthz-url (or PULLRECORDS_KUBELET_HEALTHZ_URL) at the kubelet's healthz endpoint, or pass --kubelet-stopped once the kubelet is stopped"
	for _, tc := range []struct {
		name string
		g    globalOptions
		want string
	}{
		{"missing", globalOptions{procRoot: missing, procRootFrom: "--proc-root"},
			"fsck --repair: refusing to write: the running-kubelet check cannot run: --proc-root: " + missing + ": no such directory" + advice},
		{"empty flag", globalOptions{procRootFrom: "--proc-root"},
			"fsck --repair: refusing to write: the running-kubelet check cannot run: --proc-root: empty path" + advice},
		{"no process entries, from the environment", globalOptions{procRoot: empty, procRootFrom: envProcRoot},
			"fsck --repair: refusing to write: the running-kubelet check cannot run: PULLRECORDS_PROC_ROOT: " + empty + ": holds no process entries: not a proc filesystem" + advice},
		{"bad healthz URL", globalOptions{procRoot: ok, healthzURL: "localhost:10248", healthzURLFrom: envHealthzURL},
			`fsck --repair: refusing to write: the running-kubelet check cannot run: PULLRECORDS_KUBELET_HEALTHZ_URL: "localhost:10248": not an http or https URL` + advice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.g.guardWrite(context.Background(), "fsck --repair")
			if err == nil || err.Error() != tc.want || !errors.Is(err, errRefused) || exitCode(err) != exitFailed {
				t.Errorf("guardWrite = %v\nwant %s", err, tc.want)
			}
			tc.g.kubeletStopped = true
			if err := tc.g.guardWrite(context.Background(), "fsck --repair"); err != nil {
				t.Errorf("with --kubelet-stopped: %v", err)
			}
		})
	}
}

// fakeProcRoot builds a /proc with the given pid -> comm entries.
func fakeProcRoot(t *testing.T, comms map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, comm := range comms {
		if err := os.MkdirAll(filepath.Join(root, pid), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, pid, "comm"), []byte(comm), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
