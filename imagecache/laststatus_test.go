package imagecache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestLastStatusRoundTrip: what the status handler receives when a batch
// completes is what ReadLastStatus and LastStatus return, also after a
// restart, and the file holds no credential.
func TestLastStatusRoundTrip(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	f.images.requireAuth("reg/private:1", "alice:s3cret")
	f.images.fail("reg/gone:1", status.Error(codes.NotFound, "pulling failed: not found"))
	m := f.manager(t, WithStateDir(dir))
	ctx := context.Background()
	if err := m.Apply(ctx, ImageCache{Namespace: "team-a", Name: "private", Images: []string{"reg/private:1"}, PullSecret: aliceSecret}); err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, ImageCache{Namespace: "shared", Name: "public", Images: []string{"reg/a:1", "reg/gone:1"}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.completedStatus("shared", "public"); ok {
		t.Error("LastStatus before any batch completed: ok")
	}
	stop := run(t, m)
	want := map[CacheRef]CacheStatus{}
	for range 2 {
		st := f.sink.wait(t)
		want[st.ImageCache] = st
	}
	stop()
	if got := want[CacheRef{"shared", "public"}]; got.Counts[StatusFailed] != 1 || len(got.Results) != 2 {
		t.Fatalf("shared/public status = %+v, want one failure among two results", got)
	}

	got, err := ReadLastStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadLastStatus (-handler +got):\n%s", diff)
	}
	for ref, w := range want {
		s, ok := m.completedStatus(ref.Namespace, ref.Name)
		if diff := cmp.Diff(w, s); !ok || diff != "" {
			t.Errorf("completedStatus(%s) ok=%v (-handler +got):\n%s", ref, ok, diff)
		}
	}

	data, err := os.ReadFile(filepath.Join(dir, lastStatusFile))
	if err != nil {
		t.Fatal(err)
	}
	// The secret's coordinates may appear in a message; its credential never.
	for _, secret := range []string{"s3cret", "alice"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("%s holds %q:\n%s", lastStatusFile, secret, data)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, lastStatusFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s mode = %v, %v; want 0600", lastStatusFile, fi.Mode(), err)
	}

	// A new manager on the directory has them before it runs.
	m2 := f.restarted().manager(t, WithStateDir(dir))
	for ref, w := range want {
		s, ok := m2.completedStatus(ref.Namespace, ref.Name)
		if diff := cmp.Diff(w, s); !ok || diff != "" {
			t.Errorf("after restart, completedStatus(%s) ok=%v (-handler +got):\n%s", ref, ok, diff)
		}
	}
}

// TestLastStatusDeletedCache: a deleted cache keeps the status of its
// removal until a manager is next opened on the directory.
func TestLastStatusDeletedCache(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	m := f.manager(t, WithStateDir(dir))
	ctx := context.Background()
	if err := m.Apply(ctx, ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/a:1"}}); err != nil {
		t.Fatal(err)
	}
	stop := run(t, m)
	f.sink.wait(t)
	if err := m.Delete(ctx, "ns", "c"); err != nil {
		t.Fatal(err)
	}
	if st := f.sink.wait(t); st.WorkType != WorkTypeDelete {
		t.Fatalf("second batch = %s, want delete", st.WorkType)
	}
	stop()
	got, err := ReadLastStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := got[CacheRef{"ns", "c"}]; !ok || s.WorkType != WorkTypeDelete || s.Counts[StatusSucceeded] != 1 {
		t.Errorf("ReadLastStatus[ns/c] = %+v, %v; want the delete", s, ok)
	}
	m2 := f.restarted().manager(t, WithStateDir(dir))
	if s, ok := m2.completedStatus("ns", "c"); ok {
		t.Errorf("after restart, the deleted cache still has %+v", s)
	}
}

func TestReadLastStatus(t *testing.T) {
	t.Run("missing directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		got, err := ReadLastStatus(dir)
		if err != nil || got == nil || len(got) != 0 {
			t.Fatalf("ReadLastStatus(missing) = %v, %v; want an empty map", got, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ReadLastStatus created %s: %v", dir, err)
		}
	})

	t.Run("state without last status", func(t *testing.T) {
		// A state file and no last-status file (removed by hand, say):
		// the manager opens it; there are no statuses.
		dir := t.TempDir()
		state := `{"version":1,"caches":[{"namespace":"ns","name":"c","images":["reg/a:1"],"generation":1,"completedGeneration":1}],"pendingPurges":null}`
		if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(state), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadLastStatus(dir)
		if err != nil || len(got) != 0 {
			t.Fatalf("ReadLastStatus = %v, %v; want an empty map", got, err)
		}
		m := newFixture(t).manager(t, WithStateDir(dir))
		if len(m.Caches()) != 1 {
			t.Errorf("Caches = %v", m.Caches())
		}
		if _, ok := m.completedStatus("ns", "c"); ok {
			t.Error("LastStatus: ok, want none")
		}
	})

	t.Run("newer fields", func(t *testing.T) {
		dir := t.TempDir()
		data := `{"version":1,"future":true,"caches":[{"namespace":"ns","name":"c","workType":"create","batch":1,"started":"2026-11-30T10:00:00Z","finished":"2026-11-30T10:00:01Z","durationNanos":1000000000,"requests":1,"counts":{"succeeded":1},"later":[1],"results":[{"image":"reg/a:1","workType":"create","status":"succeeded","reason":"Pulled","started":"2026-11-30T10:00:00Z","finished":"2026-11-30T10:00:01Z","durationNanos":1000000000,"attempts":1,"newer":"x"}]}]}`
		if err := os.WriteFile(filepath.Join(dir, lastStatusFile), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadLastStatus(dir)
		if err != nil {
			t.Fatal(err)
		}
		s := got[CacheRef{"ns", "c"}]
		if !s.Complete || s.Counts[StatusSucceeded] != 1 || len(s.Results) != 1 || s.Results[0].Request.ImageCache != (CacheRef{"ns", "c"}) || s.Results[0].Reason != ReasonPulled {
			t.Errorf("ReadLastStatus = %+v", got)
		}
	})

	for _, tc := range []struct{ name, data string }{
		{"corrupt", `{"version":1,"caches":[{"namespace":"a"`},
		{"unsupported version", `{"version":2,"caches":[]}`},
		{"no cache named", `{"version":1,"caches":[{"workType":"create"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, lastStatusFile)
			if err := os.WriteFile(path, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := ReadLastStatus(dir)
			if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), path) {
				t.Errorf("ReadLastStatus = %v, want ErrState naming %s", err, path)
			}
			// A manager still opens: the file is a record, not state, and
			// the next completion replaces it.
			completeOne(t, dir)
			if got, err := ReadLastStatus(dir); err != nil || len(got) != 1 {
				t.Errorf("after a completion, ReadLastStatus = %v, %v", got, err)
			}
		})
	}

	t.Run("symbolic link", func(t *testing.T) {
		dir := t.TempDir()
		other := filepath.Join(t.TempDir(), "other.json")
		if err := os.WriteFile(other, []byte(`{"version":1,"caches":[]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(other, filepath.Join(dir, lastStatusFile)); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadLastStatus(dir); !errors.Is(err, ErrState) {
			t.Errorf("ReadLastStatus through a link = %v, want ErrState", err)
		}
		// A manager's write replaces the link, never writes through it.
		completeOne(t, dir)
		if got, err := ReadLastStatus(dir); err != nil || len(got) != 1 {
			t.Errorf("after a completion, ReadLastStatus = %v, %v", got, err)
		}
		if data, err := os.ReadFile(other); err != nil || string(data) != `{"version":1,"caches":[]}` {
			t.Errorf("the link's target changed: %q, %v", data, err)
		}
	})
}

// completeOne opens a manager on dir and runs one batch of ns/c to
// completion.
func completeOne(t *testing.T, dir string) {
	t.Helper()
	f := newFixture(t)
	m := f.manager(t, WithStateDir(dir))
	if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/a:1"}}); err != nil {
		t.Fatal(err)
	}
	stop := run(t, m)
	f.sink.wait(t)
	stop()
}
