// Package atomicfile replaces whole files atomically and durably, without
// following symbolic links: the one write primitive of the file store, the
// image cache's state file and the command's status file.
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
// one-off write given a plain directory path.
package atomicfile
