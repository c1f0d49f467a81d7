package memstore

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
)

// realisticRecord builds record i the way a decoder would: every string is
// freshly allocated. Each record has two names of its own; the secrets and
// service accounts come from pools, as on a node where a few dozen secrets
// pull many images.
func realisticRecord(i int) *accessor.ImagePulledRecord {
	r := &accessor.ImagePulledRecord{
		ImageRef:          fmt.Sprintf("sha256:%064x", i),
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
				CredentialHash: strings.Clone(accessortest.CredentialHash("pool", fmt.Sprint(secret))),
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

// generatorDelegate lists n realistic records built on the fly, so that after
// a warm-up only the cache holds them.
type generatorDelegate struct {
	*Store // empty; provides the other methods
	n      int
}

func (g *generatorDelegate) ListImagePulledRecords() ([]*accessor.ImagePulledRecord, error) {
	out := make([]*accessor.ImagePulledRecord, g.n)
	for i := range out {
		out[i] = realisticRecord(i)
	}
	return out, nil
}

func heapInUse() uint64 {
	var m runtime.MemStats
	for range 2 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// cacheBytesPerRecord warms a cache over n generated records and returns the
// heap it holds per record.
func cacheBytesPerRecord(logger klog.Logger, n int) (float64, *Cache) {
	before := heapInUse()
	c, err := NewCache(logger, &generatorDelegate{Store: New(), n: n})
	if err != nil {
		panic(err)
	}
	after := heapInUse()
	if c.records.Load().count() != n || !c.Authoritative() {
		panic("warm-up did not load every record")
	}
	return float64(after-before) / float64(n), c
}

// 100,000 records of two names each must stay well under 100 MB. This checks
// memory, not time, so it is a test.
func TestCacheMemoryPer100kRecords(t *testing.T) {
	const target = 100_000
	n := target
	if raceEnabled {
		n = target / 5 // the cost per record is what is checked
	}
	perRecord, c := cacheBytesPerRecord(ktesting.NewLogger(t, ktesting.NewConfig()), n)
	total := perRecord * target
	t.Logf("%d records: %.0f bytes per record, %.1f MB for %d records", n, perRecord, total/1e6, target)
	if total > 75e6 {
		t.Errorf("%d cached records would hold %.1f MB; want under 75 MB", target, total/1e6)
	}
	// Reading through the cache still gives the full records.
	got, ok, err := c.GetImagePulledRecord(realisticRecord(n - 1).ImageRef)
	if !ok || err != nil {
		t.Fatalf("GetImagePulledRecord = _, %v, %v", ok, err)
	}
	if diff := accessortest.DiffRecords(realisticRecord(n-1), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	runtime.KeepAlive(c)
}
