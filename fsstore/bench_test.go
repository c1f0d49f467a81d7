package fsstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/memstore"
)

var benchSizes = []int{2000, 20000}

// benchFixtures holds one kubelet directory per size, built once per test
// binary run in a shared temporary directory and removed by TestMain.
var benchFixtures struct {
	once sync.Once
	root string
	err  error
	mu   sync.Mutex
	dirs map[int]string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchFixtures.root != "" {
		os.RemoveAll(benchFixtures.root)
	}
	os.Exit(code)
}

// benchDir returns a kubelet directory holding n pulled records (and n/10
// intents) in the kubelet's format.
func benchDir(b *testing.B, n int) string {
	b.Helper()
	benchFixtures.once.Do(func() {
		benchFixtures.root, benchFixtures.err = os.MkdirTemp("", "fsstore-bench-")
		benchFixtures.dirs = map[int]string{}
	})
	if benchFixtures.err != nil {
		b.Fatal(benchFixtures.err)
	}
	benchFixtures.mu.Lock()
	defer benchFixtures.mu.Unlock()
	if d, ok := benchFixtures.dirs[n]; ok {
		return d
	}
	d := filepath.Join(benchFixtures.root, fmt.Sprintf("records-%d", n))
	for i := range n {
		r := testRecord(i)
		writeRaw(b, filepath.Join(recordsPath(d), FileName(r.ImageRef)), mustEncodeRecord(b, r))
		if i%10 == 0 {
			img := fmt.Sprintf("registry.example.com/team-%d/app:%d", i%17, i)
			writeRaw(b, filepath.Join(intentsPath(d), FileName(img)), mustEncodeIntent(b, img))
		}
	}
	benchFixtures.dirs[n] = d
	return d
}

func benchOptions(sync bool) []Option {
	if sync {
		return nil
	}
	return []Option{WithoutSync()}
}

func benchOpen(b *testing.B, dir string, opts []Option) *Store {
	b.Helper()
	s, err := New(klog.Background(), dir, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// benchOpener opens the store under test and returns it with its closer.
type benchOpener func(b *testing.B) (accessor.PullRecordsAccessor, func())

// forEachConfig runs fn as sub-benchmarks records=N/sync=S/store=T, where T
// is "fsstore" (the file store alone) or "cache" (memstore's write-through
// cache in front of it, warmed up at open as a kubelet would use it).
func forEachConfig(b *testing.B, fn func(b *testing.B, open benchOpener)) {
	for _, n := range benchSizes {
		for _, sync := range []bool{true, false} {
			for _, cached := range []bool{false, true} {
				kind := "fsstore"
				if cached {
					kind = "cache"
				}
				b.Run(fmt.Sprintf("records=%d/sync=%v/store=%s", n, sync, kind), func(b *testing.B) {
					dir := benchDir(b, n)
					fn(b, func(b *testing.B) (accessor.PullRecordsAccessor, func()) {
						s := benchOpen(b, dir, benchOptions(sync))
						if !cached {
							return s, func() { s.Close() }
						}
						c, err := memstore.NewCache(klog.Background(), s)
						if err != nil || !c.Authoritative() {
							b.Fatalf("NewCache: authoritative=%v, %v", c != nil && c.Authoritative(), err)
						}
						return c, func() { s.Close() }
					})
				})
			}
		}
	}
}

func BenchmarkWrite(b *testing.B) {
	forEachConfig(b, func(b *testing.B, open benchOpener) {
		s, closeStore := open(b)
		defer closeStore()
		logger := klog.Background()
		b.Run("new", func(b *testing.B) {
			recs := make([]*accessor.ImagePulledRecord, b.N)
			for i := range recs {
				recs[i] = testRecord(1_000_000 + i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := s.WriteImagePulledRecord(logger, recs[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			// Leave the shared fixture as it was.
			for _, r := range recs {
				if err := s.DeleteImagePulledRecord(logger, r.ImageRef); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("overwrite", func(b *testing.B) {
			recs := make([]*accessor.ImagePulledRecord, 64)
			for i := range recs {
				recs[i] = testRecord(i * 17 % 2000)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := s.WriteImagePulledRecord(logger, recs[i%len(recs)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

func BenchmarkGet(b *testing.B) {
	forEachConfig(b, func(b *testing.B, open benchOpener) {
		s, closeStore := open(b)
		defer closeStore()
		refs := make([]string, 256)
		for i := range refs {
			refs[i] = testRecord(i * 7 % 2000).ImageRef
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, found, err := s.GetImagePulledRecord(refs[i%len(refs)]); err != nil || !found {
				b.Fatal(found, err)
			}
		}
	})
}

func BenchmarkList(b *testing.B) {
	forEachConfig(b, func(b *testing.B, open benchOpener) {
		s, closeStore := open(b)
		defer closeStore()
		// Use up the open-time snapshot: the file store alone then reads
		// the disk; the cache serves lists from memory.
		if _, err := s.ListImagePulledRecords(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			recs, err := s.ListImagePulledRecords()
			if err != nil || len(recs) == 0 {
				b.Fatal(len(recs), err)
			}
		}
	})
}

// BenchmarkOpen measures New (one read and decode of every file) followed
// by the first list, which the open-time snapshot serves; with the cache,
// that first list is the cache's warm-up.
func BenchmarkOpen(b *testing.B) {
	forEachConfig(b, func(b *testing.B, open benchOpener) {
		b.ReportAllocs()
		for range b.N {
			s, closeStore := open(b)
			if _, err := s.ListImagePulledRecords(); err != nil {
				b.Fatal(err)
			}
			closeStore()
		}
	})
}
