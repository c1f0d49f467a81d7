package keylock

import (
	"fmt"
	"sync"
	"testing"
)

// Any stripe count is usable and every index is in range
// (kubernetes#138935 panicked above 31 stripes).
func TestAnyStripeCount(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 2, 31, 32, 63, 500, 4096} {
		s := New(n)
		want := max(n, 1)
		if s.Len() != want {
			t.Errorf("New(%d).Len() = %d, want %d", n, s.Len(), want)
		}
		for i := range 2000 {
			key := fmt.Sprintf("registry.example/app-%d:1", i)
			if idx := s.Index(key); idx < 0 || idx >= s.Len() {
				t.Fatalf("New(%d): Index(%q) = %d out of range", n, key, idx)
			}
			s.Lock(key)()
		}
	}
}

// The same key always maps to the same stripe, and many keys use many stripes.
func TestSameKeySameStripe(t *testing.T) {
	s := New(64)
	used := map[int]bool{}
	for i := range 1000 {
		key := fmt.Sprint("key-", i)
		if s.Index(key) != s.Index(key) {
			t.Fatalf("Index(%q) is not stable", key)
		}
		used[s.Index(key)] = true
	}
	if len(used) < 48 {
		t.Errorf("1000 keys used only %d of 64 stripes", len(used))
	}
}

// Holders of one key never overlap; LockAll excludes every key.
func TestMutualExclusion(t *testing.T) {
	s := New(8)
	var wg sync.WaitGroup
	counters := make([]int, 4) // unsynchronised on purpose: -race flags overlap
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := (g + i) % len(counters)
				if i%50 == 0 {
					unlock := s.LockAll()
					for j := range counters {
						counters[j]++
					}
					unlock()
					continue
				}
				unlock := s.Lock(fmt.Sprint("key-", k))
				counters[k]++
				unlock()
			}
		})
	}
	wg.Wait()
	total := 0
	for _, c := range counters {
		total += c
	}
	// 8 goroutines × 500 iterations; every 50th adds to all 4 counters.
	if want := 8*(500-10) + 8*10*4; total != want {
		t.Errorf("total = %d, want %d", total, want)
	}
}
