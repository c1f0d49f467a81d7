package imagecache

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

func TestInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  Option
		want string // in the error message
	}{
		{"zero workers", WithWorkers(0), "WithWorkers(0)"},
		{"negative workers", WithWorkers(-2), "WithWorkers(-2)"},
		{"zero request timeout", WithRequestTimeout(0), "WithRequestTimeout(0s)"},
		{"negative request timeout", WithRequestTimeout(-time.Second), "WithRequestTimeout(-1s)"},
		{"zero attempts", WithRetries(0, time.Second, time.Minute), "WithRetries(0, 1s, 1m0s)"},
		{"negative attempts", WithRetries(-1, time.Second, time.Minute), "WithRetries(-1, 1s, 1m0s)"},
		{"zero base delay", WithRetries(3, 0, time.Minute), "WithRetries(3, 0s, 1m0s)"},
		{"negative base delay", WithRetries(3, -time.Second, time.Minute), "WithRetries(3, -1s, 1m0s)"},
		{"max below base", WithRetries(3, time.Minute, time.Second), "WithRetries(3, 1m0s, 1s)"},
		{"negative max delay", WithRetries(3, time.Second, -time.Second), "WithRetries(3, 1s, -1s)"},
		{"zero refresh check period", withRefreshCheckPeriod(0), "withRefreshCheckPeriod(0s)"},
		{"negative refresh check period", withRefreshCheckPeriod(-time.Second), "withRefreshCheckPeriod(-1s)"},
		{"nil clock", withClock(nil), "withClock(nil)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			logger, _ := ktesting.NewTestContext(t)
			for ctor, err := range map[string]error{
				"New":           second(New(logger, f.svc, f.pulls, tc.opt)),
				"NewStandalone": second(NewStandalone(logger, f.svc, tc.opt)),
			} {
				if !errors.Is(err, ErrInvalidOption) {
					t.Errorf("%s = %v; want ErrInvalidOption", ctor, err)
					continue
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: error %q does not name %s", ctor, err, tc.want)
				}
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
		{"one worker, one attempt", []Option{WithWorkers(1), WithRetries(1, time.Nanosecond, time.Nanosecond)}},
		{"short durations", []Option{WithRequestTimeout(time.Nanosecond), withRefreshCheckPeriod(time.Nanosecond)}},
		{"zero values that are defaults", []Option{WithStateDir(""), WithNode("", ""), WithResultHandler(nil), WithStatusHandler(nil)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			logger, _ := ktesting.NewTestContext(t)
			if _, err := New(logger, f.svc, f.pulls, append([]Option{withClock(f.clock)}, tc.opts...)...); err != nil {
				t.Errorf("New: %v", err)
			}
			if _, err := NewStandalone(logger, f.svc, append([]Option{withClock(f.clock)}, tc.opts...)...); err != nil {
				t.Errorf("NewStandalone: %v", err)
			}
		})
	}
}

// second returns the error of a constructor's results.
func second(_ *Manager, err error) error { return err }
