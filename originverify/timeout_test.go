package originverify

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// deadlineTransport records the deadline of the request it gets and fails
// it, without any network.
type deadlineTransport struct {
	deadline time.Time
	has      bool
}

var errNoNetwork = errors.New("no network in this test")

func (d *deadlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	d.deadline, d.has = req.Context().Deadline()
	return nil, errNoNetwork
}

// A Verify whose context has no deadline is bounded by the default 30 s
// (or WithTimeout's); a context with a deadline keeps its own.
func TestEveryRequestIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tests := []struct {
			name string
			opts []Option
			ctx  func() (context.Context, context.CancelFunc)
			want time.Duration
		}{
			{"default", nil, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, DefaultTimeout},
			{"WithTimeout", []Option{WithTimeout(7 * time.Second)}, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, 7 * time.Second},
			{"caller's deadline", []Option{WithTimeout(7 * time.Second)}, func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 2*time.Minute)
			}, 2 * time.Minute},
		}
		for _, tc := range tests {
			rt := &deadlineTransport{}
			ctx, cancel := tc.ctx()
			start := time.Now()
			_, err := New(append(tc.opts, WithTransport(rt))...).Verify(ctx, "registry.example/app:v1", nil)
			cancel()
			if !errors.Is(err, ErrUnreachable) {
				t.Errorf("%s: Verify = %v, want ErrUnreachable", tc.name, err)
			}
			if !rt.has || !rt.deadline.Equal(start.Add(tc.want)) {
				t.Errorf("%s: request deadline %v (set %v), want start + %v", tc.name, rt.deadline.Sub(start), rt.has, tc.want)
			}
		}
	})
}

// silentTransport never answers: it waits for the request's context.
type silentTransport struct{}

func (silentTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// A registry that never answers costs the default 30 s (in the bubble's
// fake time) and gives ErrUnreachable naming the deadline.
func TestSilentRegistryTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		_, err := New(WithTransport(silentTransport{})).Verify(context.Background(), "registry.example/app:v1", nil)
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "deadline") {
			t.Fatalf("Verify = %v, want ErrUnreachable naming the deadline", err)
		}
		if waited := time.Since(start); waited != DefaultTimeout {
			t.Errorf("gave up after %v, want %v", waited, DefaultTimeout)
		}
	})
}
