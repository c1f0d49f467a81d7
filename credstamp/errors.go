package credstamp

import "errors"

var (
	// ErrInvalidKey is returned by Stamp for a Key with an empty field or a
	// field that is not valid UTF-8 (it could not be written and read back
	// as the same key).
	ErrInvalidKey = errors.New("invalid verification stamp key")
	// ErrInvalidStampFile is the cause logged for a file that vouches for
	// nothing: not a regular file, unreadable, too large, not the JSON this
	// package writes, of another version, or naming another key than its
	// file name.
	ErrInvalidStampFile = errors.New("invalid verification stamp file")
	// ErrReadOnly is returned by the writes of a store opened with
	// OpenReadOnly.
	ErrReadOnly = errors.New("verification stamps opened read-only")
)
