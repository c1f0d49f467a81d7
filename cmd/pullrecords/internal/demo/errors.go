package demo

import "errors"

var (
	// ErrDisagree is returned when the explanation and the manager's answer
	// differ. It means a bug in one of them.
	ErrDisagree = errors.New("explanation disagrees with the pull manager")
	// ErrPullDenied is returned by the fake registry when no credential the
	// pod presents may pull the image.
	ErrPullDenied = errors.New("pull access denied")
	// ErrUnknownImage is returned by the fake registry for an image it does
	// not serve.
	ErrUnknownImage = errors.New("image not found in the registry")
)
