package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// ErrTooLarge is returned by ReadFile for a file longer than its limit.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads the regular file name in the directory dir whole, the
// counterpart of WriteFile: a symbolic link at name is not followed (nor
// can any name lead out of dir), a FIFO or device planted there does not
// block the open and is refused after it (the type is checked on the opened
// file, so nothing can be swapped in between), and a file longer than limit
// bytes is refused with ErrTooLarge before more than limit+1 bytes are read.
func ReadFile(dir, name string, limit int64) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	path := filepath.Join(dir, name)
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes (%d bytes)", ErrTooLarge, path, limit, fi.Size())
	}
	// The file may grow after the Stat: read one byte past the limit to
	// tell.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrTooLarge, path, limit)
	}
	return data, nil
}
