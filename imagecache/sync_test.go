package imagecache

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Sync applies what is new or changed, deletes what is no longer listed,
// and queues nothing for a cache listed as it is applied.
func TestSync(t *testing.T) {
	f := newFixture(t)
	f.images.preload("keep:1")
	dir := filepath.Join(t.TempDir(), "state")
	m := f.standalone(t, WithStateDir(dir))
	stop := run(t, m)
	ctx := context.Background()

	res, err := m.Sync(ctx, []ImageCache{
		{Namespace: "ops", Name: "tools", Images: []string{"keep:1", "tool:1"}},
		{Namespace: "shared", Name: "web", Images: []string{"web:1"}},
	})
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	want := SyncResult{Applied: []CacheRef{{"ops", "tools"}, {"shared", "web"}}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("first Sync -want +got:\n%s", diff)
	}
	f.sink.wait(t)
	f.sink.wait(t)

	// The same set again: nothing to do, no batch queued.
	res, err = m.Sync(ctx, []ImageCache{
		{Namespace: "shared", Name: "web", Images: []string{"web:1"}},
		{Namespace: "ops", Name: "tools", Images: []string{"keep:1", "tool:1", "tool:1"}}, // duplicates are ignored, as by Apply
	})
	if err != nil || res.Changed() || res.Unchanged != 2 {
		t.Fatalf("Sync of the applied set = %+v, %v; want 2 unchanged", res, err)
	}
	before, _ := m.Status("ops", "tools")

	// Drop one cache, change the other.
	res, err = m.Sync(ctx, []ImageCache{{Namespace: "ops", Name: "tools", Images: []string{"keep:1"}}})
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	want = SyncResult{Applied: []CacheRef{{"ops", "tools"}}, Deleted: []CacheRef{{"shared", "web"}}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("third Sync -want +got:\n%s", diff)
	}
	got := map[CacheRef]WorkType{}
	for range 2 {
		st := f.sink.wait(t)
		got[st.ImageCache] = st.WorkType
	}
	if diff := cmp.Diff(map[CacheRef]WorkType{{"ops", "tools"}: WorkTypeUpdate, {"shared", "web"}: WorkTypeDelete}, got); diff != "" {
		t.Errorf("batches -want +got:\n%s", diff)
	}
	if after, _ := m.Status("ops", "tools"); after.Batch == before.Batch {
		t.Errorf("the changed cache got no new batch")
	}
	if f.images.has("web:1") || f.images.has("tool:1") || !f.images.has("keep:1") {
		t.Errorf("images after the sync: web:1 %t, tool:1 %t, keep:1 %t; want only keep:1",
			f.images.has("web:1"), f.images.has("tool:1"), f.images.has("keep:1"))
	}
	stop()

	// What Sync applied is persisted like Apply's work.
	loaded, err := LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]ImageCache{{Namespace: "ops", Name: "tools", Images: []string{"keep:1"}}}, loaded); diff != "" {
		t.Errorf("state -want +got:\n%s", diff)
	}
}

// An invalid set changes nothing, whichever cache is wrong.
func TestSyncChecksEverythingFirst(t *testing.T) {
	ctx := context.Background()
	good := ImageCache{Namespace: "a", Name: "good", Images: []string{"x:1"}}
	for _, tc := range []struct {
		name   string
		caches []ImageCache
		want   error
	}{
		{"listed twice", []ImageCache{good, {Namespace: "b", Name: "c", Images: []string{"y"}}, good}, ErrInvalidCache},
		{"no name", []ImageCache{good, {Namespace: "b", Images: []string{"y"}}}, ErrInvalidCache},
		{"empty image", []ImageCache{good, {Namespace: "b", Name: "c", Images: []string{""}}}, ErrInvalidCache},
		{"pull secret", []ImageCache{good, {Namespace: "b", Name: "c", Images: []string{"y"}, PullSecret: aliceSecret}}, ErrPrivateImage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			m := f.standalone(t)
			if err := m.Apply(ctx, ImageCache{Namespace: "old", Name: "one", Images: []string{"o"}}); err != nil {
				t.Fatal(err)
			}
			if n := m.Pending(); n != 1 {
				t.Errorf("Pending = %d before Run, want 1", n)
			}
			res, err := m.Sync(ctx, tc.caches)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Sync = %v, want %v", err, tc.want)
			}
			if res.Changed() {
				t.Errorf("Sync changed %+v", res)
			}
			if got := m.Caches(); len(got) != 1 || got[0].Name != "one" {
				t.Errorf("caches after a refused Sync: %+v", got)
			}
		})
	}
}
