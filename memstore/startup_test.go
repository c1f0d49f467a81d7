package memstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/fsstore/fsstoretest"
	"github.com/pullrecords/pullrecords/memstore"
)

// The start-up benchmarks measure what a kubelet pays when it starts over a
// node's records: fsstore.New, memstore.NewCache and the list of intents the
// manager's start-up makes, over 10,000 to 200,000 record files.
//
// Two kinds of fixture:
//
//   - "distinct": benchRecord, two names per record, each with a secret and a
//     service account whose credential hash is the record's own. Every secret
//     is a new value: the worst case for interning, and the records the
//     other benchmarks here use.
//   - "shared": two names per record whose secrets and service accounts come
//     from pools of 50 and 20, as on a node where a few secrets pull many
//     images.
//
// Fixtures are written once per test binary run (or kept in
// $PULLRECORDS_FIXTURES across runs, if set, which saves minutes at 200,000
// records) and removed at the end otherwise.

// startupChildEnv, when set in the environment of the test binary, makes
// TestMain run one start-up over the directory it names and print the result
// as JSON instead of running tests. BenchmarkStartupProcess uses it to
// measure a fresh process, whose peak RSS is the start-up's alone.
const startupChildEnv = "PULLRECORDS_STARTUP_CHILD"

// startupResult is what a child process reports.
type startupResult struct {
	Seconds     float64 // fsstore.New + NewCache + intents list
	MaxRSSBytes int64   // getrusage(RUSAGE_SELF).ru_maxrss
	CPUSeconds  float64 // user + system time of the start-up (getrusage)
	HeapBytes   uint64  // live heap after a GC, with the store and cache alive
	GCCycles    uint64  // collections during the start-up
	GCCPU       float64 // share of the start-up's busy CPU time spent in GC (runtime/metrics estimate)
	Records     int
}

func sharedRecord(i int) *accessor.ImagePulledRecord {
	r := &accessor.ImagePulledRecord{
		ImageRef:          benchRef(i),
		LastUpdatedTime:   accessor.StorageTime(accessortest.BaseTime.Add(time.Duration(i) * time.Second)),
		CredentialMapping: make(map[string]accessor.ImagePullCredentials, 2),
	}
	for n := range 2 {
		secret := (i + n) % 50
		sa := (i + n) % 20
		r.CredentialMapping[fmt.Sprintf("registry.example.com/team-%d/app-%d-%d", i%100, i, n)] = accessor.ImagePullCredentials{
			KubernetesSecrets: []accessor.ImagePullSecret{{
				UID:            fmt.Sprintf("0b6f8a1c-5d2e-4c1b-9a7f-%012d", secret),
				Namespace:      fmt.Sprintf("team-%d", secret),
				Name:           fmt.Sprintf("registry-credentials-%d", secret),
				CredentialHash: accessortest.CredentialHash("pool", strconv.Itoa(secret)),
			}},
			KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{{
				UID:       fmt.Sprintf("7c1d2e3f-4a5b-6c7d-8e9f-%012d", sa),
				Namespace: fmt.Sprintf("team-%d", sa),
				Name:      "image-puller",
			}},
		}
	}
	return r
}

var fixtureKinds = map[string]func(int) *accessor.ImagePulledRecord{
	"distinct": benchRecord,
	"shared":   sharedRecord,
}

// startupFixtures holds the kubelet directories built so far, by kind and size.
var startupFixtures = struct {
	mu   sync.Mutex
	root string
	temp bool // root is ours to remove
	dirs map[string]string
}{dirs: map[string]string{}}

func cleanupStartupFixtures() {
	startupFixtures.mu.Lock()
	defer startupFixtures.mu.Unlock()
	if startupFixtures.temp {
		os.RemoveAll(startupFixtures.root)
	}
}

// startupDir returns a kubelet directory holding n records of the given kind
// and 100 intents, written in the kubelet's format.
func startupDir(b *testing.B, kind string, n int) string {
	b.Helper()
	startupFixtures.mu.Lock()
	defer startupFixtures.mu.Unlock()
	key := fmt.Sprintf("%s-%d", kind, n)
	if d, ok := startupFixtures.dirs[key]; ok {
		return d
	}
	if startupFixtures.root == "" {
		if root := os.Getenv("PULLRECORDS_FIXTURES"); root != "" {
			startupFixtures.root = root
		} else {
			root, err := os.MkdirTemp("", "memstore-startup-")
			if err != nil {
				b.Fatal(err)
			}
			startupFixtures.root, startupFixtures.temp = root, true
		}
	}
	dir := filepath.Join(startupFixtures.root, "v1-"+key)
	done := filepath.Join(dir, "complete")
	if _, err := os.Stat(done); err != nil {
		if err := writeFixture(dir, fixtureKinds[kind], n); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(done, nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	startupFixtures.dirs[key] = dir
	return dir
}

// writeFixture writes the files directly, as the kubelet would have, without
// going through a store.
func writeFixture(dir string, record func(int) *accessor.ImagePulledRecord, n int) error {
	return fsstoretest.Fixture{Intents: fixtureIntents(), Records: n, Record: record}.Write(dir)
}

// fixtureIntents are 100 intents over 17 repositories.
func fixtureIntents() []string {
	out := make([]string, 100)
	for i := range out {
		out[i] = fmt.Sprintf("registry.example.com/team-%d/app:%d", i%17, i)
	}
	return out
}

// startup is what a kubelet does at start: open the store, warm the cache,
// list the intents. It returns the store so the caller can close it.
func startup(dir string) (*fsstore.Store, *memstore.Cache, error) {
	s, err := fsstore.New(klog.Background(), dir, fsstore.WithoutSync())
	if err != nil {
		return nil, nil, err
	}
	c, err := memstore.NewCache(klog.Background(), s)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	if _, err := c.ListImagePullIntents(); err != nil {
		s.Close()
		return nil, nil, err
	}
	if !c.Authoritative() {
		s.Close()
		return nil, nil, errors.New("cache is not authoritative")
	}
	return s, c, nil
}

var startupSizes = []int{10_000, 100_000, 200_000}

// BenchmarkStartup measures the start-up in the benchmark's process (warm
// page cache: the fixture was just written or read). Run it on its own: a
// large live heap left by other benchmarks slows the collections.
func BenchmarkStartup(b *testing.B) {
	for _, kind := range []string{"distinct", "shared"} {
		for _, n := range startupSizes {
			b.Run(fmt.Sprintf("%s/records=%d", kind, n), func(b *testing.B) {
				dir := startupDir(b, kind, n)
				runtime.GC()
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					s, c, err := startup(dir)
					if err != nil {
						b.Fatal(err)
					}
					if c.CountImagePulledRecords() != n {
						b.Fatalf("%d records, want %d", c.CountImagePulledRecords(), n)
					}
					b.StopTimer()
					s.Close()
					s, c = nil, nil
					runtime.GC()
					b.StartTimer()
				}
			})
		}
	}
}

// BenchmarkStartupProcess runs each start-up in a fresh process (this test
// binary again, see startupChildEnv), as a kubelet starts, and reports the
// child's own timing of the start-up (startup-ms), its peak RSS (maxrss-MB),
// the live heap it keeps (heap-MB), and its GC cycles and GC share of CPU.
// ns/op includes the process start and is not the number to read.
//
// With PULLRECORDS_DROP_CACHES=1 (root only) the page cache is dropped
// before every start-up: a cold start after a reboot.
func BenchmarkStartupProcess(b *testing.B) {
	cold := os.Getenv("PULLRECORDS_DROP_CACHES") == "1"
	for _, kind := range []string{"distinct", "shared"} {
		for _, n := range startupSizes {
			b.Run(fmt.Sprintf("%s/records=%d", kind, n), func(b *testing.B) {
				dir := startupDir(b, kind, n)
				var sum startupResult
				b.ResetTimer()
				for range b.N {
					if cold {
						b.StopTimer()
						dropCaches(b)
						b.StartTimer()
					}
					res := runStartupChild(b, dir)
					if res.Records != n {
						b.Fatalf("child loaded %d records, want %d", res.Records, n)
					}
					sum.Seconds += res.Seconds
					sum.MaxRSSBytes += res.MaxRSSBytes
					sum.CPUSeconds += res.CPUSeconds
					sum.HeapBytes += res.HeapBytes
					sum.GCCycles += res.GCCycles
					sum.GCCPU += res.GCCPU
				}
				f := float64(b.N)
				b.ReportMetric(sum.Seconds*1e3/f, "startup-ms")
				b.ReportMetric(sum.CPUSeconds*1e3/f, "cpu-ms")
				b.ReportMetric(float64(sum.MaxRSSBytes)/1e6/f, "maxrss-MB")
				b.ReportMetric(float64(sum.HeapBytes)/1e6/f, "heap-MB")
				b.ReportMetric(float64(sum.GCCycles)/f, "gcs")
				b.ReportMetric(100*sum.GCCPU/f, "gc-cpu-%")
			})
		}
	}
}

func dropCaches(b *testing.B) {
	b.Helper()
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200); err != nil {
		b.Skipf("cannot drop the page cache: %v", err)
	}
}

func runStartupChild(b *testing.B, dir string) startupResult {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), startupChildEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("start-up child: %v", err)
	}
	var res startupResult
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("start-up child printed %q: %v", out, err)
	}
	return res
}

// runStartupChildMain is the child's side: one start-up, measured, printed
// as JSON on stdout.
func runStartupChildMain(dir string) int {
	samples := []metrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/total:cpu-seconds"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/cpu/classes/idle:cpu-seconds"},
	}
	metrics.Read(samples)
	gc0, cpu0, cycles0, idle0 := samples[0].Value.Float64(), samples[1].Value.Float64(), samples[2].Value.Uint64(), samples[3].Value.Float64()
	var ru0 syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	s, c, err := startup(dir)
	elapsed := time.Since(start)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	metrics.Read(samples)
	var res startupResult
	res.Seconds = elapsed.Seconds()
	res.GCCycles = samples[2].Value.Uint64() - cycles0
	// Busy CPU time: what GOMAXPROCS made available less idle time.
	if cpu := samples[1].Value.Float64() - cpu0 - (samples[3].Value.Float64() - idle0); cpu > 0 {
		res.GCCPU = (samples[0].Value.Float64() - gc0) / cpu
	}
	res.Records = c.CountImagePulledRecords()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	res.MaxRSSBytes = ru.Maxrss * 1024
	cpu := func(ru *syscall.Rusage) float64 {
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	res.CPUSeconds = cpu(&ru) - cpu(&ru0)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapBytes = ms.HeapAlloc
	runtime.KeepAlive(c)
	s.Close()
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

// maybeStartupChild runs the child's side when the environment asks for it.
func maybeStartupChild() (code int, isChild bool) {
	dir := os.Getenv(startupChildEnv)
	if dir == "" || strings.TrimSpace(dir) == "" {
		return 0, false
	}
	return runStartupChildMain(dir), true
}
