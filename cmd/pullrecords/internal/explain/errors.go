package explain

import "errors"

// ErrBadCredential is returned by the flag parsers for a malformed secret or
// service account.
var ErrBadCredential = errors.New("malformed credential")
