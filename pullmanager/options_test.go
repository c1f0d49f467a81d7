package pullmanager

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/memstore"
)

// openStamps opens a credential proof store in a temporary directory.
func openStamps(t *testing.T) *credstamp.Store {
	t.Helper()
	s, err := credstamp.Open(klog.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  Option
		want string // in the error message
	}{
		{"nil clock", WithClock(nil), "WithClock(nil)"},
		{"zero lock stripes", WithLockStripes(0), "WithLockStripes(0)"},
		{"negative lock stripes", WithLockStripes(-3), "WithLockStripes(-3)"},
		{"expiry without a store", WithCredentialExpiry(time.Hour, nil), "WithCredentialExpiry(1h0m0s, nil)"},
		{"a store without a TTL", WithCredentialExpiry(0, openStamps(t)), "WithCredentialExpiry(0s, store)"},
		{"a store with a negative TTL", WithCredentialExpiry(-time.Minute, openStamps(t)), "WithCredentialExpiry(-1m0s, store)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, _ := testCtx(t)
			m, err := NewImagePullManager(ctx, memstore.New(), mustPolicy(t, AlwaysVerify), nil, tc.opt)
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("NewImagePullManager = %v, %v; want ErrInvalidOption", m, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
		})
	}
}

func TestValidOptions(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
	}{
		{"none", nil},
		{"fake clock", []Option{WithClock(testingclock.NewFakeClock(t0))}},
		{"one lock stripe", []Option{WithLockStripes(1)}},
		{"nil metrics", []Option{WithMetrics(nil)}},
		{"every switch", []Option{WithPreloadedImageProtection(true), WithNormalizedImageNames(true), WithCredentialExpiry(time.Hour, openStamps(t))}},
		{"expiry explicitly off", []Option{WithCredentialExpiry(0, nil)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, _ := testCtx(t)
			if _, err := NewImagePullManager(ctx, memstore.New(), mustPolicy(t, AlwaysVerify), nil, tc.opts...); err != nil {
				t.Fatalf("NewImagePullManager: %v", err)
			}
		})
	}
}
