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
