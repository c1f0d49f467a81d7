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
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "31"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "31", "comm"), []byte("kubelet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
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
	g = &globalOptions{procRoot: t.TempDir()}
	if err := g.guardWrite(ctx, "prune"); err != nil {
		t.Errorf("guardWrite without a kubelet = %v", err)
	}
}
