package fsstore

import "errors"

var (
	// ErrReadOnly is returned by writes and deletes of a store opened with
	// WithReadOnly.
	ErrReadOnly = errors.New("store is read-only")
	// ErrClosed is returned by every method of a closed store.
	ErrClosed = errors.New("store is closed")
	// ErrNotRegular is the cause of a CorruptRecordError for a directory
	// entry that is not a regular file (a symbolic link, a directory, a FIFO,
	// a device). The store never reads through such an entry.
	ErrNotRegular = errors.New("not a regular file")
	// ErrKeyMismatch is the cause of a CorruptRecordError in a list for a
	// file whose content names another key than its file name says. Point
	// reads treat such a file as "not found", as the kubelet does.
	ErrKeyMismatch = errors.New("file content names another key")
	// ErrWrongKind is the cause of a CorruptRecordError for a pulled record
	// stored in the intents directory or an intent in the records directory.
	ErrWrongKind = errors.New("record of the wrong kind for its directory")
	// ErrUnsafeDir is returned by New, Inspect and Repair when one of the
	// store's directories is a symbolic link or not a directory.
	ErrUnsafeDir = errors.New("store directory is a symbolic link or not a directory")
	// ErrLocked is matched by the *LockedError that New and Repair return
	// when another writer holds the store's lock.
	ErrLocked = errors.New("pull records are locked by another writer")
	// ErrUnsafeLockFile is returned by New and Repair when the lock file is
	// not a regular file with a single link (a symbolic link, say).
	ErrUnsafeLockFile = errors.New("lock file is not a regular file with a single link")
	// ErrInvalidOption is returned by New for options it cannot use together
	// (WithoutScan without WithReadOnly); the error names the options.
	ErrInvalidOption = errors.New("invalid store option")
)
