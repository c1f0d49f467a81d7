package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/memstore"
)

func TestMain(m *testing.M) {
	if code, isChild := maybeStartupChild(); isChild {
		os.Exit(code)
	}
	code := m.Run()
	benchDirs.cleanup()
	cleanupStartupFixtures()
	os.Exit(code)
}

func openFS(t testing.TB, logger klog.Logger, dir string) *fsstore.Store {
	t.Helper()
	s, err := fsstore.New(logger, dir, fsstore.WithoutSync())
	if err != nil {
		t.Fatalf("fsstore.New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestCacheOverFSStoreConformance(t *testing.T) {
	accessortest.Run(t, func(t *testing.T) accessor.PullRecordsAccessor {
		logger := ktesting.NewLogger(t, ktesting.NewConfig())
		c, err := memstore.NewCache(logger, openFS(t, logger, t.TempDir()))
		if err != nil {
			t.Fatalf("NewCache: %v", err)
		}
		return c
	})
}

func recordPath(dir, imageRef string) string {
	return filepath.Join(dir, fsstore.DirName, fsstore.RecordsDir, fsstore.FileName(imageRef))
}

// A corrupt file makes the warm-up non-authoritative; the corrupt record is
// reported as existing with an error (the manager fails safe) until the file
// is repaired and the cache reloaded. Files edited by hand show up after
// Reload.
func TestCacheOverFSStoreCorruptFileAndHandEdits(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	dir := t.TempDir()
	s := openFS(t, logger, dir)
	good := accessortest.NewRecord("sha256:good", "example.com/good")
	bad := accessortest.NewRecord("sha256:bad", "example.com/bad")
	for _, r := range []*accessor.ImagePulledRecord{good, bad} {
		if err := s.WriteImagePulledRecord(logger, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(recordPath(dir, bad.ImageRef), []byte("{not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	c, err := memstore.NewCache(logger, openFS(t, logger, dir))
	if err != nil {
		t.Fatal(err)
	}
	if c.Authoritative() {
		t.Fatal("Authoritative() = true over a corrupt file")
	}
	if got, ok, err := c.GetImagePulledRecord(good.ImageRef); !ok || err != nil || accessortest.DiffRecords(good, got) != "" {
		t.Errorf("GetImagePulledRecord(good) = %+v, %v, %v", got, ok, err)
	}
	for range 2 {
		if r, ok, err := c.PeekImagePulledRecord(bad.ImageRef); r != nil || !ok || !errors.Is(err, accessor.ErrCorrupt) {
			t.Errorf("PeekImagePulledRecord(corrupt) = %v, %v, %v; want nil, true, ErrCorrupt", r, ok, err)
		}
	}
	var listErr *accessor.ListError
	if _, err := c.ListImagePulledRecords(); !errors.As(err, &listErr) {
		t.Errorf("ListImagePulledRecords error = %v; want a ListError", err)
	}

	// Repair by hand: rewrite the corrupt file with a valid record, and add
	// one more record file the cache has never seen.
	fixed := accessortest.NewNodeAccessibleRecord(bad.ImageRef, "example.com/fixed")
	added := accessortest.NewRecord("sha256:added", "example.com/added")
	for _, r := range []*accessor.ImagePulledRecord{fixed, added} {
		data, err := accessor.EncodePulledRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(recordPath(dir, r.ImageRef), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Reload(context.Background()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if !c.Authoritative() {
		t.Fatal("Authoritative() = false after a clean Reload")
	}
	for _, want := range []*accessor.ImagePulledRecord{good, fixed, added} {
		got, ok, err := c.GetImagePulledRecord(want.ImageRef)
		if !ok || err != nil {
			t.Errorf("GetImagePulledRecord(%s) = _, %v, %v", want.ImageRef, ok, err)
			continue
		}
		if diff := accessortest.DiffRecords(want, got); diff != "" {
			t.Errorf("GetImagePulledRecord(%s) after Reload (-want +got):\n%s", want.ImageRef, diff)
		}
	}

	// A file removed by hand stays visible in the authoritative cache until
	// the next Reload.
	if err := os.Remove(recordPath(dir, added.ImageRef)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.GetImagePulledRecord(added.ImageRef); !ok {
		t.Error("record removed by hand vanished before Reload; the cache is not authoritative?")
	}
	if err := c.Reload(context.Background()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if _, ok, _ := c.GetImagePulledRecord(added.ImageRef); ok {
		t.Error("record removed by hand still visible after Reload")
	}
}

// benchDirs holds kubelet directories of n record files, built once per size
// and removed by TestMain.
var benchDirs = &dirCache{dirs: map[int]string{}}

type dirCache struct {
	mu   sync.Mutex
	dirs map[int]string
}

func (d *dirCache) get(b *testing.B, n int) string {
	b.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if dir, ok := d.dirs[n]; ok {
		return dir
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("memstore-bench-%d-", n))
	if err != nil {
		b.Fatal(err)
	}
	d.dirs[n] = dir
	s, err := fsstore.New(klog.Background(), dir, fsstore.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range n {
		if err := s.WriteImagePulledRecord(klog.Background(), benchRecord(i)); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

func (d *dirCache) cleanup() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, dir := range d.dirs {
		os.RemoveAll(dir)
	}
}

// BenchmarkFSStoreOpenAndWarmUp measures what a node pays at start: open the
// file store over 10,000 record files and warm a cache from it. "open-only"
// is the file store's share.
func BenchmarkFSStoreOpenAndWarmUp(b *testing.B) {
	dir := benchDirs.get(b, 10_000)
	for _, warm := range []bool{false, true} {
		name := "open-only"
		if warm {
			name = "open+warm-up"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s, err := fsstore.New(klog.Background(), dir, fsstore.WithoutSync())
				if err != nil {
					b.Fatal(err)
				}
				if warm {
					c, err := memstore.NewCache(klog.Background(), s)
					if err != nil || !c.Authoritative() || c.CountImagePulledRecords() != 10_000 {
						b.Fatalf("NewCache: %v", err)
					}
				}
				s.Close()
			}
		})
	}
}

// BenchmarkCachedGetOverFSStore measures cached lookups over real files.
func BenchmarkCachedGetOverFSStore(b *testing.B) {
	for _, n := range []int{2_000, 20_000} {
		dir := benchDirs.get(b, n)
		s, err := fsstore.New(klog.Background(), dir, fsstore.WithoutSync())
		if err != nil {
			b.Fatal(err)
		}
		c, err := memstore.NewCache(klog.Background(), s)
		if err != nil || !c.Authoritative() {
			b.Fatalf("NewCache: %v", err)
		}
		refs := make([]string, 1024)
		for i := range refs {
			refs[i] = benchRef((i * 7919) % n)
		}
		for _, l := range lookups {
			b.Run(fmt.Sprintf("%s/records=%d/hit", l.name, n), func(b *testing.B) {
				for _, ref := range refs {
					l.fn(c, ref)
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						if !l.fn(c, refs[i&1023]) {
							panic("record not found")
						}
						i++
					}
				})
			})
		}
		s.Close()
	}
}
