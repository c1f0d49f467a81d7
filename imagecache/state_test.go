package imagecache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/atomicfile"
)

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestLoadState(t *testing.T) {
	t.Run("missing directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		caches, err := LoadState(dir)
		if err != nil || len(caches) != 0 {
			t.Fatalf("LoadState(missing) = %v, %v; want no caches", caches, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("LoadState created %s: %v", dir, err)
		}
	})

	t.Run("what a manager applied", func(t *testing.T) {
		dir := t.TempDir()
		f := newFixture(t)
		m := f.manager(t, WithStateDir(dir))
		ctx := context.Background()
		for _, c := range []ImageCache{
			{Namespace: "team-b", Name: "x", Images: []string{"reg/b:1", "reg/b:1", "reg/c:1"}, RefreshInterval: time.Hour},
			{Namespace: "team-a", Name: "y", Images: []string{"reg/a:1"}, PullSecret: aliceSecret, ForceFullCache: true},
		} {
			if err := m.Apply(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		// A temporary file of an interrupted write: only a manager sweeps it.
		stray := filepath.Join(dir, atomicfile.TempName(stateFile))
		if err := os.WriteFile(stray, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		before := dirNames(t, dir)
		got, err := LoadState(dir)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(m.Caches(), got); diff != "" {
			t.Errorf("LoadState (-Manager.Caches +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"team-a/y", "team-b/x"}, refs(got)); diff != "" {
			t.Errorf("order (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(before, dirNames(t, dir)); diff != "" {
			t.Errorf("LoadState changed the directory (-before +after):\n%s", diff)
		}
	})

	t.Run("corrupt", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(`{"version":1,"caches":[{"namespace":"a"`), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadState(dir); !errors.Is(err, ErrState) {
			t.Errorf("LoadState(corrupt) = %v, want ErrState", err)
		}
	})

	t.Run("invalid cache in the file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(`{"version":1,"caches":[{"namespace":"a","name":"","images":[],"generation":1,"completedGeneration":1}],"pendingPurges":null}`), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadState(dir)
		if !errors.Is(err, ErrState) || !errors.Is(err, ErrInvalidCache) {
			t.Errorf("LoadState(invalid cache) = %v, want ErrState wrapping ErrInvalidCache", err)
		}
	})
}

func TestStateWrites(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Temporary files of an interrupted write are swept when a manager opens
	// the directory.
	for _, name := range []string{atomicfile.TempName(stateFile), atomicfile.TempName(lastStatusFile)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixture(t)
	m := f.manager(t, WithStateDir(dir))
	// A symbolic link planted at the state file while the manager runs is
	// replaced by the next write, not written through.
	if err := os.Symlink(outside, filepath.Join(dir, stateFile)); err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/a:1"}}); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(outside); err != nil || string(data) != "precious" {
		t.Errorf("the link's target changed: %q, %v", data, err)
	}
	fi, err := os.Lstat(filepath.Join(dir, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want a regular file 0600", fi.Mode())
	}
	if diff := cmp.Diff([]string{stateFile}, dirNames(t, dir)); diff != "" {
		t.Errorf("state directory (-want +got):\n%s", diff)
	}
	caches, err := LoadState(dir)
	if err != nil || len(caches) != 1 {
		t.Errorf("LoadState = %v, %v", caches, err)
	}
}

// TestStateReadRefusesLinks: a symbolic link or a FIFO planted at the state
// file's name is refused, not followed (the state holds credentials).
func TestStateReadRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(t.TempDir(), "other.json")
	if err := os.WriteFile(other, []byte(`{"version":1,"caches":[],"pendingPurges":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(dir, stateFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := readStateFile(dir); !errors.Is(err, ErrState) {
		t.Errorf("state file is a symlink: err = %v, want ErrState", err)
	}
	fifoDir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifoDir, stateFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readStateFile(fifoDir); !errors.Is(err, ErrState) {
		t.Errorf("state file is a FIFO: err = %v, want ErrState", err)
	}
}
