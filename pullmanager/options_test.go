package pullmanager

import (
	"errors"
	"strings"
	"testing"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/memstore"
)

func TestInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  Option
		want string // in the error message
	}{
		{"nil clock", WithClock(nil), "WithClock(nil)"},
		{"zero lock stripes", WithLockStripes(0), "WithLockStripes(0)"},
		{"negative lock stripes", WithLockStripes(-3), "WithLockStripes(-3)"},
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
		{"every switch", []Option{WithPreloadedImageProtection(true), WithNormalizedImageNames(true)}},
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
