package pullmanager

import (
	"fmt"
	"testing"
)

// TestStripedLocksAnySize: kubernetes#138935 panicked ("index out of range
// [63] with length 31") when more than 31 stripes were requested. Any size is
// safe here.
func TestStripedLocksAnySize(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 31, 32, 64, 500, 100_000} {
		l := newStripedLocks(n)
		want := max(n, 1)
		if len(l.stripes) != want {
			t.Errorf("size %d: %d stripes, want %d", n, len(l.stripes), want)
		}
		for i := range 2000 {
			l.lock(fmt.Sprintf("key-%d", i))()
		}
	}
	ctx, logger := testCtx(t)
	store := newFakeStore()
	m, _ := newTestManager(t, store, mustPolicy(t, AlwaysVerify), WithLockStripes(4096))
	for i := range 500 {
		img := fmt.Sprintf("registry.example/app%d:v1", i)
		if err := m.RecordPullIntent(logger, img); err != nil {
			t.Fatal(err)
		}
		m.RecordImagePulled(ctx, img, fmt.Sprintf("sha256:%d", i), nil)
		if got, _ := m.MustAttemptImagePull(ctx, img, fmt.Sprintf("sha256:%d", i), nil); !got {
			t.Fatalf("%s: no pull needed for a record without credentials", img)
		}
	}
}
