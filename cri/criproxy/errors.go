package criproxy

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrMalformedPullImage is the cause of the InvalidArgument answer to a
// PullImage whose request does not decode as a runtime.v1
// PullImageRequest; the runtime is not called.
var ErrMalformedPullImage = errors.New("criproxy: PullImage request is not a runtime.v1 PullImageRequest")

// malformedPullImage is the answer to an undecodable PullImage. The
// decoder's error names the wire-format problem, never the request's bytes.
func malformedPullImage(cause error) error {
	return status.Errorf(codes.InvalidArgument, "%v: %v", ErrMalformedPullImage, cause)
}

// refusal is the answer to a PullImage the gate refused: an error carrying
// a gRPC status as is (its code, message and details reach the caller),
// anything else as codes.Unknown with its message, which is how the
// kubelet's runtimes report a registry's refusal.
func refusal(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unknown, err.Error())
}
