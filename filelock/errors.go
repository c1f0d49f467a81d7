package filelock

import (
	"errors"
	"fmt"
)

var (
	// ErrHeld is matched by the *HeldError TryLock returns when another
	// open file holds the lock.
	ErrHeld = errors.New("lock is held by another process")
	// ErrUnsafe is returned (wrapped, with the path and why) when the entry
	// at the lock's name is not a regular file with a single link: a
	// symbolic link, a second hard link, a directory, a FIFO, or an entry
	// that kept being replaced while it was opened.
	ErrUnsafe = errors.New("lock file is not a regular file with a single link")
)

// HeldError is returned by TryLock when the lock is held. It matches
// ErrHeld.
type HeldError struct {
	// Path is the lock file: the root's name joined with the lock's name.
	Path string
	// Holder is the holder's record; zero when unknown (see the package
	// documentation).
	Holder Holder
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s: lock is held by %s", e.Path, e.Holder)
}

// Is makes errors.Is(err, ErrHeld) true for a *HeldError.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }
