package fsstore

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// exchange swaps the entries a and b of dir atomically (renameat2 with
// RENAME_EXCHANGE); neither is followed if it is a symbolic link. It returns
// errExchangeUnsupported where the kernel or the file system lacks it.
func exchange(dir *os.File, a, b string) error {
	fd := int(dir.Fd())
	err := unix.Renameat2(fd, a, fd, b, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		return errExchangeUnsupported
	}
	if err != nil {
		return &os.LinkError{Op: "renameat2 exchange", Old: a, New: b, Err: err}
	}
	return nil
}

// link gives the entry oldname of dir the second name newname, without
// following a symbolic link.
func link(dir *os.File, oldname, newname string) error {
	fd := int(dir.Fd())
	if err := unix.Linkat(fd, oldname, fd, newname, 0); err != nil {
		return &os.LinkError{Op: "linkat", Old: oldname, New: newname, Err: err}
	}
	return nil
}
