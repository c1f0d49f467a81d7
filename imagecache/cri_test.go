package imagecache_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/imagecache"
	"github.com/pullrecords/pullrecords/imageruntime"
)

// *cri.ImageService is what the image cache manager and the pull manager
// are given on a node.
var (
	_ imagecache.ImageService  = (*cri.ImageService)(nil)
	_ imageruntime.ImageLister = (*cri.ImageService)(nil)
)

// TestImagecacheReadsCallErrors checks that imagecache, which does not import
// cri, classifies cri's errors as cri does. (It lives here, not in cri, so
// that only imagecache's module requires cri's, not the reverse too.)
func TestImagecacheReadsCallErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"unavailable", &cri.CallError{Op: "PullImage", Code: codes.Unavailable}},
		{"deadline", &cri.CallError{Op: "PullImage", Code: codes.DeadlineExceeded}},
		{"not found", &cri.CallError{Op: "PullImage", Code: codes.NotFound}},
		{"unauthenticated", &cri.CallError{Op: "PullImage", Code: codes.Unauthenticated}},
		{"permission denied", &cri.CallError{Op: "PullImage", Code: codes.PermissionDenied}},
		{"registry 401", &cri.CallError{Op: "PullImage", Code: codes.Unknown, Message: "failed: 401 Unauthorized"}},
		{"registry 503", &cri.CallError{Op: "PullImage", Code: codes.Unknown, Message: "failed: 503 Service Unavailable"}},
		{"registry 503 then 401", &cri.CallError{Op: "PullImage", Code: codes.Unavailable, Message: "401 Unauthorized"}},
		{"other unknown", &cri.CallError{Op: "PullImage", Code: codes.Unknown, Message: "manifest invalid"}},
		{"cancelled", &cri.CallError{Op: "PullImage", Code: codes.Canceled}},
		{"wrapped", fmt.Errorf("outer: %w", &cri.CallError{Op: "PullImage", Code: codes.Unavailable})},
		{"closed", cri.ErrClosed},
		{"context deadline", context.DeadlineExceeded},
		{"context canceled", context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			type class struct{ unauthorized, timeout, transient bool }
			want := class{errors.Is(tc.err, cri.ErrUnauthorized), errors.Is(tc.err, cri.ErrTimeout) || errors.Is(tc.err, context.DeadlineExceeded), cri.IsTransient(tc.err)}
			got := class{imagecache.IsUnauthorized(tc.err), imagecache.IsTimeout(tc.err), imagecache.IsTransient(tc.err)}
			if got != want {
				t.Errorf("imagecache sees %v as %+v; cri says %+v", tc.err, got, want)
			}
		})
	}
}
