package demo

import "errors"

var (
	// ErrDisagree is returned when the manager's explanation and its check
	// differ. It means a bug in the manager's dry-run path.
	ErrDisagree = errors.New("the pull manager's explanation disagrees with its check")
	// ErrPullDenied is returned by the fake registry when no credential the
	// pod presents may pull the image.
	ErrPullDenied = errors.New("pull access denied")
	// ErrUnknownImage is returned by the fake registry for an image it does
	// not serve.
	ErrUnknownImage = errors.New("image not found in the registry")
)
