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
