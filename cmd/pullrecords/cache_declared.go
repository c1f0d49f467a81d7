package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/pullrecords/pullrecords/atomicfile"
	"github.com/pullrecords/pullrecords/filelock"
	"github.com/pullrecords/pullrecords/imagecache"
)

// The declared caches.
//
// "cache apply" and "cache delete" only declare: they rewrite the
// declared-caches file (<base>/caches.json), under a lock so two of them do
// not lose each other's change. "cache run" alone owns the image cache
// manager and its state file (<base>/imagecache/imagecache-state.json): it
// applies the declared set at start and whenever the file changes
// (imagecache.Manager.Sync). Two processes writing the manager's state file
// would lose updates: the manager rewrites it from memory after every batch,
// so a change another process wrote in between would silently vanish.
//
// A missing declared file means "what the manager's state holds" (as left by
// versions that applied to the state directly), so upgrading changes
// nothing.

const (
	declaredFile    = "caches.json"
	declaredVersion = 1
	declaredLock    = "caches.lock"
	runLock         = "cache-run.lock"
)

// declared is the declared-caches file's content. It never holds a pull
// secret: "cache apply" refuses caches with one.
type declared struct {
	Version int         `json:"version"`
	Caches  []cacheSpec `json:"caches"`
}

// cachePaths are the files of one state directory.
type cachePaths struct {
	base  string // <kubelet dir>/pullrecords, or --state-dir
	state string // the manager's state directory (also the last status of each cache)
}

func (p cachePaths) declared() string { return filepath.Join(p.base, declaredFile) }

// loadDeclared returns the declared caches, sorted by namespace/name, and
// whether the declared file exists; without it, the caches of the manager's
// state.
func (p cachePaths) loadDeclared() ([]cacheSpec, bool, error) {
	data, err := atomicfile.ReadFile(p.base, declaredFile, maxCacheFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		applied, err := imagecache.LoadState(p.state)
		if err != nil {
			return nil, false, describeFSError(err)
		}
		specs := make([]cacheSpec, 0, len(applied))
		for _, c := range applied {
			specs = append(specs, specOf(c))
		}
		return specs, false, nil
	}
	if err != nil {
		return nil, false, describeFSError(err)
	}
	var d declared
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, true, fmt.Errorf("%s is corrupt (%v); fix it or remove it and apply the caches again", p.declared(), err)
	}
	if d.Version != declaredVersion {
		return nil, true, fmt.Errorf("%s has version %d; this pullrecords reads version %d", p.declared(), d.Version, declaredVersion)
	}
	// Validate as a cache file: a hand edit must not slip past the checks
	// "cache apply" makes. The caches used are the parsed ones.
	if len(d.Caches) > 0 {
		raw, _ := json.Marshal(d.Caches)
		specs, err := parseCacheSpecs(p.declared(), raw)
		if err != nil {
			return nil, true, err
		}
		d.Caches = specs
	}
	sortSpecs(d.Caches)
	return d.Caches, true, nil
}

func sortSpecs(specs []cacheSpec) {
	for i := 1; i < len(specs); i++ {
		for j := i; j > 0 && specs[j].ref() < specs[j-1].ref(); j-- {
			specs[j], specs[j-1] = specs[j-1], specs[j]
		}
	}
}

// maxDeclaredSize is the limit for declared caches: the declared file as
// saveDeclared writes it, in bytes. Every writer of the file checks it
// before writing anything, so nothing is acknowledged that a later command
// cannot read back, whatever the input looked like (the 4 MiB input limit,
// maxCacheFileSize, bounds what is read; indented, a compact input grows).
//
// It is also what keeps the files "cache run" derives from the declared
// set readable (the manager's state file and its last-status file are read
// with a 64 MiB limit). The bound, for a set of D bytes here:
//
//   - Here an image of n bytes in a cache costs n+11 or n+12 bytes (indent,
//     quotes, comma, newline), so at least 12; a cache's own fields at least
//     80 bytes plus its namespace and name.
//   - In the state file (compact JSON) the image costs n+3 bytes in its
//     cache, and while its removal is pending n+58 more plus its cache's
//     namespace (at most 63 bytes) and name (at most 253): at most n+374,
//     under 32 times n+11. A cache's own fields take at most 209 bytes plus
//     its namespace and name, under 3 times their cost here. So the state
//     holding the set takes at most 3D, and the removals of a whole set of
//     D bytes pending at once at most 32D: with D at most 1 MiB, a state
//     holding this set and the removals of the whole previous one stays
//     under 35 MiB.
//   - A completed batch's last status holds one result per image: about 332
//     bytes of fields plus the reference (under 28 times n+11), its message
//     and what the runtime reports (image ID, and the text of an error):
//     under 28 MiB besides those for a whole set.
//
// Removals still pending from more than one earlier set (the runtime slower
// than the changes) and a runtime's error texts are not bounded here.
const maxDeclaredSize = 1 << 20

// errDeclaredTooLarge is wrapped by a *declaredSizeError.
var errDeclaredTooLarge = errors.New("over the limit for declared caches")

// declaredSizeError is a change refused because the declared file would
// exceed maxDeclaredSize: its size and the largest cache, by its share of
// the file.
type declaredSizeError struct {
	file          string
	size          int
	largest       string
	largestImages int
	largestSize   int
}

func (e *declaredSizeError) Error() string {
	return fmt.Sprintf("the declared caches would take %s in %s, %v of %d MiB (%s) as stored; the largest is %s (%s, %s); "+
		"nothing written: declare fewer images or delete caches",
		plural(e.size, "byte"), e.file, errDeclaredTooLarge, maxDeclaredSize>>20, plural(maxDeclaredSize, "byte"),
		esc(e.largest), plural(e.largestImages, "image"), plural(e.largestSize, "byte"))
}

func (e *declaredSizeError) Unwrap() error { return errDeclaredTooLarge }

// encodeDeclared returns the declared file's content for specs, sorted.
func encodeDeclared(specs []cacheSpec) ([]byte, error) {
	sortSpecs(specs)
	if specs == nil {
		specs = []cacheSpec{}
	}
	data, err := json.MarshalIndent(declared{Version: declaredVersion, Caches: specs}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// checkDeclaredSize refuses data, the declared file's content for specs,
// when it exceeds maxDeclaredSize.
func (p cachePaths) checkDeclaredSize(specs []cacheSpec, data []byte) error {
	if len(data) <= maxDeclaredSize {
		return nil
	}
	e := &declaredSizeError{file: p.declared(), size: len(data)}
	for _, s := range specs {
		// A cache's share: its indented object, its indent, comma and newline.
		b, err := json.MarshalIndent(s, "    ", "  ")
		if err != nil {
			return err
		}
		if n := len(b) + 6; n > e.largestSize {
			e.largest, e.largestImages, e.largestSize = s.ref(), len(s.Images), n
		}
	}
	return e
}

// saveDeclared replaces the declared file atomically (fresh temporary name,
// fsync, rename, directory fsync), never through a symbolic link. A set
// over maxDeclaredSize is refused (a *declaredSizeError) and nothing is
// written.
func (p cachePaths) saveDeclared(specs []cacheSpec) error {
	data, err := encodeDeclared(specs)
	if err != nil {
		return err
	}
	if err := p.checkDeclaredSize(specs, data); err != nil {
		return err
	}
	if err := os.MkdirAll(p.base, 0o700); err != nil {
		return describeFSError(err)
	}
	return describeFSError(atomicfile.WriteFile(p.base, declaredFile, data, 0o600))
}

// fileLock is a lock on a file of the state directory (package filelock).
type fileLock struct{ l *filelock.Lock }

// lockFile takes an exclusive lock on dir/name, creating it and recording
// this process in it; wait says whether to wait for another holder or fail
// at once with an error matching errLockHeld.
func lockFile(dir, name string, wait bool) (*fileLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, describeFSError(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, describeFSError(err)
	}
	defer root.Close()
	take := filelock.TryLock
	if wait {
		take = filelock.WaitLock
	}
	l, err := take(root, name)
	if err != nil {
		return nil, describeFSError(err)
	}
	return &fileLock{l: l}, nil
}

// errLockHeld is matched by lockFile's error when another process holds
// the lock.
var errLockHeld = filelock.ErrHeld

func (l *fileLock) unlock() {
	if l != nil {
		l.l.Close()
	}
}

// runningCacheRun returns the PID of the "cache run" working the state
// directory base, -1 if one runs but its PID is unknown, or 0 if none runs.
// It writes nothing (filelock.Probe).
func runningCacheRun(base string) int {
	root, err := os.OpenRoot(base)
	if err != nil {
		return 0
	}
	defer root.Close()
	h, held, err := filelock.Probe(root, runLock)
	switch {
	case err != nil || !held:
		return 0
	case h.PID <= 0:
		return -1
	}
	return h.PID
}

// declaredChange is one change "cache apply" or "cache delete" made.
type declaredChange struct {
	Cache  string `json:"cache"`
	Action string `json:"action"` // created, configured, unchanged, deleted
	Images int    `json:"images"`
}

// declaredOutput is what apply and delete print with -o json or yaml.
type declaredOutput struct {
	Changes []declaredChange `json:"changes"`
	// CacheRunPID is the "cache run" that picks the change up, if one runs.
	CacheRunPID int `json:"cacheRunPID,omitempty"`
}

// updateDeclared changes the declared caches under the lock: change gets
// the current set and returns the new one.
func (p cachePaths) updateDeclared(change func([]cacheSpec) ([]cacheSpec, error)) error {
	l, err := lockFile(p.base, declaredLock, true)
	if err != nil {
		return err
	}
	defer l.unlock()
	current, _, err := p.loadDeclared()
	if err != nil {
		return err
	}
	next, err := change(current)
	if err != nil {
		return err
	}
	return p.saveDeclared(next)
}

// fileStamp identifies a version of a file without reading it: an atomic
// replacement always changes the inode, an edit in place the size or the
// modification time.
type fileStamp struct {
	exists bool
	dev    uint64
	ino    uint64
	size   int64
	mtime  int64 // nanoseconds
	ctime  syscall.Timespec
}

func stampOf(path string) fileStamp {
	fi, err := os.Lstat(path)
	if err != nil {
		return fileStamp{}
	}
	st := fileStamp{exists: true, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.dev, st.ino, st.ctime = uint64(sys.Dev), sys.Ino, sys.Ctim
	}
	return st
}
