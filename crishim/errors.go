package crishim

import (
	"errors"
	"fmt"
)

var (
	// ErrRefused matches every error Admit returns for a pull it refuses:
	// the image does not parse, or its origin registry did not accept the
	// credential. The error also wraps the verifier's error, if any.
	ErrRefused = errors.New("pull refused")
	// ErrInvalidImage is the cause of a refusal for an image string that
	// github.com/distribution/reference cannot parse.
	ErrInvalidImage = errors.New("not a valid image reference")
	// ErrMissingDependency is returned by NewGate when Config lacks
	// Records, Stamps or Verifier.
	ErrMissingDependency = errors.New("missing dependency")
	// ErrInvalidConfig is returned by NewGate for a Config value it cannot
	// use (a TTL of zero or less, an empty mirror-only host).
	ErrInvalidConfig = errors.New("invalid gate configuration")
	// ErrInvalidNodeCredentials is returned for a node credentials file
	// that is not a Docker config JSON this package can use. The error
	// names the file and the registry key, never a secret.
	ErrInvalidNodeCredentials = errors.New("invalid node credentials")
)

// RefusalError is the error Admit returns for a refused pull. Its message
// names the image, the registry, the pod and the reason, never a secret.
// errors.Is matches ErrRefused and, through Err, the verifier's sentinels.
type RefusalError struct {
	Image    string
	Registry string // empty when the image does not parse
	Pod      Pod
	// Err is the reason: ErrInvalidImage or the verifier's error.
	Err error
}

func (e *RefusalError) Error() string {
	if e.Registry == "" {
		return fmt.Sprintf("refusing to pull %q for pod %s: %v", e.Image, e.Pod, e.Err)
	}
	return fmt.Sprintf("refusing to pull %q for pod %s: the check at the origin registry %s failed: %v", e.Image, e.Pod, e.Registry, e.Err)
}

// Unwrap returns ErrRefused and the reason.
func (e *RefusalError) Unwrap() []error { return []error{ErrRefused, e.Err} }
