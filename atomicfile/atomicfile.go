package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// defaultPerm is the mode of a written file when Options.Perm is zero.
const defaultPerm fs.FileMode = 0o600

// tempSuffix ends every temporary name TempName returns.
const tempSuffix = ".tmp"

var (
	// ErrNotDurable is returned (wrapped, with the cause) when the new
	// content was renamed into place but the directory could not be
	// synced: the change is visible, but may not survive a power loss.
	ErrNotDurable = errors.New("file replaced, but the directory sync failed")
	// ErrInvalidName is returned for a name that is not a single path
	// component ("", ".", "..", or containing a slash or a NUL byte).
	ErrInvalidName = errors.New("file name must be a single path component")
)

// File is what Replace needs of a newly created temporary file. *os.File
// implements it.
type File interface {
	Write(p []byte) (int, error)
	Chmod(mode fs.FileMode) error
	Sync() error
	Close() error
}

// Dir is one directory that Replace writes in. Every name is a single path
// component inside it. Root implements Dir over an *os.Root; tests wrap it
// to inject faults.
type Dir interface {
	// CreateExcl creates name for writing with mode perm (before the
	// umask), failing with an error matching fs.ErrExist if any entry,
	// including a dangling symbolic link, already has that name. It never
	// follows a symbolic link.
	CreateExcl(name string, perm fs.FileMode) (File, error)
	// Rename atomically replaces newname with oldname. A symbolic link at
	// newname is replaced itself, never written through.
	Rename(oldname, newname string) error
	// Remove removes name (a symbolic link itself, not its target).
	Remove(name string) error
	// SyncDir flushes the directory's entries to stable storage.
	SyncDir() error
}

// Options tunes Replace.
type Options struct {
	// Perm is the mode of the new file, set with fchmod so the umask does
	// not change it. Zero means defaultPerm.
	Perm fs.FileMode
	// NoSync skips both fsyncs: the replacement stays atomic with respect
	// to a process crash, but not durable across a power loss. For tests
	// and benchmarks.
	NoSync bool
}

// tempAttempts bounds the fresh names tried when a temporary name is taken.
const tempAttempts = 8

// randRead fills b with random bytes; tests replace it.
var randRead = func(b []byte) { _, _ = rand.Read(b) }

// TempName returns a fresh temporary name for a write of name:
// "." + name + "." + 16 random hex digits + ".tmp". The leading dot and the
// ".tmp" suffix keep it out of globs and of readers that skip either (the
// kubelet ignores names that do not start with "sha256-" or that end in
// ".tmp").
func TempName(name string) string {
	var r [8]byte
	randRead(r[:])
	return "." + name + "." + hex.EncodeToString(r[:]) + tempSuffix
}

// isTempOf reports whether entry is a name TempName(name) could return.
func isTempOf(entry, name string) bool {
	rest, ok := strings.CutPrefix(entry, "."+name+".")
	if !ok {
		return false
	}
	rest, ok = strings.CutSuffix(rest, tempSuffix)
	if !ok || len(rest) != 16 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

// validName reports whether name is a single path component Replace accepts.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// Replace replaces name in d with data, atomically and durably: it creates
// a temporary file under a fresh name in the same directory (TempName; a
// taken name, whatever is there, is never opened, and another name is
// tried), sets its mode, writes data, fsyncs and closes it, renames it onto
// name and fsyncs the directory.
//
// On any failure before the rename the temporary file is removed and name
// is unchanged. If the rename succeeded but the directory fsync failed, the
// error matches ErrNotDurable: name holds the new content, which may not
// survive a power loss. A symbolic link at name is replaced, not followed;
// a directory at name makes the rename fail.
func Replace(d Dir, name string, data []byte, o Options) error {
	if !validName(name) {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	perm := o.Perm
	if perm == 0 {
		perm = defaultPerm
	}
	tmp, err := writeTemp(d, name, data, perm, !o.NoSync)
	if err != nil {
		return err
	}
	if err := d.Rename(tmp, name); err != nil {
		_ = d.Remove(tmp)
		return err
	}
	if !o.NoSync {
		if err := d.SyncDir(); err != nil {
			return fmt.Errorf("%w: %w", ErrNotDurable, err)
		}
	}
	return nil
}

// writeTemp writes data to a new temporary file for name and returns its
// name. On failure nothing is left behind (best effort).
func writeTemp(d Dir, name string, data []byte, perm fs.FileMode, sync bool) (string, error) {
	var (
		tmp string
		f   File
		err error
	)
	for range tempAttempts {
		tmp = TempName(name)
		f, err = d.CreateExcl(tmp, perm)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return "", err
	}
	fail := func(err error) (string, error) {
		_ = f.Close()
		_ = d.Remove(tmp)
		return "", err
	}
	// The create mode went through the umask; set the exact one.
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	n, err := f.Write(data)
	if err == nil && n < len(data) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fail(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fail(err)
		}
	}
	if err := f.Close(); err != nil {
		_ = d.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// Root is a Dir over an *os.Root opened on the directory: no name, and no
// symbolic link met while resolving one, reaches outside the directory, and
// the directory stays open for fsync. It is safe for concurrent use.
type Root struct {
	root *os.Root
	dir  *os.File
}

var _ Dir = (*Root)(nil)

// Open opens the directory at path (which may itself be, or lie under, a
// symbolic link: that is the caller's configuration).
func Open(path string) (*Root, error) {
	r, err := os.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	return newRoot(r)
}

// OpenIn opens the directory name inside parent; name is resolved within
// parent, so no symbolic link leads it outside.
func OpenIn(parent *os.Root, name string) (*Root, error) {
	r, err := parent.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	return newRoot(r)
}

func newRoot(r *os.Root) (*Root, error) {
	d, err := r.Open(".")
	if err != nil {
		r.Close()
		return nil, err
	}
	return &Root{root: r, dir: d}, nil
}

// OSRoot returns the underlying *os.Root, for reads. It is closed by Close.
func (r *Root) OSRoot() *os.Root { return r.root }

// Name returns the directory's path as given to Open (joined with the
// parent's for OpenIn).
func (r *Root) Name() string { return r.root.Name() }

// CreateExcl implements Dir: O_CREATE|O_EXCL never follows a symbolic link,
// even a dangling one.
func (r *Root) CreateExcl(name string, perm fs.FileMode) (File, error) {
	f, err := r.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Rename implements Dir.
func (r *Root) Rename(oldname, newname string) error { return r.root.Rename(oldname, newname) }

// Remove implements Dir.
func (r *Root) Remove(name string) error { return r.root.Remove(name) }

// SyncDir implements Dir.
func (r *Root) SyncDir() error { return r.dir.Sync() }

// WriteFile replaces name in the directory with data and mode perm (0 means
// defaultPerm), durably; see Replace.
func (r *Root) WriteFile(name string, data []byte, perm fs.FileMode) error {
	return Replace(r, name, data, Options{Perm: perm})
}

// RemoveTemps removes the temporary files a crash during a write of name
// left behind (names isTempOf(…, name) accepts) and syncs the directory if
// it removed any. It returns how many it removed and the first error.
func (r *Root) RemoveTemps(name string) (int, error) {
	f, err := r.root.Open(".")
	if err != nil {
		return 0, err
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return 0, err
	}
	var errs []error
	removed := 0
	for _, e := range entries {
		if e.IsDir() || !isTempOf(e.Name(), name) {
			continue
		}
		if err := r.root.Remove(e.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	if removed > 0 {
		if err := r.dir.Sync(); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// Close releases the directory.
func (r *Root) Close() error {
	return errors.Join(r.dir.Close(), r.root.Close())
}

// WriteFile replaces the file name in the directory dir with data and mode
// perm (0 means defaultPerm), durably; see Replace. name must be a single
// path component: a symbolic link planted at name or at any temporary name
// is never followed.
func WriteFile(dir, name string, data []byte, perm fs.FileMode) error {
	r, err := Open(dir)
	if err != nil {
		return err
	}
	werr := r.WriteFile(name, data, perm)
	return errors.Join(werr, r.Close())
}
