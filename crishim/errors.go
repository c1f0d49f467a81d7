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
	// After is true for a refusal after the runtime pulled (Gate.Pull):
	// what it pulled is not what was proved.
	After bool
	// Err is the reason: ErrInvalidImage, the verifier's error, or
	// ErrUnverifiedContent or ErrPrivateContent (wrapped, with the detail).
	Err error
}

func (e *RefusalError) Error() string {
	if e.After {
		return fmt.Sprintf("refusing the pull of %q for pod %s from %s: %v", e.Image, e.Pod, e.Registry, e.Err)
	}
	if e.Registry == "" {
		return fmt.Sprintf("refusing to pull %q for pod %s: %v", e.Image, e.Pod, e.Err)
	}
	return fmt.Sprintf("refusing to pull %q for pod %s: the check at the origin registry %s failed: %v", e.Image, e.Pod, e.Registry, e.Err)
}

// Unwrap returns ErrRefused and the reason.
func (e *RefusalError) Unwrap() []error { return []error{ErrRefused, e.Err} }

var (
	// ErrUnverifiedContent is the cause of a refusal after the pull: the
	// runtime pulled content under no digest the origin proved for this
	// credential (a tag that moved between the check and the pull, a
	// mirror or registry that served other content to the runtime), or
	// the gate could not learn what it pulled.
	ErrUnverifiedContent = errors.New("the runtime pulled content the origin did not prove for this credential")
	// ErrPrivateContent is the cause of a refusal of a mirror-only pull
	// that resolved to content the node holds from a pull made with a
	// pod's credential.
	ErrPrivateContent = errors.New("a mirror-only name resolved to content the node holds from a credentialed pull")
)
