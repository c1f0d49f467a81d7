package cri

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pullrecords/pullrecords/cri/critest"
)

func TestDialInvalidOptions(t *testing.T) {
	endpoint := critest.NewImageService().Serve(t)
	tests := []struct {
		name string
		opt  Option
		want string // in the error message
	}{
		{"negative pull timeout", withPullTimeout(-time.Second), "withPullTimeout(-1s)"},
		{"negative call timeout", WithCallTimeout(-time.Nanosecond), "WithCallTimeout(-1ns)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Dial(context.Background(), endpoint, tc.opt)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("Dial = %v; want ErrInvalidOption", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
		})
	}
}

func TestDialValidOptions(t *testing.T) {
	endpoint := critest.NewImageService().Serve(t)
	tests := []struct {
		name string
		opts []Option
	}{
		{"none", nil},
		{"zero timeouts (none)", []Option{withPullTimeout(0), WithCallTimeout(0)}},
		{"positive timeouts", []Option{withPullTimeout(time.Minute), WithCallTimeout(time.Second)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dial(t, endpoint, tc.opts...)
		})
	}
}
