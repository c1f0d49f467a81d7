package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/pullrecords/pullrecords/atomicfile"
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
	// "cache apply" makes.
	if len(d.Caches) > 0 {
		raw, _ := json.Marshal(d.Caches)
		if _, err := parseCacheFile(p.declared(), raw); err != nil {
			return nil, true, err
		}
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

// saveDeclared replaces the declared file atomically (fresh temporary name,
// fsync, rename, directory fsync), never through a symbolic link.
func (p cachePaths) saveDeclared(specs []cacheSpec) error {
	sortSpecs(specs)
	if specs == nil {
		specs = []cacheSpec{}
	}
	data, err := json.MarshalIndent(declared{Version: declaredVersion, Caches: specs}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.base, 0o700); err != nil {
		return describeFSError(err)
	}
	return describeFSError(atomicfile.WriteFile(p.base, declaredFile, append(data, '\n'), 0o600))
}

// fileLock is an flock(2) lock on a file of the state directory.
type fileLock struct{ f *os.File }

// lockFile takes an exclusive lock on dir/name, creating it; wait says
// whether to wait for another holder or fail with errLockHeld at once.
func lockFile(dir, name string, wait bool) (*fileLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, describeFSError(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, describeFSError(err)
	}
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLockHeld
		}
		return nil, fmt.Errorf("cannot lock %s: %w", filepath.Join(dir, name), err)
	}
	return &fileLock{f: f}, nil
}

var errLockHeld = errors.New("lock held by another process")

func (l *fileLock) unlock() {
	if l != nil && l.f != nil {
		l.f.Close() // closing drops the flock
		l.f = nil
	}
}

// writePID records the holder in the lock file, for the messages of others.
func (l *fileLock) writePID() {
	if err := l.f.Truncate(0); err == nil {
		_, _ = l.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
}

// runningCacheRun returns the PID of the "cache run" working the state
// directory base, -1 if one runs but its PID is unknown, or 0 if none runs.
// It writes nothing: the lock file is opened read-only, never created, and
// tried with a shared lock that fails while a run holds it exclusively.
func runningCacheRun(base string) int {
	f, err := os.OpenFile(filepath.Join(base, runLock), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if err == nil || !errors.Is(err, syscall.EWOULDBLOCK) {
		return 0
	}
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, perr := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if perr != nil || pid <= 0 {
		return -1
	}
	return pid
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
