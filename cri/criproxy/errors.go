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

// ErrUndecodableAnswer is the cause of the Internal answer to a PullImage
// whose runtime answer does not decode as a runtime.v1 PullImageResponse:
// the gate cannot check what was pulled, so the pull is refused.
var ErrUndecodableAnswer = errors.New("criproxy: the runtime's PullImage answer is not a runtime.v1 PullImageResponse")

// errPulledTwice and errNotPulled name a Gate that broke GatePull's
// contract: pull called twice, or nil returned without pulling.
var (
	errPulledTwice = status.Error(codes.Internal, "criproxy: the gate ran the pull twice")
	errNotPulled   = status.Error(codes.Internal, "criproxy: the gate admitted the pull without running it")
)

func undecodablePullImageAnswer(cause error) error {
	return status.Errorf(codes.Internal, "%v: %v", ErrUndecodableAnswer, cause)
}
