package pullmanager

import (
	"fmt"
	"testing"
)

// TestStripedLocksAnySize: kubernetes#138935 panicked ("index out of range
// [63] with length 31") when more than 31 stripes were requested. Any size is
// safe here (internal/keylock tests the lock set itself).
func TestStripedLocksAnySize(t *testing.T) {
	ctx, logger := testCtx(t)
	store := newFaultyStore()
	m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, AlwaysVerify), WithLockStripes(4096))
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
