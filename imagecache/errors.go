package imagecache

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidCache is returned by Apply for a cache without namespace or
	// name, or with an empty image string.
	ErrInvalidCache = errors.New("invalid image cache")
	// ErrInvalidPullSecret is matched, together with ErrInvalidCache, by
	// the error Apply and Sync return for a pull secret that sets both
	// inline credentials and DockerConfigPath, or a DockerConfigPath that is
	// not absolute.
	ErrInvalidPullSecret = errors.New("invalid pull secret")
	// ErrCacheNotFound is returned by Delete and Refresh for a cache that is
	// not applied.
	ErrCacheNotFound = errors.New("image cache not found")
	// ErrShutDown is returned by calls made after Run returned.
	ErrShutDown = errors.New("image cache manager shut down")
	// ErrAlreadyRunning is returned by a second call to Run.
	ErrAlreadyRunning = errors.New("image cache manager already running")
	// ErrState matches failures to read or write the state directory.
	ErrState = errors.New("image cache state")
	// ErrInvalidOption is returned by New and NewStandalone for an option
	// given a value it cannot use (the error names the option and the
	// value) and for a nil image service or pull manager.
	ErrInvalidOption = errors.New("invalid image cache manager option")
	// ErrInvalidCacheFile is matched by the *CacheFileError ParseCacheFile
	// and ReadCacheFile return for a cache file that cannot be used.
	ErrInvalidCacheFile = errors.New("invalid cache file")
	// ErrPrivateImage is matched by the *PrivateImageError a standalone
	// manager returns for a cache with a pull secret.
	ErrPrivateImage = errors.New("a standalone image cache pulls anonymously only")
)

// PrivateImageError is returned by Apply of a standalone manager (see
// NewStandalone) for a cache with a pull secret, and is the message of the
// failed result (ReasonPrivateImage) of every pull of such a cache loaded
// from the state directory. It matches ErrPrivateImage.
//
// A standalone manager runs beside a kubelet it does not control. A stock
// kubelet never sees pull records another process writes while it runs, so
// an image pulled there with a tenant's secret would look preloaded to it,
// and under the default policy (NeverVerifyPreloadedImages) every pod could
// use it. The two safe ways to pre-pull a private image are in the message.
type PrivateImageError struct {
	// Cache is the cache refused.
	Cache CacheRef
	// Secret is the pull secret's namespace/name (never its credentials).
	Secret string
}

func (e *PrivateImageError) Error() string {
	return fmt.Sprintf("image cache %s has pull secret %s, and %v: a private image pulled beside a stock kubelet looks preloaded to it and "+
		"every pod could use it; run the image cache in-process in a kubelet built on this library (New, with a pull manager over "+
		"the store this process holds the lock of), or let the kubelet pull it (a pod bound to the node carrying the imagePullSecrets)",
		e.Cache, e.Secret, ErrPrivateImage)
}

// Is makes errors.Is(err, ErrPrivateImage) true for a *PrivateImageError.
func (e *PrivateImageError) Is(target error) bool { return target == ErrPrivateImage }

func privateImageError(c ImageCache) *PrivateImageError {
	return &PrivateImageError{Cache: c.Ref(), Secret: c.PullSecret.Namespace + "/" + c.PullSecret.Name}
}

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
