package nodegate

import "errors"

var (
	// ErrNameMoved: the name to take back points to another image now; it
	// was left alone.
	ErrNameMoved = errors.New("the name points to another image now; left alone")
	// ErrCannotRemoveName: the runtime offers no way to remove one name of
	// an image (it is not containerd).
	ErrCannotRemoveName = errors.New("the runtime is not containerd, and the CRI can only remove every name of an image")

	// errInvalidOptions is wrapped by Open's refusals of its options.
	errInvalidOptions = errors.New("invalid gate options")
)
