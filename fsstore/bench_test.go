package fsstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
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

// forEachConfig runs fn as sub-benchmarks records=N/sync=S.
func forEachConfig(b *testing.B, fn func(b *testing.B, dir string, opts []Option)) {
	for _, n := range benchSizes {
		for _, sync := range []bool{true, false} {
			b.Run(fmt.Sprintf("records=%d/sync=%v", n, sync), func(b *testing.B) {
				fn(b, benchDir(b, n), benchOptions(sync))
			})
		}
	}
}

func benchOpen(b *testing.B, dir string, opts []Option) *Store {
	b.Helper()
	s, err := New(klog.Background(), dir, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkWrite(b *testing.B) {
	forEachConfig(b, func(b *testing.B, dir string, opts []Option) {
		s := benchOpen(b, dir, opts)
		defer s.Close()
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
	forEachConfig(b, func(b *testing.B, dir string, opts []Option) {
		s := benchOpen(b, dir, opts)
		defer s.Close()
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
	forEachConfig(b, func(b *testing.B, dir string, opts []Option) {
		s := benchOpen(b, dir, opts)
		defer s.Close()
		// Use up the open-time snapshot: measure reading the disk.
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
// by the first list, which the open-time snapshot serves.
func BenchmarkOpen(b *testing.B) {
	forEachConfig(b, func(b *testing.B, dir string, opts []Option) {
		b.ReportAllocs()
		for range b.N {
			s := benchOpen(b, dir, opts)
			if _, err := s.ListImagePulledRecords(); err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
	})
}
