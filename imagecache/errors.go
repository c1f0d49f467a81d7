package imagecache

import "errors"

var (
	// ErrInvalidCache is returned by Apply for a cache without namespace or
	// name, or with an empty image string.
	ErrInvalidCache = errors.New("invalid image cache")
	// ErrCacheNotFound is returned by Delete and Refresh for a cache that is
	// not applied.
	ErrCacheNotFound = errors.New("image cache not found")
	// ErrShutDown is returned by calls made after Run returned.
	ErrShutDown = errors.New("image cache manager shut down")
	// ErrAlreadyRunning is returned by a second call to Run.
	ErrAlreadyRunning = errors.New("image cache manager already running")
	// ErrState matches failures to read or write the state directory.
	ErrState = errors.New("image cache state")
	// ErrInvalidOption is returned by New for an unusable option value.
	ErrInvalidOption = errors.New("invalid image cache manager option")
)

// The manager does not know an ImageService's error values. It classifies an
// error by three optional methods of the errors in its chain, each found with
// errors.As, so the first error in the chain that has the method decides:
//
//	Unauthorized() bool // the registry refused the credentials
//	Timeout() bool      // the call ran out of time
//	Transient() bool    // trying the same call again may succeed
//
// Timeout is the method net.Error and context.DeadlineExceeded already have.
// *cri.CallError has all three.
type (
	unauthorizedError interface{ Unauthorized() bool }
	timeoutError      interface{ Timeout() bool }
	transientError    interface{ Transient() bool }
)

// IsUnauthorized reports whether err says the registry refused the
// credentials: the first error in its chain with an Unauthorized() bool
// method returns true. The manager never retries such an error and reports
// it with ReasonUnauthorized.
func IsUnauthorized(err error) bool {
	var e unauthorizedError
	return errors.As(err, &e) && e.Unauthorized()
}

// IsTimeout reports whether err says the call ran out of time: the first
// error in its chain with a Timeout() bool method returns true (as
// context.DeadlineExceeded's does). The manager reports such an error with
// ReasonTimeout.
func IsTimeout(err error) bool {
	var e timeoutError
	return errors.As(err, &e) && e.Timeout()
}

// IsTransient reports whether the manager retries after err: never when
// IsUnauthorized; otherwise what the first Transient() bool method in the
// chain says; and for a chain without one, whether IsTimeout. Anything else
// is permanent.
func IsTransient(err error) bool {
	if err == nil || IsUnauthorized(err) {
		return false
	}
	var e transientError
	if errors.As(err, &e) {
		return e.Transient()
	}
	return IsTimeout(err)
}
