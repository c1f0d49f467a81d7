// Package atomicfile replaces whole files atomically and durably, without
// following symbolic links: the one write primitive of the file store, the
// image cache's state file and the command's declared-caches file. It is a
// public package of the root module so that the repository's other modules
// (imagecache, cmd/pullrecords) share this one implementation.
//
// Replace writes to a fresh temporary name in the same directory (created
// with O_CREATE|O_EXCL, so nothing already there, a planted symbolic link
// included, is ever opened), sets the exact mode, writes, fsyncs and closes
// the file, renames it onto the target (a symbolic link at the target is
// replaced, not written through) and fsyncs the directory. On failure the
// temporary file is removed. The directory is reached through an *os.Root,
// so no name can lead outside it.
//
// Use Open or OpenIn for a directory written many times, and WriteFile for a
// one-off write given a plain directory path. ReadFile is the counterpart:
// it reads a regular file whole, bounded, never through a symbolic link.
//
// Guarantees:
//
//   - A reader of the target sees the old content or the new content,
//     never a mix, and never an empty or partial file, whenever the process
//     dies.
//   - Once Replace returns nil, the new content survives a power loss
//     (unless Options.NoSync). ErrNotDurable says the rename happened but
//     the directory sync failed.
//   - The mode is exactly the one asked for (set by fchmod; the umask does
//     not narrow it).
//   - No symbolic link, whether at the target, at a temporary name or met
//     while resolving a name, is written through or leads out of the
//     directory.
//
// Non-guarantees:
//
//   - Two concurrent writers of one name do not lose the file, but one
//     write wins whole; serialising them (a lock) is the caller's job.
//   - A crash between creating and renaming a temporary file leaves it
//     behind; Root.RemoveTemps removes them, and only the caller knows when
//     no writer is in flight.
//   - The directory's own entry in its parent is not synced: create the
//     directory (and sync its parent) before the first write if that
//     matters.
package atomicfile
