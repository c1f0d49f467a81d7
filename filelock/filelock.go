package filelock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Perm is the mode of a lock file TryLock or WaitLock creates.
const Perm fs.FileMode = 0o600

// openAttempts bounds the tries when the entry at the name keeps changing
// between the checks and the open.
const openAttempts = 8

// Lock is a held lock. Close releases it.
type Lock struct {
	f         *os.File
	path      string
	recordErr error
}

// TryLock takes the lock on name inside root without waiting: a lock held
// elsewhere is a *HeldError naming the holder. name may have several
// components; root may be closed once TryLock returns.
func TryLock(root *os.Root, name string) (*Lock, error) {
	return lock(root, name, syscall.LOCK_EX|syscall.LOCK_NB)
}

// WaitLock takes the lock on name inside root, waiting for the holder, if
// any, to release it (or to die). It never returns a *HeldError.
func WaitLock(root *os.Root, name string) (*Lock, error) {
	return lock(root, name, syscall.LOCK_EX)
}

func lock(root *os.Root, name string, how int) (*Lock, error) {
	path := filepath.Join(root.Name(), name)
	f, err := openLockFile(root, name, path, true)
	if err != nil {
		return nil, err
	}
	if err := flock(f, how); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			he := &HeldError{Path: path}
			he.Holder, _ = readHolder(f)
			return nil, he
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return &Lock{f: f, path: path, recordErr: writeHolder(f, self)}, nil
}

// Path returns the lock file's path: the root's name joined with the name.
func (l *Lock) Path() string { return l.path }

// RecordErr returns why this process's record could not be written into
// the lock file (a full disk, say), or nil. The lock is held either way.
func (l *Lock) RecordErr() error { return l.recordErr }

// Close releases the lock. Later calls do nothing and return nil.
func (l *Lock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	// Closing the only descriptor of the open file drops the flock.
	err := l.f.Close()
	l.f = nil
	return err
}

// Probe reports whether the lock on name inside root is held, in this
// process or another, and the holder's record (zero when unknown). It
// creates and writes nothing: a missing lock file is a lock nobody holds.
func Probe(root *os.Root, name string) (h Holder, held bool, err error) {
	path := filepath.Join(root.Name(), name)
	f, err := openLockFile(root, name, path, false)
	if errors.Is(err, fs.ErrNotExist) {
		return Holder{}, false, nil
	}
	if err != nil {
		return Holder{}, false, err
	}
	defer f.Close()
	err = flock(f, syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		h, _ = readHolder(f)
		return h, true, nil
	}
	if err != nil {
		return Holder{}, false, fmt.Errorf("probing the lock %s: %w", path, err)
	}
	// Closing f drops the shared lock.
	return Holder{}, false, nil
}

// openLockFile opens the lock file without following a symbolic link (step
// 1 of the protocol): for writing, creating it if needed (create), or read
// only, failing with an error matching fs.ErrNotExist if it is missing.
func openLockFile(root *os.Root, name, path string, create bool) (*os.File, error) {
	flag := os.O_RDONLY
	if create {
		flag = os.O_RDWR
	}
	for range openAttempts {
		if create {
			f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, Perm)
			if err == nil {
				// The create mode went through the umask.
				if err := f.Chmod(Perm); err != nil {
					f.Close()
					return nil, err
				}
				return f, nil
			}
			if !errors.Is(err, fs.ErrExist) {
				return nil, err
			}
		}
		info, err := root.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) && create {
			continue // removed since the create failed
		}
		if err != nil {
			return nil, err
		}
		if err := checkEntry(info, path); err != nil {
			return nil, err
		}
		f, err := root.OpenFile(name, flag|syscall.O_NONBLOCK, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		if !os.SameFile(info, fi) {
			// Replaced between the two steps.
			f.Close()
			continue
		}
		if err := checkEntry(fi, path); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	return nil, fmt.Errorf("%w: %s keeps changing", ErrUnsafe, path)
}

// checkEntry accepts a regular file with a single link.
func checkEntry(info fs.FileInfo, path string) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is %v", ErrUnsafe, path, info.Mode().Type())
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
		return fmt.Errorf("%w: %s has %d links", ErrUnsafe, path, st.Nlink)
	}
	return nil
}

// flock applies how to f, retrying while a signal interrupts the call.
func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Flock(int(fd), how)
			if ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}
