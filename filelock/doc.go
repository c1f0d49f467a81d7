// Package filelock is an exclusive advisory lock on a file, between
// processes and between open files of one process, that names its holder:
// the one lock primitive of the file store (fsstore's one writer) and of the
// command (one "cache run" per state directory, serialised changes to the
// declared caches). It is a public package of the root module so that the
// repository's other modules share this one implementation.
//
// # Protocol
//
// A lock is flock(2) LOCK_EX on an open file, name, inside an *os.Root:
//
//  1. Open. If no entry has the name, the file is created with
//     O_CREATE|O_EXCL and its mode set to Perm by fchmod (the umask does not
//     narrow it). Otherwise the entry is opened only if it is a regular file
//     with a single link, and the opened file must be the entry that was
//     checked (an lstat before the open, an fstat after it): no symbolic
//     link is followed, and no second hard link lets the holder's record
//     reach another file. The open is non-blocking, so a FIFO planted at the
//     name cannot hang it, and close-on-exec (Go opens every file with
//     O_CLOEXEC), so a child process does not inherit the lock. An unsafe
//     entry is an error matching ErrUnsafe.
//  2. Lock. TryLock asks with LOCK_NB and fails at once with a *HeldError
//     (errors.Is(err, ErrHeld)) naming the holder; WaitLock waits as long as
//     it takes. Both retry a call interrupted by a signal (EINTR).
//  3. Record. The new holder replaces the file's content with its Holder
//     (process ID and process start time, one JSON line). The record is for
//     messages only: failing to write it does not undo the lock
//     (Lock.RecordErr reports it).
//  4. Release. Lock.Close, or the end of the process however it ends (kill
//     -9 included): the kernel drops the lock with the last descriptor of
//     the open file. The file and its record stay; the next holder reuses
//     and overwrites them.
//
// Probe tells whether a lock is held, and by whom, without creating or
// writing anything: it opens an existing entry read-only (checked as in
// step 1) and tries a shared lock with LOCK_NB, releasing it at once.
//
// # Guarantees
//
//   - At most one Lock on a file is open at a time, across processes and
//     within one process (flock locks belong to the open file, so a second
//     TryLock in the holder's own process is refused too).
//   - A crashed holder never leaves the lock taken, and nothing is to be
//     cleaned up. TryLock and Probe read the record only while the lock is
//     held, so a dead holder's record is not reported once a new holder has
//     written its own (see the first non-guarantee).
//   - The holder's record, and nothing else, is written, and only into a
//     regular single-link file inside the root.
//
// # Non-guarantees
//
//   - A HeldError's or Probe's Holder can be zero (unknown), or name the
//     previous holder, for the moment between a new holder's flock and its
//     record; a process ID can be reused by a later process, which the start
//     time tells apart.
//   - While Probe holds its shared lock (a few system calls), a TryLock
//     elsewhere is refused as held, with the holder unknown.
//   - flock is advisory: a process that does not use this package is not
//     stopped. Over NFS it depends on the client's emulation.
//   - WaitLock cannot be cancelled: it waits until the holder releases the
//     lock or dies. It waits forever for a Lock its own goroutine holds.
package filelock
