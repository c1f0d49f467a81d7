package cri_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pullrecords/pullrecords/cri"
)

// The three methods imagecache classifies by, read without importing it.
type classified interface {
	Unauthorized() bool
	Timeout() bool
	Transient() bool
}

func TestAsCallError(t *testing.T) {
	for _, tc := range []struct {
		name                             string
		err                              error
		unauthorized, timeout, transient bool
		is                               error
	}{
		{"unauthenticated", status.Error(codes.Unauthenticated, "no"), true, false, false, cri.ErrUnauthorized},
		{"registry 401 in text, wrapped", fmt.Errorf("pulling: %w", status.Error(codes.Unknown, "failed to resolve: 401 Unauthorized")), true, false, false, cri.ErrUnauthorized},
		{"deadline", status.Error(codes.DeadlineExceeded, "slow"), false, true, true, cri.ErrTimeout},
		{"local deadline", context.DeadlineExceeded, false, true, true, cri.ErrTimeout},
		{"unavailable", status.Error(codes.Unavailable, "restarting"), false, false, true, nil},
		{"not found", status.Error(codes.NotFound, "no such image"), false, false, false, cri.ErrNotFound},
		{"plain", errors.New("something else"), false, false, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := cri.AsCallError("PullImage", "reg.example/app:1", tc.err)
			var c classified
			if !errors.As(err, &c) {
				t.Fatalf("%v has no classification methods", err)
			}
			if c.Unauthorized() != tc.unauthorized || c.Timeout() != tc.timeout || c.Transient() != tc.transient {
				t.Errorf("%v: unauthorized %v timeout %v transient %v; want %v %v %v", err,
					c.Unauthorized(), c.Timeout(), c.Transient(), tc.unauthorized, tc.timeout, tc.transient)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("%v does not match %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), `"reg.example/app:1"`) {
				t.Errorf("%v does not name the image", err)
			}
		})
	}
}

func TestAsCallErrorRedactsAndKeeps(t *testing.T) {
	err := cri.AsCallError("PullImage", "reg.example/app:1", status.Error(codes.Unknown, "auth robot:hunter22 refused"), "hunter22")
	if strings.Contains(err.Error(), "hunter22") {
		t.Errorf("the password is in %v", err)
	}
	if cri.AsCallError("PullImage", "x", nil) != nil {
		t.Error("nil did not stay nil")
	}
	inner := cri.AsCallError("ImageStatus", "x", status.Error(codes.NotFound, "gone"))
	wrapped := fmt.Errorf("outer: %w", inner)
	if got := cri.AsCallError("PullImage", "y", wrapped); got != wrapped {
		t.Errorf("a *CallError in the chain was converted again: %v", got)
	}
}
