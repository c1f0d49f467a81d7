package fsstore

import (
	"io/fs"
	"os"
	"syscall"

	"github.com/pullrecords/pullrecords/atomicfile"
)

// dirFS is every file-system operation the store performs on the data in one
// of its directories. Names are single path components inside that directory.
// Production uses rootDir; tests wrap it to inject faults.
type dirFS interface {
	// ReadDir lists the directory without following or stating entries
	// beyond what the directory itself reports.
	ReadDir() ([]fs.DirEntry, error)
	// Lstat describes name itself, never the target of a symbolic link.
	Lstat(name string) (fs.FileInfo, error)
	// OpenRead opens name for reading. It must not block on a FIFO.
	OpenRead(name string) (fsFile, error)
	// CreateExcl creates name for writing, failing if it exists.
	CreateExcl(name string) (fsFile, error)
	// Rename replaces newname with oldname atomically. A symbolic link at
	// newname is replaced, not written through.
	Rename(oldname, newname string) error
	// Remove removes name; for a symbolic link, the link itself.
	Remove(name string) error
	// SyncDir flushes the directory's entries to stable storage.
	SyncDir() error
	// Close releases the directory.
	Close() error
}

// fsFile is the part of *os.File the store uses.
type fsFile interface {
	Read(p []byte) (int, error)
	Write(p []byte) (int, error)
	Stat() (fs.FileInfo, error)
	Chmod(mode fs.FileMode) error
	Sync() error
	Close() error
}

// rootDir is the real dirFS: every operation goes through an os.Root opened
// on the directory (atomicfile.Root), so no name can reach outside it, and
// the directory is held open for fsync.
type rootDir struct {
	*atomicfile.Root
}

func openRootDir(parent *os.Root, name string) (*rootDir, error) {
	r, err := atomicfile.OpenIn(parent, name)
	if err != nil {
		return nil, err
	}
	return &rootDir{Root: r}, nil
}

func (d *rootDir) ReadDir() ([]fs.DirEntry, error) {
	f, err := d.OSRoot().Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

func (d *rootDir) Lstat(name string) (fs.FileInfo, error) { return d.OSRoot().Lstat(name) }

func (d *rootDir) OpenRead(name string) (fsFile, error) {
	// O_NONBLOCK so that a FIFO planted in the directory cannot hang the
	// open; it has no effect on regular files.
	return d.OSRoot().OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

func (d *rootDir) CreateExcl(name string) (fsFile, error) {
	return d.OSRoot().OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
}

// atomicDir presents a dirFS as the atomicfile.Dir that atomicfile.Replace
// writes through, so faults injected into the dirFS reach the writes.
type atomicDir struct{ dirFS }

func (a atomicDir) CreateExcl(name string, _ fs.FileMode) (atomicfile.File, error) {
	f, err := a.dirFS.CreateExcl(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}
