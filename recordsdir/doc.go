// Package recordsdir opens a records directory: the one way to turn a
// directory of image pull records into a working pull manager. Open takes
// the directory's writer lock through fsstore (the files in
// <rootDir>/image_manager, in the kubelet's format), puts a memstore cache
// in front of the store and builds a pullmanager.PullManager over the cache,
// whose start-up recovery runs before Open returns. The kubelet adapter and
// runtime shims open their records through it, so every caller gets the
// same stack in the same order and the same error messages.
//
// # Guarantees
//
//   - One writer per directory: while a Records is open, another Open of the
//     same directory, in this process or another, fails with fsstore's
//     *LockedError (errors.Is(err, fsstore.ErrLocked)); Close releases the
//     lock.
//   - Nothing leaks on failure: when any step fails, everything Open opened
//     so far is closed (the lock is released) and the error says which step
//     failed ("failed to open the image pull records", "failed to set up the
//     image pull records cache", "failed to create image pull manager"),
//     wrapping the cause so that errors.Is and errors.As see it.
//   - A nil policy is refused before anything is opened, with an error
//     matching pullmanager.ErrMissingDependency; an empty root directory is
//     refused with ErrNoRootDir (it would mean the process's working
//     directory).
//   - Accessor is the cache the manager reads and writes: records written
//     through either are on disk (fsynced, unless the store options say
//     otherwise) when the write returns, and a later Open of the directory
//     sees them.
//   - Close is idempotent and safe to call more than once; only the first
//     call closes the store.
//
// # Non-guarantees
//
//   - Close does not wait for calls in flight on the manager or the
//     accessor, and neither may be used after Close: writes then fail with
//     fsstore.ErrClosed, while reads may still be served from memory.
//   - Open does not choose the directory: a runtime shim must use its own,
//     never the kubelet's, because a directory has one writer.
//   - The options given with WithStoreOptions and WithManagerOptions are
//     passed through unchanged; their meaning and validation are fsstore's
//     and pullmanager's.
package recordsdir
