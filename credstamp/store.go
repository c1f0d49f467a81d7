package credstamp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/pullrecords/pullrecords/atomicfile"
	"github.com/pullrecords/pullrecords/internal/keylock"
)

const (
	dirPerm  fs.FileMode = 0o700
	filePerm fs.FileMode = 0o600
	// writerStripes serialise the writers of one file name.
	writerStripes = 64
)

// Store is the set of verification stamps in one directory, all held in
// memory. It is safe for concurrent use.
type Store struct {
	logger  klog.Logger
	dir     string
	root    *atomicfile.Root
	clock   clock.PassiveClock
	writers *keylock.Set // by file name: Stamp of one key, and Prune (all)
	// readOnly stores (OpenReadOnly) refuse every write; root is nil when
	// the directory did not exist.
	readOnly bool

	mu     sync.RWMutex
	stamps map[Key]time.Time // when each key was last verified
}

// Open opens the stamps in dir, creating it (0700, with parents) if needed
// and narrowing its mode to 0700 if it is wider. It reads every stamp file
// once; a file that is not a valid stamp for its own name is logged and
// ignored (it vouches for nothing) and left for Prune to remove.
func Open(logger klog.Logger, dir string, opts ...Option) (*Store, error) {
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("opening verification stamps in %s: %w", dir, err)
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("opening verification stamps in %s: %w", dir, err)
	} else if fi.Mode().Perm()&^dirPerm != 0 {
		if err := os.Chmod(dir, dirPerm); err != nil {
			return nil, fmt.Errorf("opening verification stamps in %s: narrowing mode %v to %v: %w", dir, fi.Mode().Perm(), dirPerm, err)
		}
	}
	return open(logger, dir, false, opts)
}

// OpenReadOnly opens the stamps in dir for Fresh alone, changing nothing
// on disk: no directory is created or narrowed, no file written or
// removed. A directory that does not exist holds no stamps (every key is
// stale). Stamp, Inherit and Prune of a read-only store return
// ErrReadOnly. For an operator's command explaining what a running process
// decides.
func OpenReadOnly(logger klog.Logger, dir string, opts ...Option) (*Store, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		o := openOptions(opts)
		return &Store{logger: logger, dir: dir, clock: o.clock, readOnly: true, writers: keylock.New(1), stamps: map[Key]time.Time{}}, nil
	}
	return open(logger, dir, true, opts)
}

func openOptions(opts []Option) options {
	o := options{clock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// open reads the stamps of the existing directory dir.
func open(logger klog.Logger, dir string, readOnly bool, opts []Option) (*Store, error) {
	o := openOptions(opts)
	root, err := atomicfile.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening verification stamps in %s: %w", dir, err)
	}
	s := &Store{
		logger:   logger,
		dir:      dir,
		root:     root,
		clock:    o.clock,
		readOnly: readOnly,
		writers:  keylock.New(writerStripes),
		stamps:   make(map[Key]time.Time),
	}
	entries, err := s.readDir()
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("opening verification stamps in %s: %w", dir, err)
	}
	ignored := 0
	for _, e := range entries {
		if !isStampFileName(e.Name()) {
			continue
		}
		k, t, err := s.load(e)
		if err != nil {
			ignored++
			logger.Info("Ignoring a verification stamp file: it vouches for nothing", "path", filepath.Join(dir, e.Name()), "err", err)
			continue
		}
		s.stamps[k] = t
	}
	logger.V(2).Info("Opened verification stamps", "dir", dir, "stamps", len(s.stamps), "ignored", ignored, "readOnly", readOnly)
	return s, nil
}

// readDir lists the directory.
func (s *Store) readDir() ([]fs.DirEntry, error) {
	f, err := s.root.OSRoot().Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// load reads and decodes the stamp file of entry e.
func (s *Store) load(e fs.DirEntry) (Key, time.Time, error) {
	if !e.Type().IsRegular() {
		return Key{}, time.Time{}, fmt.Errorf("%w: not a regular file (%v)", ErrInvalidStampFile, e.Type())
	}
	data, err := atomicfile.ReadFile(s.dir, e.Name(), maxFileSize)
	if err != nil {
		return Key{}, time.Time{}, fmt.Errorf("%w: %w", ErrInvalidStampFile, err)
	}
	return decodeStamp(e.Name(), data)
}

// Fresh reports whether k was stamped less than ttl ago. A stamp dated in
// the future (the clock was set back) is not fresh, so moving the clock
// never extends trust beyond ttl; a ttl of zero or less is never fresh.
// Fresh reads memory only and allocates nothing.
func (s *Store) Fresh(k Key, ttl time.Duration) bool {
	if ttl <= 0 {
		return false
	}
	s.mu.RLock()
	t, ok := s.stamps[k]
	s.mu.RUnlock()
	return ok && fresh(t, s.clock.Now(), ttl)
}

// fresh reports whether a stamp made at t is fresh at now for ttl: never
// for a ttl of zero or less, nor for a stamp dated after now.
func fresh(t, now time.Time, ttl time.Duration) bool {
	return !t.After(now) && now.Sub(t) < ttl
}

// Stamp records that k was verified now. It writes k's file atomically and
// durably (atomicfile), then updates memory: when Stamp returns nil, the
// stamp survives a crash or a power loss; when it returns an error, Fresh
// does not see this stamp (an older one of k may still be fresh).
func (s *Store) Stamp(k Key) error {
	if s.readOnly {
		return fmt.Errorf("stamping a verification in %s: %w", s.dir, ErrReadOnly)
	}
	if err := k.validate(); err != nil {
		return err
	}
	unlock := s.writers.Lock(k.fileName())
	defer unlock()
	return s.writeLocked(k, s.clock.Now())
}

// Inherit gives to the stamp of from, with from's time, as durably as
// Stamp: for a credential that was accepted because another one had been
// verified (a rotated secret taking the place of the one whose pull
// proved it), so that it vouches exactly as long as that one would have.
// It changes nothing, and returns nil, when from has no stamp or to
// already has one at least as recent; it never makes a stamp newer than
// from's, so inheriting extends no trust.
func (s *Store) Inherit(to, from Key) error {
	if s.readOnly {
		return fmt.Errorf("stamping a verification in %s: %w", s.dir, ErrReadOnly)
	}
	if err := to.validate(); err != nil {
		return err
	}
	unlock := s.writers.Lock(to.fileName())
	defer unlock()
	s.mu.RLock()
	t, ok := s.stamps[from]
	have, haveOK := s.stamps[to]
	s.mu.RUnlock()
	if !ok || (haveOK && !have.Before(t)) {
		return nil
	}
	return s.writeLocked(to, t)
}

// writeLocked writes k's file stamped at t, then memory; the caller holds
// the writer lock of k's file name.
func (s *Store) writeLocked(k Key, t time.Time) error {
	data, err := encodeStamp(k, t)
	if err != nil {
		return fmt.Errorf("stamping a verification in %s: %w", s.dir, err)
	}
	if err := atomicfile.Replace(s.root, k.fileName(), data, atomicfile.Options{Perm: filePerm}); err != nil {
		return fmt.Errorf("stamping a verification in %s: %w", s.dir, err)
	}
	s.mu.Lock()
	s.stamps[k] = t
	s.mu.Unlock()
	return nil
}

// Prune removes every stamp that is not fresh for ttl (expired or dated in
// the future), every stamp-named file that vouches for nothing, and
// temporary files a crash during Stamp left behind; it leaves other names
// alone. A valid, fresh stamp file that memory does not hold (another
// process wrote it) is kept and loaded. It returns how many entries it
// removed and every error it met.
func (s *Store) Prune(ttl time.Duration) (removed int, err error) {
	if s.readOnly {
		return 0, fmt.Errorf("pruning verification stamps in %s: %w", s.dir, ErrReadOnly)
	}
	unlockAll := s.writers.LockAll()
	defer unlockAll()
	entries, err := s.readDir()
	if err != nil {
		return 0, fmt.Errorf("pruning verification stamps in %s: %w", s.dir, err)
	}
	now := s.clock.Now()
	known := make(map[string]Key)
	s.mu.RLock()
	for k := range s.stamps {
		known[k.fileName()] = k
	}
	s.mu.RUnlock()

	var errs []error
	remove := func(name string) bool {
		if err := s.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("pruning verification stamps in %s: %w", s.dir, err))
			return false
		}
		removed++
		return true
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case isStampTempName(name):
			remove(name)
		case !isStampFileName(name):
		default:
			if k, ok := known[name]; ok {
				s.mu.RLock()
				t := s.stamps[k]
				s.mu.RUnlock()
				if !fresh(t, now, ttl) {
					if remove(name) {
						s.mu.Lock()
						delete(s.stamps, k)
						s.mu.Unlock()
					}
				}
				continue
			}
			k, t, err := s.load(e)
			if err == nil && fresh(t, now, ttl) {
				s.mu.Lock()
				s.stamps[k] = t
				s.mu.Unlock()
				continue
			}
			remove(name)
		}
	}
	if removed > 0 {
		if err := s.root.SyncDir(); err != nil {
			errs = append(errs, fmt.Errorf("pruning verification stamps in %s: %w", s.dir, err))
		}
	}
	s.logger.V(2).Info("Pruned verification stamps", "dir", s.dir, "removed", removed)
	return removed, errors.Join(errs...)
}

// isStampTempName reports whether name is a temporary file of a stamp
// write (atomicfile.TempName of a stamp file name).
func isStampTempName(name string) bool {
	rest, ok := strings.CutPrefix(name, ".")
	if !ok || len(rest) < fileNameLen || !isStampFileName(rest[:fileNameLen]) {
		return false
	}
	rest, ok = strings.CutSuffix(rest[fileNameLen:], ".tmp")
	if !ok || len(rest) != 17 || rest[0] != '.' {
		return false
	}
	return isLowerHex(rest[1:])
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Close releases the directory. The Store must not be used afterwards.
func (s *Store) Close() error {
	if s.root == nil {
		return nil
	}
	return s.root.Close()
}
