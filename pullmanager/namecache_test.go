package pullmanager

import (
	"fmt"
	"sync"
	"testing"
)

func TestNameCacheBounds(t *testing.T) {
	c := newNameCache[int](10, 1000)
	for i := range 1000 {
		c.put(fmt.Sprint("k", i), i, 1)
	}
	if n := c.len(); n > 10 {
		t.Errorf("%d entries held, bound 10", n)
	}
	if v, ok := c.get("k999"); !ok || v != 999 {
		t.Errorf("latest entry: %v %v", v, ok)
	}

	b := newNameCache[int](1000, 100)
	for i := range 1000 {
		b.put(fmt.Sprint("k", i), i, 10)
	}
	if n := b.size(); n > 100 {
		t.Errorf("%d bytes held, bound 100", n)
	}
	b.put("huge", 1, 51) // larger than a generation (half the bound)
	if _, ok := b.get("huge"); ok {
		t.Error("a value larger than a generation was stored")
	}
}

// TestNameCacheKeepsHotSet: strings used once per generation survive a
// flood of one-off strings twenty times the cache's size.
func TestNameCacheKeepsHotSet(t *testing.T) {
	c := newNameCache[int](100, 1<<20)
	hot := []string{"busybox", "nginx:1.27", "registry.example/team/app:v1"}
	for i, h := range hot {
		c.put(h, i, len(h))
	}
	for i := range 2000 {
		c.put(fmt.Sprint("one-off-", i), i, 10)
		if i%10 == 0 {
			for j, h := range hot {
				if v, ok := c.get(h); !ok || v != j {
					t.Fatalf("after %d one-off strings, hot %q: %v %v", i, h, v, ok)
				}
			}
		}
	}
	if _, ok := c.get("one-off-0"); ok {
		t.Error("a cold one-off string survived 2000 others in a cache of 100")
	}
}

func TestNameCacheConcurrent(t *testing.T) {
	c := newNameCache[string](64, 1<<20)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := fmt.Sprint("k", (i*7+w)%300)
				if v, ok := c.get(k); ok && v != k {
					t.Errorf("get(%q) = %q", k, v)
					return
				}
				c.put(k, k, len(k))
			}
		})
	}
	wg.Wait()
	// Racing writers may each add one value past a generation's bound.
	if n := c.len(); n > 64+2*8 {
		t.Errorf("%d entries held, bound 64 (+ one per writer)", n)
	}
}
