package containerdapi

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrNotContainerd matches a call the runtime does not serve: the gRPC
	// code Unimplemented, which is what a runtime without containerd's
	// content and images services (CRI-O, a bare CRI server) answers.
	ErrNotContainerd = errors.New("runtime does not serve containerd's content and images services")
	// ErrNameMoved is returned by RemoveName when the name points to another
	// manifest than the target it was given; the name is left as it is.
	ErrNameMoved = errors.New("image name points to another manifest")
	// ErrNotHeld is returned by ReadAt for a blob the content store does not
	// hold.
	ErrNotHeld = errors.New("blob not held by the content store")
	// ErrShortRead is returned by ReadAt when the blob ends before the
	// requested range does.
	ErrShortRead = errors.New("blob shorter than the requested range")
	// ErrReadTooLarge is returned by ReadAt for a buffer larger than
	// MaxRead; nothing is read.
	ErrReadTooLarge = errors.New("read larger than the bound")
	// ErrInvalidArgument is returned, before any call, for an empty digest,
	// name or target, or a negative offset.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrBadResponse matches an answer that does not decode as containerd's
	// message, or a Read stream whose chunks are not contiguous or carry
	// more bytes than asked for.
	ErrBadResponse = errors.New("malformed answer from containerd")
)

// callError wraps the error of one call to method about subject (a digest
// or an image name). containerd's status messages name the object and the
// cause and carry no secret; they are kept as they are, with
// ErrNotContainerd added for Unimplemented.
func callError(method, subject string, err error) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("containerd %s of %s: %w: %w", method, subject, ErrNotContainerd, err)
	}
	return fmt.Errorf("containerd %s of %s: %w", method, subject, err)
}

// isNotFound reports whether err is the gRPC code NotFound.
func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }
