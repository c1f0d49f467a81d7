package memstore_test

import (
	"fmt"
	"runtime"
	"testing"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
	"github.com/pullrecords/pullrecords/memstore"
)

func benchRef(i int) string { return fmt.Sprintf("sha256:%064x", i) }

func benchRecord(i int) *accessor.ImagePulledRecord {
	return accessortest.NewRecord(benchRef(i),
		fmt.Sprintf("registry.example.com/team-%d/app-%d", i%100, i),
		fmt.Sprintf("mirror.example.com/team-%d/app-%d", i%100, i))
}

// filledStore returns a Store holding n bench records.
func filledStore(b *testing.B, n int) *memstore.Store {
	b.Helper()
	s := memstore.New()
	for i := range n {
		if err := s.WriteImagePulledRecord(klog.Background(), benchRecord(i)); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// onceDelegate hands its records to the first list and forgets them, like a
// file store that holds nothing in memory: after the warm-up only the cache
// holds the records, so the benchmarks see the heap a node would have.
type onceDelegate struct {
	*memstore.Store // empty; the other methods
	records         []*accessor.ImagePulledRecord
}

func (d *onceDelegate) ListImagePulledRecords() ([]*accessor.ImagePulledRecord, error) {
	out := d.records
	d.records = nil
	return out, nil
}

// warmCache returns an authoritative Cache of n bench records whose delegate
// holds nothing.
func warmCache(b *testing.B, n int) *memstore.Cache {
	b.Helper()
	d := &onceDelegate{Store: memstore.New(), records: make([]*accessor.ImagePulledRecord, n)}
	for i := range n {
		d.records[i] = benchRecord(i)
	}
	c, err := memstore.NewCache(klog.Background(), d)
	if err != nil {
		b.Fatal(err)
	}
	if !c.Authoritative() {
		b.Fatal("cache is not authoritative")
	}
	runtime.GC()
	return c
}

var benchSizes = []int{2_000, 20_000, 100_000}

type lookup func(c *memstore.Cache, ref string) bool

var lookups = []struct {
	name string
	fn   lookup
}{
	{"Get", func(c *memstore.Cache, ref string) bool { _, ok, _ := c.GetImagePulledRecord(ref); return ok }},
	{"Peek", func(c *memstore.Cache, ref string) bool { _, ok, _ := c.PeekImagePulledRecord(ref); return ok }},
}

// BenchmarkCachedLookup measures GetImagePulledRecord (a deep copy) and
// PeekImagePulledRecord (shared, read-only) on an authoritative cache, hits
// and misses, serial and with b.RunParallel.
func BenchmarkCachedLookup(b *testing.B) {
	for _, n := range benchSizes {
		// One cache per size, dropped before the next size is built.
		var c *memstore.Cache
		for _, l := range lookups {
			for _, hit := range []bool{true, false} {
				kind := "hit"
				if !hit {
					kind = "miss"
				}
				refs := make([]string, 1024)
				for i := range refs {
					if hit {
						refs[i] = benchRef((i * 7919) % n)
					} else {
						refs[i] = benchRef(n + i)
					}
				}
				prepare := func(b *testing.B) {
					if c == nil {
						c = warmCache(b, n)
					}
					for _, ref := range refs { // build peeked records outside the timer
						l.fn(c, ref)
					}
					b.ReportAllocs()
					b.ResetTimer()
				}
				b.Run(fmt.Sprintf("%s/records=%d/%s/serial", l.name, n, kind), func(b *testing.B) {
					prepare(b)
					for i := 0; i < b.N; i++ {
						if l.fn(c, refs[i&1023]) != hit {
							b.Fatal("unexpected result")
						}
					}
				})
				b.Run(fmt.Sprintf("%s/records=%d/%s/parallel", l.name, n, kind), func(b *testing.B) {
					prepare(b)
					b.RunParallel(func(pb *testing.PB) {
						i := 0
						for pb.Next() {
							if l.fn(c, refs[i&1023]) != hit {
								panic("unexpected result")
							}
							i++
						}
					})
				})
			}
		}
		c = nil
		runtime.GC()
	}
}

// BenchmarkCachedIntentExists measures the other hot-path lookup.
func BenchmarkCachedIntentExists(b *testing.B) {
	s := memstore.New()
	for i := range 1000 {
		if err := s.WriteImagePullIntent(klog.Background(), fmt.Sprintf("example.com/app-%d:1", i)); err != nil {
			b.Fatal(err)
		}
	}
	c, err := memstore.NewCache(klog.Background(), s)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if ok, _ := c.ImagePullIntentExists("example.com/app-500:1"); !ok {
				panic("intent not found")
			}
		}
	})
}

// BenchmarkCachedList measures ListImagePulledRecords of 20,000 cached records.
func BenchmarkCachedList(b *testing.B) {
	c := warmCache(b, 20_000)
	b.ReportAllocs()
	for b.Loop() {
		list, err := c.ListImagePulledRecords()
		if err != nil || len(list) != 20_000 {
			b.Fatalf("listed %d records, %v", len(list), err)
		}
	}
}

// BenchmarkCacheWarmUp measures NewCache over a Store of 10,000 records.
func BenchmarkCacheWarmUp(b *testing.B) {
	s := filledStore(b, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		c, err := memstore.NewCache(klog.Background(), s)
		if err != nil || !c.Authoritative() {
			b.Fatalf("NewCache: %v", err)
		}
	}
}

// BenchmarkCacheWrite measures a write through the cache to a Store.
func BenchmarkCacheWrite(b *testing.B) {
	c, err := memstore.NewCache(klog.Background(), memstore.New())
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]*accessor.ImagePulledRecord, 1024)
	for i := range recs {
		recs[i] = benchRecord(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := c.WriteImagePulledRecord(klog.Background(), recs[i&1023]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkDeepCopyBaseline is the floor for GetImagePulledRecord: any copy
// of a record the caller owns allocates its map, as accessor's DeepCopy does.
func BenchmarkDeepCopyBaseline(b *testing.B) {
	rec := benchRecord(1)
	b.ReportAllocs()
	for b.Loop() {
		if rec.DeepCopy() == nil {
			b.Fatal("nil copy")
		}
	}
}
