package fsstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/filelock"
)

// LockFile is the advisory lock file a writable store holds, in
// <kubeletDir>/image_manager, beside the pulling and pulled directories. The
// kubelet reads only those two directories and never sees it.
const LockFile = ".pullrecords.lock"

// LockedError is returned by New (and Repair) when another writer, in this
// process or another one, holds the store's lock. It matches ErrLocked.
type LockedError struct {
	// Path is the lock file.
	Path string
	// PID is the holder's process ID, as the holder wrote it into the lock
	// file; 0 when unknown.
	PID int
	// Started is when the holder's process started, to tell it from a later
	// process that reused the PID; zero when unknown.
	Started time.Time
}

func (e *LockedError) Error() string {
	holder := "another writer"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
		if !e.Started.IsZero() {
			holder += " (started " + e.Started.UTC().Format(time.RFC3339) + ")"
		}
	}
	return fmt.Sprintf("%s: the pull records are locked by %s; only one writer may open them (open read-only to inspect)", e.Path, holder)
}

// Is makes errors.Is(err, ErrLocked) true for a *LockedError.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// unsafeLockFile is filelock's ErrUnsafe error, which also matches
// ErrUnsafeLockFile.
type unsafeLockFile struct{ err error }

func (e unsafeLockFile) Error() string        { return e.err.Error() }
func (e unsafeLockFile) Unwrap() error        { return e.err }
func (e unsafeLockFile) Is(target error) bool { return target == ErrUnsafeLockFile }

// lockStore takes the store's lock (filelock.TryLock: flock without
// waiting, the file never opened through a symbolic link or a second hard
// link, created 0600 if needed, this process recorded in it) on
// image_manager/.pullrecords.lock inside root. A lock held elsewhere is a
// *LockedError. The lock lasts until the returned lock is closed, and dies
// with the process.
func lockStore(logger klog.Logger, root *os.Root, kubeletDir string) (*filelock.Lock, error) {
	l, err := filelock.TryLock(root, DirName+"/"+LockFile)
	var held *filelock.HeldError
	switch {
	case errors.As(err, &held):
		return nil, &LockedError{Path: filepath.Join(kubeletDir, DirName, LockFile), PID: held.Holder.PID, Started: held.Holder.Started}
	case errors.Is(err, filelock.ErrUnsafe):
		return nil, unsafeLockFile{err}
	case err != nil:
		return nil, err
	}
	// The holder's identity is for messages only: failing to record it
	// (a full disk, say) does not stop the store from opening.
	if err := l.RecordErr(); err != nil {
		logger.Error(err, "Could not record the lock holder", "path", l.Path())
	}
	return l, nil
}
