package fsstore

import (
	"github.com/pullrecords/pullrecords/filelock"
	"github.com/pullrecords/pullrecords/internal/keylock"

	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

// Names of the store's directories, as the kubelet names them.
const (
	// DirName is the store's directory inside the kubelet root directory.
	DirName = "image_manager"
	// IntentsDir holds one file per image pull intent.
	IntentsDir = "pulling"
	// RecordsDir holds one file per image pulled record.
	RecordsDir = "pulled"
)

// quarantineDir, inside DirName, is where Repair moves files it cannot use.
const quarantineDir = "quarantine"

const (
	dirPerm  fs.FileMode = 0o700
	filePerm fs.FileMode = 0o600
	// maxFileSize bounds what the store reads from one file. The kubelet's
	// records are a few KiB; a record with 100 secrets under 50 names is
	// still far below this.
	maxFileSize = 32 << 20
	namePrefix  = "sha256-"
	tempSuffix  = ".tmp"
)

// FileName returns the name of the file that stores key: "sha256-" followed
// by the lowercase hex SHA-256 of the raw key, exactly as the kubelet names
// it. For an intent the key is the pod's image string; for a pulled record
// it is the imageRef.
func FileName(key string) string {
	sum := sha256.Sum256([]byte(key))
	var b [len(namePrefix) + 2*sha256.Size]byte
	copy(b[:], namePrefix)
	hex.Encode(b[len(namePrefix):], sum[:])
	return string(b[:])
}

// Option configures New. The options take no values; a combination New
// cannot use (WithoutScan without WithReadOnly) makes it fail with an error
// matching ErrInvalidOption that names the options, before it touches the
// directory.
type Option func(*options)

type options struct {
	noSync   bool
	readOnly bool
	noScan   bool // WithoutScan
	workers  int
	// wrap, when set, wraps each directory's file system (tests only).
	wrap func(dir string, d dirFS) dirFS
}

// WithoutSync turns off every fsync of files and directories. Writes stay
// atomic with respect to a process crash but may be lost, or leave an empty
// file, on power loss. For tests and benchmarks only.
func WithoutSync() Option { return func(o *options) { o.noSync = true } }

// WithReadOnly opens the store without creating directories, migrating old
// files or sweeping temporary files. Writes and deletes return ErrReadOnly.
// The directories must exist.
func WithReadOnly() Option { return func(o *options) { o.readOnly = true } }

// withFS wraps the store's file-system access (tests only).
func withFS(wrap func(dir string, d dirFS) dirFS) Option {
	return func(o *options) { o.wrap = wrap }
}

// Store is the kubelet-compatible directory store. It implements
// accessor.PullRecordsAccessor and accessor.RecordCounter. All methods are
// safe for concurrent use.
type Store struct {
	opts    options
	intents *dir
	records *dir
	locks   *keylock.Set   // serialise writers and deleters of one file name
	lock    *filelock.Lock // holds the store's flock; nil when read-only

	life   sync.RWMutex // held for reading by every operation, for writing by Close
	closed bool
}

var (
	_ accessor.PullRecordsAccessor = (*Store)(nil)
	_ accessor.RecordCounter       = (*Store)(nil)
	_ accessor.PulledRecordRanger  = (*Store)(nil)
)

// New opens the store in <kubeletDir>/image_manager, creating the directories
// (0700, with parents) when they are missing.
//
// Unless read-only, it first takes the store's exclusive lock (LockFile):
// if another writer, in this process or another, holds it, New fails at
// once with a *LockedError (errors.Is(err, ErrLocked)). Close releases it;
// it also dies with the process.
//
// It then reads both directories once: it removes stray temporary files and
// rewrites v1alpha1 files as v1beta1 (both only when writable, under the
// lock), counts the files and keeps what it decoded for the first list of
// each kind.
func New(logger klog.Logger, kubeletDir string, opts ...Option) (*Store, error) {
	o := options{workers: runtime.GOMAXPROCS(0)}
	for _, opt := range opts {
		opt(&o)
	}
	if o.noScan && !o.readOnly {
		return nil, fmt.Errorf("opening pull records in %s: %w: WithoutScan without WithReadOnly: a writable store reads its directories at open", kubeletDir, ErrInvalidOption)
	}
	intentsFS, recordsFS, lock, err := openDirs(logger, kubeletDir, !o.readOnly, !o.noSync)
	if err != nil {
		return nil, fmt.Errorf("opening pull records in %s: %w", kubeletDir, err)
	}
	base := filepath.Join(kubeletDir, DirName)
	s := &Store{
		opts:    o,
		locks:   keylock.New(lockStripes),
		lock:    lock,
		intents: newDir(IntentsDir, filepath.Join(base, IntentsDir), accessor.KindImagePullIntent, "image pull intents", intentsFS),
		records: newDir(RecordsDir, filepath.Join(base, RecordsDir), accessor.KindImagePulledRecord, "image pulled records", recordsFS),
	}
	if o.wrap != nil {
		s.intents.fs = o.wrap(IntentsDir, s.intents.fs)
		s.records.fs = o.wrap(RecordsDir, s.records.fs)
	}
	for _, d := range []*dir{s.intents, s.records} {
		if o.noScan {
			break
		}
		if err := s.open(logger, d); err != nil {
			s.intents.fs.Close()
			s.records.fs.Close()
			if lock != nil {
				lock.Close()
			}
			return nil, fmt.Errorf("opening pull records in %s: %w", kubeletDir, err)
		}
	}
	return s, nil
}

// openDirs makes sure the store's directories exist and are real
// directories, not symbolic links, and opens them. When writable it creates
// missing directories and takes the store's lock, returned as lock.
func openDirs(logger klog.Logger, kubeletDir string, writable, sync bool) (intents, records *rootDir, lock *filelock.Lock, err error) {
	if writable {
		if err := mkdirAll(kubeletDir, sync); err != nil {
			return nil, nil, nil, err
		}
	}
	root, err := os.OpenRoot(kubeletDir)
	if err != nil {
		return nil, nil, nil, err
	}
	defer root.Close()
	for _, sub := range []string{DirName, DirName + "/" + IntentsDir, DirName + "/" + RecordsDir} {
		if err := ensureDir(root, sub, writable, sync); err != nil {
			return nil, nil, nil, err
		}
	}
	if writable {
		if lock, err = lockStore(logger, root, kubeletDir); err != nil {
			return nil, nil, nil, err
		}
	}
	fail := func(err error) (*rootDir, *rootDir, *filelock.Lock, error) {
		if lock != nil {
			lock.Close()
		}
		return nil, nil, nil, err
	}
	intents, err = openRootDir(root, DirName+"/"+IntentsDir)
	if err != nil {
		return fail(err)
	}
	records, err = openRootDir(root, DirName+"/"+RecordsDir)
	if err != nil {
		intents.Close()
		return fail(err)
	}
	return intents, records, lock, nil
}

// ensureDir checks that sub (a slash-separated path inside root) is a real
// directory, not a symbolic link, creating it with mode 0700 when missing and
// create is set, and syncing its parent after creating it when sync is set.
// It is the only place the package creates a directory: mkdirAll uses it for
// the kubelet directory's missing parents too.
func ensureDir(root *os.Root, sub string, create, sync bool) error {
	fi, err := root.Lstat(sub)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%w: %s is %v", ErrUnsafeDir, filepath.Join(root.Name(), sub), fi.Mode().Type())
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) || !create {
		return err
	}
	if err := root.Mkdir(sub, dirPerm); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ensureDir(root, sub, false, sync)
		}
		return err
	}
	// Mkdir honours the umask; the kubelet's directories are 0700 exactly.
	if err := root.Chmod(sub, dirPerm); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	parent, err := root.Open(path.Dir(sub))
	if err != nil {
		return err
	}
	defer parent.Close()
	if err := parent.Sync(); err != nil {
		return err
	}
	if dirSynced != nil {
		dirSynced(filepath.Join(root.Name(), filepath.FromSlash(path.Dir(sub))))
	}
	return nil
}

// dirSynced, when set (tests only), is told each directory synced after a
// directory was created in it.
var dirSynced func(dir string)

// mkdirAll makes sure p is a directory, creating it and its missing parents
// through ensureDir (mode 0700, each parent synced after a directory is
// created in it when sync is set). The directories that already exist, p
// included, may be symbolic links to directories: they are the caller's
// configuration, not data. A directory created here must stay a real one.
func mkdirAll(p string, sync bool) error {
	// Walk up to the nearest directory that exists, remembering the
	// missing names below it.
	base := filepath.Clean(p)
	var missing []string
	for {
		fi, err := os.Stat(base)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s: %w", base, ErrUnsafeDir)
			}
			break
		}
		parent := filepath.Dir(base)
		if !errors.Is(err, fs.ErrNotExist) || parent == base {
			return err
		}
		missing = append(missing, filepath.Base(base))
		base = parent
	}
	if len(missing) == 0 {
		return nil
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		return err
	}
	defer root.Close()
	sub := ""
	for _, name := range slices.Backward(missing) {
		sub = path.Join(sub, name)
		if err := ensureDir(root, sub, true, sync); err != nil {
			return err
		}
	}
	return nil
}

// Close releases the directories and, for a writable store, the lock, so
// another writer may open the store. Every later call returns ErrClosed.
func (s *Store) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err1 := s.intents.fs.Close()
	err2 := s.records.fs.Close()
	var err3 error
	if s.lock != nil {
		// Closing the only descriptor of the lock file releases the flock.
		err3 = s.lock.Close()
	}
	return errors.Join(err1, err2, err3)
}

// begin marks the start of an operation; the returned function ends it.
func (s *Store) begin(write bool) (func(), error) {
	if write && s.opts.readOnly {
		return nil, ErrReadOnly
	}
	s.life.RLock()
	if s.closed {
		s.life.RUnlock()
		return nil, ErrClosed
	}
	return s.life.RUnlock, nil
}

// ListImagePullIntents returns every readable intent, sorted by file name.
// Unreadable files are reported in one *accessor.ListError.
func (s *Store) ListImagePullIntents() ([]*accessor.ImagePullIntent, error) {
	return listOf(s, s.intents, intentOf)
}

// ListImagePulledRecords returns every readable pulled record, sorted by file
// name. Unreadable files are reported in one *accessor.ListError.
func (s *Store) ListImagePulledRecords() ([]*accessor.ImagePulledRecord, error) {
	return listOf(s, s.records, recordOf)
}

// RangeImagePulledRecords calls fn with every record ListImagePulledRecords
// would return, from up to one goroutine per core at once, and returns the
// error it would return. It never holds every decoded record at once: the
// first call after open decodes the files New read block by block, and
// releases each block once fn has seen it.
func (s *Store) RangeImagePulledRecords(fn func(*accessor.ImagePulledRecord)) error {
	return s.eachListed(s.records, nil, func(_ int, dec *accessor.Decoded) { fn(dec.Record) })
}

func intentOf(dec *accessor.Decoded) *accessor.ImagePullIntent   { return dec.Intent }
func recordOf(dec *accessor.Decoded) *accessor.ImagePulledRecord { return dec.Record }

// listOf is both lists: what pick takes from every readable entry of d, in
// file-name order, and the error eachListed returns.
func listOf[T any](s *Store, d *dir, pick func(*accessor.Decoded) *T) ([]*T, error) {
	var out []*T
	err := s.eachListed(d, func(n int) { out = make([]*T, n) }, func(i int, dec *accessor.Decoded) { out[i] = pick(dec) })
	if out == nil {
		return nil, err // the directory could not be listed
	}
	return slices.DeleteFunc(out, func(v *T) bool { return v == nil }), err
}

// eachListed is the one implementation of the lists and of
// RangeImagePulledRecords. It lists d (the open-time snapshot the first
// time, the disk otherwise), calls start (when not nil) with the number of
// entries listed, then fn with the index and content of every readable
// entry, from up to one goroutine per core, and returns the
// *accessor.ListError naming every other entry, or nil. An error listing the
// directory is returned before start is called.
func (s *Store) eachListed(d *dir, start func(n int), fn func(i int, dec *accessor.Decoded)) error {
	end, err := s.begin(false)
	if err != nil {
		return err
	}
	defer end()
	entries, err := d.list(s.opts.workers)
	if err != nil {
		return err
	}
	if start != nil {
		start(len(entries))
	}
	d.each(entries, s.opts.workers, func(i int, l *loaded) {
		if l.err == nil {
			fn(i, &l.dec)
		}
	})
	return listError(d, entries)
}

// listError returns the *accessor.ListError naming every entry that could
// not be read, in file-name order, or nil.
func listError(d *dir, entries []loaded) error {
	var errs []error
	for _, e := range entries {
		if e.err != nil {
			errs = append(errs, e.err)
		}
	}
	if len(errs) > 0 {
		return &accessor.ListError{What: d.what, Errs: errs}
	}
	return nil
}

// ImagePullIntentExists reports whether an intent for exactly image is
// stored. A file whose content names another image is "not found"; an
// unreadable file is an error.
func (s *Store) ImagePullIntentExists(image string) (bool, error) {
	if err := accessor.ValidateKey(image); err != nil {
		return false, err
	}
	end, err := s.begin(false)
	if err != nil {
		return false, err
	}
	defer end()
	dec, found, err := s.intents.get(FileName(image))
	if err != nil || !found {
		return false, err
	}
	return dec.Intent.Image == image, nil
}

// GetImagePulledRecord returns the record for imageRef: (nil, false, nil)
// when there is no file or the file names another imageRef, and
// (nil, true, err) when the file exists but cannot be used (for an
// undecodable, oversized or non-regular file err is an
// *accessor.CorruptRecordError) or cannot be read because of an I/O error
// (err is then the wrapped I/O error, not a CorruptRecordError), so callers
// fail safe either way.
func (s *Store) GetImagePulledRecord(imageRef string) (*accessor.ImagePulledRecord, bool, error) {
	if err := accessor.ValidateKey(imageRef); err != nil {
		return nil, false, err
	}
	end, err := s.begin(false)
	if err != nil {
		return nil, false, err
	}
	defer end()
	dec, found, err := s.records.get(FileName(imageRef))
	if err != nil {
		return nil, true, err
	}
	if !found || dec.Record.ImageRef != imageRef {
		return nil, false, nil
	}
	return dec.Record, true, nil
}

// WriteImagePullIntent stores an intent for image, replacing any existing one.
func (s *Store) WriteImagePullIntent(logger klog.Logger, image string) error {
	if err := accessor.ValidateKey(image); err != nil {
		return err
	}
	data, err := accessor.EncodeIntent(&accessor.ImagePullIntent{Image: image})
	if err != nil {
		return fmt.Errorf("encoding image pull intent: %w", err)
	}
	end, err := s.begin(true)
	if err != nil {
		return err
	}
	defer end()
	return s.put(logger, s.intents, FileName(image), data)
}

// WriteImagePulledRecord stores record under record.ImageRef, replacing any
// existing one. The time is stored as accessor.StorageTime gives it; a time
// outside the years 0000-9999 UTC is rejected with accessor.ErrTimeOutOfRange
// (RFC 3339 cannot hold it, so the file would not read back).
func (s *Store) WriteImagePulledRecord(logger klog.Logger, record *accessor.ImagePulledRecord) error {
	if record == nil {
		return accessor.ErrNilRecord
	}
	if err := accessor.ValidateKey(record.ImageRef); err != nil {
		return err
	}
	data, err := accessor.EncodePulledRecord(record.ForStorage())
	if err != nil {
		return fmt.Errorf("encoding image pulled record: %w", err)
	}
	end, err := s.begin(true)
	if err != nil {
		return err
	}
	defer end()
	return s.put(logger, s.records, FileName(record.ImageRef), data)
}

// DeleteImagePullIntent removes the intent for image. A missing intent is not
// an error.
func (s *Store) DeleteImagePullIntent(logger klog.Logger, image string) error {
	if err := accessor.ValidateKey(image); err != nil {
		return err
	}
	end, err := s.begin(true)
	if err != nil {
		return err
	}
	defer end()
	return s.remove(logger, s.intents, FileName(image))
}

// DeleteImagePulledRecord removes the record for imageRef. A missing record
// is not an error.
func (s *Store) DeleteImagePulledRecord(logger klog.Logger, imageRef string) error {
	if err := accessor.ValidateKey(imageRef); err != nil {
		return err
	}
	end, err := s.begin(true)
	if err != nil {
		return err
	}
	defer end()
	return s.remove(logger, s.records, FileName(imageRef))
}

// CountImagePullIntents returns the number of intent files, readable or not,
// without touching the disk (a store opened WithoutScan lists the directory).
func (s *Store) CountImagePullIntents() int { return s.countOf(s.intents) }

// CountImagePulledRecords returns the number of pulled record files, readable
// or not, without touching the disk (a store opened WithoutScan lists the
// directory).
func (s *Store) CountImagePulledRecords() int { return s.countOf(s.records) }

func (s *Store) put(logger klog.Logger, d *dir, name string, data []byte) error {
	unlock := s.locks.Lock(name)
	defer unlock()
	if err := d.put(name, data, !s.opts.noSync); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Join(d.path, name), err)
	}
	logger.V(5).Info("Wrote pull record file", "dir", d.name, "file", name)
	return nil
}

func (s *Store) remove(logger klog.Logger, d *dir, name string) error {
	unlock := s.locks.Lock(name)
	defer unlock()
	if err := d.remove(name, !s.opts.noSync); err != nil {
		return fmt.Errorf("removing %s: %w", filepath.Join(d.path, name), err)
	}
	logger.V(5).Info("Removed pull record file", "dir", d.name, "file", name)
	return nil
}

// lockStripes is the number of per-file-name locks: writers of different
// names rarely share one, writers of one name always do.
const lockStripes = 64
