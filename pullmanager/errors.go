package pullmanager

import "errors"

var (
	// ErrInvalidImageName is returned for an image string that
	// github.com/distribution/reference cannot parse.
	ErrInvalidImageName = errors.New("invalid image name")
	// ErrUnknownPolicy is returned for a VerificationPolicy that is not one of
	// the four known values.
	ErrUnknownPolicy = errors.New("unknown image pull credential verification policy")
	// ErrInvalidAllowlistPattern is returned for an allowlist pattern that
	// does not follow the kubelet's pattern syntax.
	ErrInvalidAllowlistPattern = errors.New("invalid allowlist pattern")
	// ErrAllowlistNotAllowed is returned when an allowlist is given with a
	// policy other than NeverVerifyAllowlistedImages.
	ErrAllowlistNotAllowed = errors.New("an allowlist is only allowed with the NeverVerifyAllowlistedImages policy")
	// ErrMissingDependency is returned by NewImagePullManager when the records
	// accessor or the policy is nil.
	ErrMissingDependency = errors.New("missing dependency")
	// ErrInvalidOption is returned by NewImagePullManager for an Option
	// given a value it cannot use; the error names the option and the value.
	ErrInvalidOption = errors.New("invalid image pull manager option")
)
