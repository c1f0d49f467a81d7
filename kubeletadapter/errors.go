package kubeletadapter

import "errors"

// ErrInvalidNodeConfig is matched (errors.Is) by every error ReadNodeConfig
// returns, and so by NewForKubelet's error for a node configuration file
// that is there but cannot be used: unreadable, malformed YAML, an unknown
// field, a duplicate key, a wrong apiVersion or kind, a value of the wrong
// type or null, an empty file, a file over MaxNodeConfigSize, or something
// other than a regular file at the path. The message names the file and
// the problem. A missing file is not an error.
var ErrInvalidNodeConfig = errors.New("invalid pullrecords node configuration")

// ErrImageCache is matched by NewForKubelet's error when the node
// configuration declares an image cache file (imageCacheFile) and the
// in-process image cache cannot start: the file is missing, unreadable or
// invalid (the error names it and then matches imagecache.ErrInvalidCacheFile
// or fs.ErrNotExist too), or the cache's state directory cannot be used.
var ErrImageCache = errors.New("pullrecords in-process image cache")

// errEmptyImageRef is the cache's error for a pull the runtime reported
// successful without an image reference.
var errEmptyImageRef = errors.New("the runtime returned an empty image reference")
